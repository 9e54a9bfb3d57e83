"""Agent and coder modes as rules (SPEC §3): which tools a mode offers, what needs the user's
approval, how an edit applies and how a long output is cut. Values and pure functions only;
the tools themselves run in engine/tools.py.

- chat: the session tools (`session_search`, `session_read`, `recall`), which only read the user's
  own store;
- agent: those, plus reading the working directory (`read_file`, `list_dir`, `grep`) and
  `run_shell`;
- coder: all of agent's, plus `write_file` and `edit_file`.

Every shell command and every file write asks for approval (y / n / always for this session);
reads never do, and are confined to the working directory like writes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from chatcli.core.terminal import printable

MODES = ("chat", "agent", "coder")

# What a tool does, which decides whether it is offered and whether it asks first.
SESSION, READ, SHELL, WRITE = "session", "read", "shell", "write"
KINDS = {"chat": (SESSION,), "agent": (SESSION, READ, SHELL), "coder": (SESSION, READ, SHELL, WRITE)}
ASKS = (SHELL, WRITE)  # kinds that ask the user before they run

# The user's answers to an approval question.
YES, NO, ALWAYS = "yes", "no", "always"


def kinds_for(mode: str, writes: bool = True) -> tuple[str, ...]:
    """The kinds of tool `mode` offers; without `writes` (an MCP server not started with
    --allow-writes) only those that change nothing."""
    kinds = KINDS[mode]
    return kinds if writes else tuple(k for k in kinds if k not in ASKS)


@dataclass(frozen=True)
class Approval:
    """A question to the user before a tool runs: `title` is one line ("run: make test",
    "write notes.md (+3 −1)"), `detail` what to look at first (a diff, the command). Both are
    made `printable` here: what the model wrote cannot move the cursor or erase a line to make
    the question say something else than what will run."""

    kind: str
    tool: str
    title: str
    detail: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "title", printable(self.title.replace("\n", " ")))
        object.__setattr__(self, "detail", printable(self.detail))


def ask(read: Callable[[str], str], prompt: str = "Allow? (y)es / (n)o / (a)lways for this session: ") -> str:
    """Ask the approval question with `read` until the answer is one; end of input is NO."""
    while True:
        try:
            answer = parse_answer(read(prompt))
        except EOFError:
            return NO
        if answer is not None:
            return answer


def parse_answer(text: str) -> str | None:
    """'y'/'yes' → YES, 'n'/'no' → NO, 'a'/'always' → ALWAYS; anything else None (ask again)."""
    word = text.strip().lower()
    for answer in (YES, NO, ALWAYS):
        if word and answer.startswith(word):
            return answer
    return None


def apply_edit(text: str, old: str, new: str, replace_all: bool = False) -> str:
    """`text` with `old` replaced by `new`: exactly one occurrence unless `replace_all`.
    Raises ValueError with a sentence the model can act on."""
    if not old:
        raise ValueError("old_text is empty; give the exact text to replace (write_file replaces a whole file)")
    count = text.count(old)
    if count == 0:
        raise ValueError("old_text was not found in the file; read the file again and copy the text exactly")
    if count > 1 and not replace_all:
        raise ValueError(f"old_text occurs {count} times; include more of the surrounding lines to pick one, "
                         "or pass replace_all")
    return text.replace(old, new) if replace_all else text.replace(old, new, 1)


def diff(path: str, before: str | None, after: str) -> str:
    """A unified diff of a file write (`before` None: a new file)."""
    import difflib  # only when a write is planned: not on the start-up path

    lines = difflib.unified_diff((before or "").splitlines(keepends=True), after.splitlines(keepends=True),
                                 fromfile="/dev/null" if before is None else f"a/{path}", tofile=f"b/{path}")
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def diff_counts(text: str) -> tuple[int, int]:
    """(lines added, lines removed) of a unified diff."""
    added = sum(1 for line in text.splitlines() if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in text.splitlines() if line.startswith("-") and not line.startswith("---"))
    return added, removed


def head_size(limit: int) -> int:
    """How much of the start `cap` keeps (the rest of `limit` is the end)."""
    return limit * 2 // 3


def cap(text: str, limit: int) -> str:
    """`text` cut to about `limit` characters: its start and its end, with how much was left
    out between them (a command's last lines usually say how it ended)."""
    if len(text) <= limit:
        return text
    head = head_size(limit)
    return joined(text[:head], text[len(text) - (limit - head):], len(text) - limit)


def joined(head: str, tail: str, left_out: int) -> str:
    """A start and an end with what was left out between them named."""
    return f"{head}\n[… {left_out:,} characters left out …]\n{tail}" if left_out else head + tail
