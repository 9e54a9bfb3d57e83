"""One turn at a time: history → provider → (later) journal and store; binding, switching."""

from chatcli.engine.conversation import Conversation, TurnResult, load_system_prompt

__all__ = ["Conversation", "TurnResult", "load_system_prompt"]
