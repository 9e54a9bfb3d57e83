"""Typed settings from the environment and flags; the one layer that knows paths.

Import from the modules (`config.settings`, `config.paths`); this package loads nothing, so a
script that only needs a path does not pay for the settings machinery.
"""
