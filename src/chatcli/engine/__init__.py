"""One turn at a time: history → provider → store; binding, write-through, session operations.

Import from the modules (`engine.conversation`, `engine.sessions`); this package loads nothing.
"""
