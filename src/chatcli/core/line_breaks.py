"""The model's single line breaks kept in Markdown: a newline inside a paragraph becomes a hard break.

Markdown joins the lines of a paragraph into one; a chat answer means them as written (a poem,
an address, a list of steps without bullets). Code (fenced or indented), tables, rules and the
line above a setext underline are left exactly as they are, so they render as before.
"""

from __future__ import annotations

import re

_HARD_BREAK = "  "
_LINE = re.compile(r"[^\n]*\n|[^\n]+\Z")  # only LF (or CRLF) ends a line, as in Markdown
_FENCE = re.compile(r"[ \t]*(?P<fence>`{3,}|~{3,})(?P<info>.*)")
# The markers a line may open with inside a block quote or a list item, before a fence.
_CONTAINER = re.compile(r"(?:[ \t]*(?:>|[-+*][ \t]|\d{1,9}[.)][ \t]))*")
_SETEXT_UNDERLINE = re.compile(r" {0,3}(?:=+|-+)[ \t]*")
_THEMATIC_BREAK = re.compile(r" {0,3}(?:(?:\*[ \t]*){3,}|(?:_[ \t]*){3,}|(?:-[ \t]*){3,})")
_TABLE_DELIMITER = re.compile(r"[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*")


def keep_line_breaks(text: str) -> str:
    """`text` with a hard break (two trailing spaces) on every line that a single newline joins
    to the next one in a paragraph. Fenced and indented code, tables, rules, the line above a setext
    underline and lines already ending in a hard break are unchanged; line ends (LF or CRLF) stay."""
    lines = _LINE.findall(text)
    out: list[str] = []
    fence: str | None = None  # the opening fence while inside a fenced block
    in_indented_code = False
    in_table = False
    previous_blank = True
    for index, line in enumerate(lines):
        body, ending = _split_ending(line)
        following = _split_ending(lines[index + 1])[0] if index + 1 < len(lines) else None
        blank = not body.strip()

        if fence is not None:
            if _closes(body, fence):
                fence = None
            out.append(line)
            previous_blank = blank
            continue
        opened = _opens_fence(body)
        if opened is not None:
            fence = opened
            in_indented_code = in_table = False
            out.append(line)
            previous_blank = False
            continue

        if blank:
            in_table = False
        elif _indent(body) >= 4 and (previous_blank or in_indented_code):
            in_indented_code = True  # indented code cannot interrupt a paragraph, only follow a blank
        else:
            in_indented_code = False
        if not blank and _is_table_delimiter(body) and not in_indented_code:
            in_table = True

        joins_next = (
            not blank
            and following is not None  # the last line has nothing to join
            and following.strip() != ""
            and not in_indented_code
            and not in_table
            and not _is_table_delimiter(following)  # this line is a table's header row
            and not _SETEXT_UNDERLINE.fullmatch(following)  # this line is a heading's text
            and not _ends_in_hard_break(body)
            and not _SETEXT_UNDERLINE.fullmatch(body)  # a line of its own, nothing to break
            and not _THEMATIC_BREAK.fullmatch(body)
        )
        out.append(body + _HARD_BREAK + ending if joins_next else line)
        previous_blank = blank
    return "".join(out)


def _split_ending(line: str) -> tuple[str, str]:
    """The line's text and its end: "\\n", "\\r\\n", or "" for a last line still being written."""
    if line.endswith("\r\n"):
        return line[:-2], "\r\n"
    if line.endswith("\n"):
        return line[:-1], "\n"
    return line, ""


def _indent(line: str) -> int:
    return len(line.expandtabs(4)) - len(line.expandtabs(4).lstrip(" "))


def _opens_fence(line: str) -> str | None:
    """The fence (``` or ~~~, with its length) that `line` opens, after any quote or list markers."""
    match = _FENCE.fullmatch(line[_CONTAINER.match(line).end():])
    if match is None:
        return None
    fence = match.group("fence")
    if fence[0] == "`" and "`" in match.group("info"):
        return None  # ```a``` at the start of a line is inline code, not a fence
    return fence


def _closes(line: str, fence: str) -> bool:
    rest = line[_CONTAINER.match(line).end():].strip()
    return len(rest) >= len(fence) and rest == fence[0] * len(rest)


def _is_table_delimiter(line: str) -> bool:
    return "|" in line and _TABLE_DELIMITER.fullmatch(line) is not None


def _ends_in_hard_break(line: str) -> bool:
    if line.endswith(_HARD_BREAK):
        return True
    backslashes = len(line) - len(line.rstrip("\\"))
    return backslashes % 2 == 1  # an odd run ends in an unescaped backslash: already a break


__all__ = ["keep_line_breaks"]
