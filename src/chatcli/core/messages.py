"""The message value shared by every layer, and its JSON form (SPEC §3)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ROLES = ("user", "assistant", "system", "tool")

# Keys this class models; every other key of a message dict is carried in `extra`
# untouched, so fields written by other tools (images, is_error, …) are never dropped.
_KNOWN = ("role", "content", "meta", "tool_calls", "tool_call_id")


@dataclass
class Message:
    role: str
    content: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Message":
        if not isinstance(data, dict) or not isinstance(data.get("role"), str):
            raise ValueError("a message must be an object with a string 'role'")
        content = data.get("content")
        return cls(
            role=data["role"],
            content=content if isinstance(content, str) else ("" if content is None else str(content)),
            meta=dict(data.get("meta") or {}),
            tool_calls=data.get("tool_calls"),
            tool_call_id=data.get("tool_call_id"),
            extra={k: v for k, v in data.items() if k not in _KNOWN},
        )

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
