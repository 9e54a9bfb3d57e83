"""Text made safe to print on a terminal: what a model or a file wrote cannot move the cursor,
erase a line, hide what follows or reverse its direction."""

from __future__ import annotations

import re

# C0 controls but tab and newline, DEL, C1 controls, a carriage return not ending a line, and
# the Unicode format characters that reorder or hide text (bidi overrides and isolates, marks).
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]"
                      "|\r(?!\n)")


def _written_out(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` with every control character written out (`\\x1b`, `\\u202e`); newlines, tabs and
    Windows line ends stay."""
    return _CONTROL.sub(_written_out, text)
