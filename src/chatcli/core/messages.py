"""The message value shared by every layer, and its JSON form (SPEC §3)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ROLES = ("user", "assistant", "system", "tool")

# Keys this class models; every other key of a message dict is carried in `extra`
# untouched, so fields written by other tools (images, is_error, …) are never dropped.
_KNOWN = ("role", "content", "meta", "tool_calls", "tool_call_id")


@dataclass(slots=True)
class Message:
    role: str
    content: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Message":
        """Build from a parsed JSON object. Hot when loading large sessions: keep it lean.

        The object's own `meta` dict is kept (not copied): the caller hands over parsed data.
        """
        if data.__class__ is not dict:
            raise ValueError("a message must be an object with a string 'role'")
        role = data.get("role")
        if role.__class__ is not str:
            raise ValueError("a message must be an object with a string 'role'")
        content = data.get("content", "")
        if content.__class__ is not str:
            content = "" if content is None else str(content)
        meta = data.get("meta")
        tool_calls = data.get("tool_calls")
        tool_call_id = data.get("tool_call_id")
        known = 1 + ("content" in data) + (meta is not None or "meta" in data) + ("tool_calls" in data) + (
            "tool_call_id" in data
        )
        extra = {} if len(data) == known else {k: v for k, v in data.items() if k not in _KNOWN}
        return cls(role, content, meta if meta.__class__ is dict else {}, tool_calls, tool_call_id, extra)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.meta:
            out["meta"] = dict(self.meta)
        if self.tool_calls is not None:
            out["tool_calls"] = self.tool_calls
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        out.update(self.extra)
        return out
