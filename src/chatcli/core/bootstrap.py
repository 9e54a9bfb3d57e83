"""Bootstrap files: which ones exist, in what order, and how they become one system prompt."""

from __future__ import annotations

from collections.abc import Sequence

# Order of composition: who the assistant is, how it behaves, who the user is, the
# rules it must keep, then the project's instructions (AGENTS.md), the most specific last.
BOOTSTRAP_FILES: tuple[str, ...] = ("IDENTITY.md", "SOUL.md", "USER.md", "RULES.md", "AGENTS.md")


def compose_system_prompt(parts: Sequence[tuple[str, str]]) -> str:
    """Join (file name, text) pairs into one system prompt; empty files are left out."""
    sections = []
    for name, text in parts:
        text = text.strip()
        if text:
            sections.append(f"<!-- {name} -->\n{text}")
    return "\n\n".join(sections)
