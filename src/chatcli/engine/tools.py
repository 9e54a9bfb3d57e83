"""The tools the model may call (core/agent.py says which mode offers which): each is planned
first — its arguments checked, the paths confined, a write's diff made — and only then run, so
that what the user approves is exactly what happens.

`TOOLS` is the one table: name → (the function's description for the model, its kind, its
planner). A planner returns a `Plan`: the approval question (None for a tool that does not ask)
and the action that runs it. A tool's failure is an `Outcome` with `error`, given back to the
model as text; nothing here raises to the turn except Ctrl-C.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from chatcli.config.providers import KEY_VARS
from chatcli.core import agent as rules
from chatcli.core.errors import ChatcliError
from chatcli.engine import confined, recall, session_tools
from chatcli.providers.base import Tool
from chatcli.store.atomic import atomic_write, os_cause

if TYPE_CHECKING:
    from chatcli.engine.conversation import Conversation

# Directories grep and list_dir pass over: tools' and version control's, never the user's words.
SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__", ".mypy_cache",
                          ".pytest_cache", ".ruff_cache", ".tox"})
MAX_LIST = 500  # entries list_dir shows
MAX_MATCHES = 200  # lines grep shows
MAX_FILE = 10 * 1024 * 1024  # bytes read_file and edit_file take; a bigger file is refused


class ToolError(Exception):
    """A tool cannot do what it was asked; the text goes back to the model."""


@dataclass(frozen=True)
class Outcome:
    """What a call gives the model (`text`) and says to the user (`note`, one line)."""

    text: str
    note: str = ""
    error: bool = False
    refused: bool = False


@dataclass(frozen=True)
class Plan:
    approval: rules.Approval | None
    run: Callable[[], Outcome]


@dataclass(frozen=True)
class Workspace:
    """Where file tools may go: the working directory, and the directories CHATCLI_AGENT_DIRS
    adds. Paths are resolved (links followed) before they are checked."""

    root: Path
    extra: tuple[Path, ...] = ()
    home: str = ""  # the user's home directory, resolved: a root holding it is refused

    @classmethod
    def at(cls, root: Path, extra: tuple[Path, ...] = (), home: str = "") -> Workspace:
        return cls(Path(os.path.realpath(root)), tuple(Path(os.path.realpath(p)) for p in extra),
                   os.path.realpath(home) if home else "")

    def resolve(self, path: str) -> Path:
        """The real path `path` names (links followed), when it is inside; else ToolError."""
        if not isinstance(path, str) or not path.strip() or "\0" in path:
            raise ToolError("give a path (relative to the working directory)")
        candidate = Path(os.path.expanduser(path.strip()))
        real = os.path.realpath(candidate if candidate.is_absolute() else self.root / candidate)
        if any(_within(real, str(extra)) for extra in self.extra):
            return Path(real)
        if _within(real, str(self.root)):
            self.check_root()
            return Path(real)
        raise ToolError(f"{path} is outside the working directory ({self.root}); the user can allow more "
                        "directories with CHATCLI_AGENT_DIRS")

    def inside(self, real: str) -> bool:
        """Whether a resolved path is in the working directory or one CHATCLI_AGENT_DIRS adds."""
        return any(_within(real, str(allowed)) for allowed in (self.root, *self.extra))

    def base(self, real: Path) -> Path | None:
        """The allowed directory holding a resolved path (the deepest, when they nest), or None."""
        holding = [allowed for allowed in (self.root, *self.extra) if _within(str(real), str(allowed))]
        return max(holding, key=lambda allowed: len(allowed.parts), default=None)

    def check_root(self) -> None:
        """The whole file system, the home directory or one holding it is no project: file tools
        there would reach every key and every file the user has, with no question for reads."""
        root, home = str(self.root), self.home
        if root == os.sep or (home and _within(home, root)):
            raise ToolError(f"the working directory is {root}, which holds the user's home directory: too broad "
                            "to work in; the user should start chatcli in a project directory")

    def show(self, path: Path) -> str:
        """How a path is named to the user and the model: relative to the root when inside it."""
        try:
            return str(path.relative_to(self.root)) or "."
        except ValueError:
            return str(path)


def _within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


@dataclass(frozen=True)
class Context:
    conv: Conversation
    workspace: Workspace


Planner = Callable[[dict, Context], Plan]


@dataclass(frozen=True)
class Spec:
    tool: Tool
    kind: str
    plan: Planner


def _object(properties: dict, required: tuple[str, ...]) -> dict:
    return {"type": "object", "properties": properties, "required": list(required)}


def _string(description: str) -> dict:
    return {"type": "string", "description": description}


def _done(text: str, note: str) -> Plan:
    return Plan(None, lambda: Outcome(text, note))


# -- reading -----------------------------------------------------------------------------------
def _read_bytes(path: Path, shown: str) -> bytes:
    """A regular file's bytes (a FIFO or a device would block or never end: refused)."""
    try:
        info = path.stat()
        if stat.S_ISDIR(info.st_mode):
            raise ToolError(f"{shown} is a directory (list_dir lists it)")
        if not stat.S_ISREG(info.st_mode):
            raise ToolError(f"{shown} is not a regular file")
        if info.st_size > MAX_FILE:
            raise ToolError(f"{shown} is larger than {MAX_FILE // (1024 * 1024)} MB")
        return path.read_bytes()
    except FileNotFoundError:
        raise ToolError(f"{shown} does not exist") from None
    except OSError as exc:
        raise ToolError(f"{shown} cannot be read: {os_cause(exc)}") from None


def _read_text(path: Path, shown: str, exact: bool = False) -> str:
    """A text file's text. `exact` for a file about to be rewritten: one that is not UTF-8 is
    refused, since its other bytes would not come back as they were."""
    data = _read_bytes(path, shown)
    if b"\0" in data[:8192]:
        raise ToolError(f"{shown} is a binary file")
    try:
        return data.decode("utf-8", errors="strict" if exact else "replace")
    except UnicodeDecodeError:
        raise ToolError(f"{shown} is not UTF-8 text; chatcli does not rewrite it (its other bytes would "
                        "change)") from None


def _plan_read_file(args: dict, ctx: Context) -> Plan:
    path = ctx.workspace.resolve(args.get("path"))
    shown = ctx.workspace.show(path)
    text = _read_text(path, shown)
    lines = text.splitlines(keepends=True)
    first = _whole(args.get("start_line"), 1)
    count = _whole(args.get("max_lines"), len(lines) or 1)
    if first > max(len(lines), 1):
        raise ToolError(f"{shown} has {len(lines):,} lines; start_line {first:,} is past its end")
    part = "".join(lines[first - 1: first - 1 + count])
    limit = ctx.conv.settings.agent_output_limit
    head = f"{shown}: lines {first}–{min(first - 1 + count, len(lines))} of {len(lines)}\n" \
        if (first > 1 or count < len(lines)) else ""
    if len(part) > limit:
        head = (head.rstrip("\n") or f"{shown}: {len(lines):,} lines") + \
            f" (cut to {limit:,} characters: read a part with start_line and max_lines)\n"
    return _done(head + rules.cap(part, limit), f"read {shown} ({len(lines):,} {'line' if len(lines) == 1 else 'lines'})")


def _whole(value, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not 1 <= value < 2 ** 31:
        raise ToolError("start_line and max_lines are whole numbers from 1")
    return int(value)


def _plan_list_dir(args: dict, ctx: Context) -> Plan:
    path = ctx.workspace.resolve(args.get("path") or ".")
    shown = ctx.workspace.show(path)
    try:
        entries = sorted(os.scandir(path), key=lambda e: e.name)
    except FileNotFoundError:
        raise ToolError(f"{shown} does not exist") from None
    except NotADirectoryError:
        raise ToolError(f"{shown} is a file (read_file reads it)") from None
    except OSError as exc:
        raise ToolError(f"{shown} cannot be listed: {os_cause(exc)}") from None
    rows = []
    for entry in entries[:MAX_LIST]:
        try:
            if entry.is_symlink() and not ctx.workspace.inside(os.path.realpath(entry.path)):
                rows.append(f"{entry.name}  (a link out of the working directory)")
            elif entry.is_dir():
                rows.append(entry.name + "/")
            else:
                rows.append(f"{entry.name}  ({entry.stat().st_size:,} bytes)")
        except OSError:
            rows.append(entry.name)
    if len(entries) > MAX_LIST:
        rows.append(f"[… {len(entries) - MAX_LIST:,} more entries]")
    text = f"{shown}/ ({len(entries):,} entries)\n" + "\n".join(rows)
    return _done(text, f"listed {shown}/ ({len(entries):,} entries)")


def _plan_grep(args: dict, ctx: Context) -> Plan:
    pattern = args.get("pattern")
    if not isinstance(pattern, str) or not pattern:
        raise ToolError("give a pattern (a regular expression)")
    try:
        regex = re.compile(pattern, re.IGNORECASE if args.get("ignore_case") else 0)
    except re.error as exc:
        raise ToolError(f"the pattern is not a valid regular expression: {exc}") from None
    base = ctx.workspace.resolve(args.get("path") or ".")
    if not base.exists():
        raise ToolError(f"{ctx.workspace.show(base)} does not exist")
    glob = args.get("glob") if isinstance(args.get("glob"), str) else None
    matches: list[str] = []
    files = [base] if base.is_file() else _walk(base, glob)
    total = 0
    for file in files:
        real = os.path.realpath(file)
        if not ctx.workspace.inside(real):
            continue  # a link out of the working directory
        try:
            info = os.stat(real)
            if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FILE:
                continue  # a FIFO, a device, a huge file
            data = Path(real).read_bytes()
        except OSError:
            continue
        if b"\0" in data[:8192]:
            continue
        for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if regex.search(line):
                total += 1
                if len(matches) < MAX_MATCHES:
                    matches.append(f"{ctx.workspace.show(file)}:{number}: {line[:300]}")
    if total > MAX_MATCHES:
        matches.append(f"[… {total - MAX_MATCHES:,} more matching lines]")
    text = "\n".join(matches) if matches else f"no line matches {pattern!r}"
    return _done(rules.cap(text, ctx.conv.settings.agent_output_limit), f"grep {pattern!r}: {total:,} {'line' if total == 1 else 'lines'}")


def _walk(base: Path, glob: str | None):
    import fnmatch

    for directory, dirs, names in os.walk(base):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        for name in sorted(names):
            if glob is None or fnmatch.fnmatch(name, glob):
                yield Path(directory) / name


# -- changing things ---------------------------------------------------------------------------
def _plan_run_shell(args: dict, ctx: Context) -> Plan:
    command = args.get("command")
    if not isinstance(command, str) or not command.strip():
        raise ToolError("give a command to run")
    settings = ctx.conv.settings
    ctx.workspace.check_root()  # not from a root too broad to work in
    timeout = settings.agent_shell_timeout
    asked = args.get("timeout")
    if isinstance(asked, int | float) and not isinstance(asked, bool) and 0 < asked < timeout:
        timeout = float(asked)
    approval = rules.Approval(rules.SHELL, "run_shell", f"run: {command.strip().split(chr(10))[0][:200]}",
                              f"$ {command.strip()}\n(in {ctx.workspace.root}, at most {timeout:g} s)")
    return Plan(approval, lambda: _run_shell(command, ctx.workspace.root, timeout, settings))


# Environment variables a command never sees: the keys chatcli holds (a command's output goes to
# the model, and into the history the encryption key protects).
HIDDEN_VARS = ("CHATCLI_ENCRYPTION_KEY", "CHATCLI_NEW_ENCRYPTION_KEY", *KEY_VARS.values())
AFTER_EXIT = 0.5  # seconds the output is still read once the command has ended
POLL = 0.1  # seconds between two looks at whether the command has ended


def _run_shell(command: str, cwd: Path, timeout: float, settings) -> Outcome:
    """Run `command` in its own process group, reading its output as it comes into a bounded
    capture (its start and its end). The command has until the timeout to end, whether or not
    it still writes to us (`exec >log` closes our pipe and goes on). When it ends, whatever it
    left running in its group is stopped; at the timeout, or Ctrl-C, the whole group is. Output
    held open by a process that left the group is read no longer than AFTER_EXIT."""
    import selectors
    import subprocess
    import time

    first = rules.printable(command.strip().split("\n")[0][:80])
    env = {k: v for k, v in settings.env.items() if k not in HIDDEN_VARS} if settings.env else \
        {k: v for k, v in os.environ.items() if k not in HIDDEN_VARS}
    try:
        process = subprocess.Popen(["/bin/sh", "-c", command], cwd=cwd, stdin=subprocess.DEVNULL, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as exc:
        return Outcome(f"error: the command could not start: {os_cause(exc)}",
                       f"run_shell {first!r}: could not start ({os_cause(exc)})", error=True)
    capture = _Capture(settings.agent_output_limit)
    deadline = time.monotonic() + timeout
    timed_out, ended, reading = False, None, True
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            while True:
                now = time.monotonic()
                if not timed_out and now >= deadline:
                    _stop(process)
                    timed_out = True
                if ended is None and process.poll() is not None:
                    ended = now
                    _stop(process)  # what it left running in its group goes with it, now
                if ended is not None and (not reading or now - ended > AFTER_EXIT):
                    break
                wait = AFTER_EXIT if timed_out or ended is not None else min(deadline - now, POLL)
                if not reading:
                    time.sleep(min(max(wait, 0.01), 0.05))
                elif selector.select(max(wait, 0.01)):
                    chunk = os.read(process.stdout.fileno(), 65536)
                    if chunk:
                        capture.add(chunk)
                    else:  # our pipe closed; the command may still be running
                        reading = False
                        selector.unregister(process.stdout)
    except BaseException:  # Ctrl-C: the command goes with the turn
        _stop(process)
        raise
    finally:
        process.stdout.close()
        _stop(process)  # what it left running in its group
        process.wait()
    text = capture.text()
    if timed_out:
        return Outcome(f"error: the command timed out after {timeout:g} s and was stopped; its output:\n" + text,
                       f"run_shell {first!r}: timed out after {timeout:g} s", error=True)
    code = process.returncode
    return Outcome(f"exit code {code}\n" + text, f"run_shell {first!r}: exit code {code}", error=code != 0)


class _Capture:
    """A command's output kept in bounded memory: its first bytes and its last ones."""

    def __init__(self, limit: int) -> None:
        self.head_limit = rules.head_size(limit)
        self.tail_limit = limit - self.head_limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            del self.tail[:-self.tail_limit]

    def text(self) -> str:
        left_out = self.total - len(self.head) - len(self.tail)
        return rules.joined(self.head.decode("utf-8", errors="replace"), self.tail.decode("utf-8", errors="replace"),
                            left_out)


def _stop(process) -> None:
    """Kill a command's whole process group."""
    import signal

    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _plan_write(workspace: Workspace, path: Path, shown: str, before: str | None, after: str, tool: str) -> Plan:
    """A write of `after` over `before` (None: a new file), asked with its diff. At run time the
    file must still be as it was when the diff was made, and where it was: what is written is
    what was approved, in the place that was approved."""
    change = rules.diff(shown, before, after)
    added, removed = rules.diff_counts(change)
    if before == after:
        return _done(f"{shown} already holds exactly that; nothing was written", f"{tool} {shown}: unchanged")
    missing = _missing_dirs(path)
    makes = f"; makes {', '.join(missing)}/" if missing else ""
    title = f"{'create' if before is None else 'write'} {shown} (+{added} −{removed}{makes})"
    expected = None if before is None else before.encode("utf-8")

    def run() -> Outcome:
        parent = None
        try:
            try:
                again = workspace.resolve(str(path))
            except ToolError:
                again = None
            if again != path or workspace.base(path) is None:  # the workspace rules, checked again
                raise confined.Moved(confined.what_moved(workspace.show, path))
            parent = confined.open_parent(workspace.base(path), path, workspace.show, create=expected is None)
            mode = None if parent is None else confined.mode_if_unchanged(parent, path, expected, workspace.show,
                                                                          0o666 & ~UMASK)
            if mode is None:
                return Outcome(f"error: {shown} changed after the diff was shown; nothing was written "
                               "(read it again)", f"{tool} {shown}: not written, the file changed meanwhile",
                               error=True)
            atomic_write(Path(path.name), after.encode("utf-8"), mode=mode, dir_fd=parent)
        except confined.Moved as exc:
            return Outcome(f"refused: {exc} after the write was approved; nothing was written",
                           f"{tool} {shown}: refused, {exc} after approval", error=True, refused=True)
        except OSError as exc:
            return Outcome(f"error: {shown} could not be written: {os_cause(exc)}",
                           f"{tool} {shown}: failed ({os_cause(exc)})", error=True)
        finally:
            if parent is not None:
                os.close(parent)
        return Outcome(f"wrote {shown} (+{added} −{removed} lines)", f"{tool} {shown}: +{added} −{removed}")

    return Plan(rules.Approval(rules.WRITE, tool, title, change or "(no line changes)"), run)


def _missing_dirs(path: Path) -> list[str]:
    missing = []
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        missing.append(parent.name)
        parent = parent.parent
    return ["/".join(reversed(missing))] if missing else []


def _read_umask() -> int:
    """The process's umask, read without changing it (setting it to read it would race the
    files other threads create meanwhile); where /proc cannot tell, the usual 022."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


UMASK = _read_umask()


def _plan_write_file(args: dict, ctx: Context) -> Plan:
    path = ctx.workspace.resolve(args.get("path"))
    shown = ctx.workspace.show(path)
    content = args.get("content")
    if not isinstance(content, str):
        raise ToolError("give the file's whole new content as 'content'")
    if path.is_dir():
        raise ToolError(f"{shown} is a directory")
    if any(parent.exists() and not parent.is_dir() for parent in path.parents):
        raise ToolError(f"a part of {shown}'s directory is a file")
    before = _read_text(path, shown, exact=True) if path.exists() else None
    return _plan_write(ctx.workspace, path, shown, before, content, "write_file")


def _plan_edit_file(args: dict, ctx: Context) -> Plan:
    path = ctx.workspace.resolve(args.get("path"))
    shown = ctx.workspace.show(path)
    old, new = args.get("old_text"), args.get("new_text")
    if not isinstance(old, str) or not isinstance(new, str):
        raise ToolError("give 'old_text' (exactly as in the file) and 'new_text'")
    before = _read_text(path, shown, exact=True)
    try:
        after = rules.apply_edit(before, old, new, bool(args.get("replace_all")))
    except ValueError as exc:
        raise ToolError(f"{shown}: {exc}") from None
    return _plan_write(ctx.workspace, path, shown, before, after, "edit_file")


# -- the user's sessions -----------------------------------------------------------------------
def _answering(answer: Callable[[dict, Conversation], tuple[str, str]]) -> Planner:
    """The planner of a tool that only reads and answers at once (engine/session_tools.py)."""

    def planner(args: dict, ctx: Context) -> Plan:
        try:
            return _done(*answer(args, ctx.conv))
        except ChatcliError as exc:
            raise ToolError(str(exc)) from None

    return planner


def _plan_recall(args: dict, ctx: Context) -> Plan:
    key = args.get("key")
    if not isinstance(key, str):
        raise ToolError("recall needs a 'key' argument (16 hexadecimal digits)")
    try:
        text = recall.recall_text(ctx.conv.settings, key, ctx.conv.history, ctx.conv.transcript)
    except ChatcliError as exc:
        raise ToolError(str(exc)) from None
    return _done(text, f"The model read {text.splitlines()[0].removeprefix('Recall ')}")


_PATH = _string("a path relative to the working directory")
TOOLS: dict[str, Spec] = {spec.tool.name: spec for spec in (
    Spec(session_tools.SEARCH, rules.SESSION, _answering(session_tools.search)),
    Spec(session_tools.READ, rules.SESSION, _answering(session_tools.read)),
    Spec(recall.TOOL, rules.SESSION, _plan_recall),
    Spec(Tool("read_file", "Read a text file in the working directory.",
              _object({"path": _PATH, "start_line": {"type": "integer", "description": "first line (from 1)"},
                       "max_lines": {"type": "integer", "description": "how many lines"}}, ("path",))),
         rules.READ, _plan_read_file),
    Spec(Tool("list_dir", "List a directory of the working directory (names, sizes; directories end in /).",
              _object({"path": _string("a directory, '.' by default")}, ())), rules.READ, _plan_list_dir),
    Spec(Tool("grep", "Search files under a path for lines matching a regular expression.",
              _object({"pattern": _string("a regular expression"), "path": _string("file or directory, '.' by default"),
                       "glob": _string("only file names matching this, e.g. '*.py'"),
                       "ignore_case": {"type": "boolean"}}, ("pattern",))), rules.READ, _plan_grep),
    Spec(Tool("run_shell", "Run a shell command in the working directory (the user approves it first); "
              "returns its exit code and output.",
              _object({"command": _string("the command line, run by /bin/sh"),
                       "timeout": {"type": "number", "description": "seconds, at most the user's limit"}},
                      ("command",))), rules.SHELL, _plan_run_shell),
    Spec(Tool("write_file", "Create or replace a whole text file (the user sees the diff and approves it first).",
              _object({"path": _PATH, "content": _string("the file's whole new content")}, ("path", "content"))),
         rules.WRITE, _plan_write_file),
    Spec(Tool("edit_file", "Replace an exact piece of a text file (the user sees the diff and approves it first).",
              _object({"path": _PATH, "old_text": _string("the exact text to replace, unique in the file"),
                       "new_text": _string("what replaces it"),
                       "replace_all": {"type": "boolean", "description": "replace every occurrence"}},
                      ("path", "old_text", "new_text"))), rules.WRITE, _plan_edit_file),
)}


def plan(name: str, arguments: str, ctx: Context, allowed: Sequence[str]) -> Plan:
    """The plan of one call to a tool of `allowed`; a call that cannot run is a plan that
    answers with the error."""
    spec = TOOLS.get(name)
    try:
        if spec is None or name not in allowed:
            why = "there is no tool named" if spec is None else "this mode does not offer"
            raise ToolError(f"{why} {name!r}; the tools now are: {', '.join(allowed) or 'none'}")
        try:
            args = json.loads(arguments or "{}")
        except ValueError:
            args = None
        if not isinstance(args, dict):
            raise ToolError(f"the arguments of {name} must be a JSON object")
        return spec.plan(args, ctx)
    except (ToolError, OSError, ValueError) as exc:  # a path the OS refuses, a number out of range…
        failed = Outcome(f"error: {exc}", f"The model's {name} call failed: {exc}", error=True)
        return Plan(None, lambda: failed)


__all__ = ["TOOLS", "Context", "Outcome", "Plan", "Spec", "ToolError", "Workspace", "plan"]
