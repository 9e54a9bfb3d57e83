"""Another ChatCLI home (Go ChatCLI's `~/.chatcli`, or a chatcli's from another machine): its
`sessions/<name>.json` (the same v2, v1 and legacy documents this chatcli reads, SPEC §4) and its
`ccr/` recall entries.

A session keeps its name when it is free here (a user moving machines expects `projeto-x` to stay
`projeto-x`), else it gets `chatcli-<date>-<title>`. Its messages are kept whole, every field;
what belongs to the other home (attached contexts, /rewind checkpoints, shared memory) is left
out and counted. A sealed session (chatcli's encryption at rest) cannot be read without its
home's key: it is skipped and counted (copy that home whole instead, with its key); so is one Go
ChatCLI encrypted (its `CHATCLI_ENC_v1` files)."""

from __future__ import annotations

import datetime
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from chatcli.core.imported import Found, Tally
from chatcli.core.session import SessionFormatError, decode_session
from chatcli.store import home
from chatcli.store.seal import is_sealed
from chatcli.store.sessions import document_of
from chatcli.store.sources import SourceError, mtime_order, shown

NAME = "chatcli"
LABEL = "another ChatCLI home"
# What a session holds that belongs to its own home, by the kind the report names.
# How a session file Go ChatCLI encrypted begins (its AES-GCM format; chatcli has no key for it).
_GO_SEALED = b"CHATCLI_ENC_v1\n"
_HOME_BOUND = (("attachments", "context attachment"), ("checkpoints", "rewind checkpoint"),
               ("shared_memory", "shared memory item"))


def default(env: Mapping[str, str], user_home: Path) -> Path:
    return user_home / ".chatcli"


def files(root: Path) -> list[Path]:
    sessions = root if root.is_file() else home.sessions_dir_of(root)
    if sessions.is_file():
        return [sessions]
    if not sessions.is_dir():
        raise SourceError(f"no ChatCLI sessions at {shown(root)}: it has no sessions directory (give the path "
                          "of the other home, the directory that holds sessions/)")
    found = [path for path in sessions.iterdir() if home.session_named(path.name) and path.is_file()]
    if not found:
        raise SourceError(f"no ChatCLI sessions at {shown(root)}: its sessions directory is empty")
    return sorted(found, key=mtime_order)


def read(path: Path, tally: Tally) -> Iterator[Found]:
    name = home.session_named(path.name) or path.stem
    with open(path, "rb") as handle:
        raw = handle.read()
    if is_sealed(raw):
        tally.skip("sealed session (its home's key is needed: copy that home whole instead)")
        return
    if raw.startswith(_GO_SEALED):
        tally.skip("session Go ChatCLI encrypted (decrypt it there first)")
        return
    try:
        data = decode_session(document_of(raw))  # read as this chatcli reads its own (an append cut short too)
    except ValueError as exc:  # malformed JSON, or SessionFormatError (a newer version, not a session)
        reason = str(exc) if isinstance(exc, SessionFormatError) else "not valid JSON"
        tally.skip(f"unreadable session ({reason})")
        return
    # The conversation's id: a chatcli session's journal id and name (the journal's id goes with
    # the file wherever it is copied; a conversation saved under a second name shares it), else
    # (Go ChatCLI keeps none) the home and the name: two homes' `work` are two.
    ident = f"{data.transcript_id}/{name}" if data.transcript_id else f"{os.path.realpath(path.parent.parent)}/{name}"
    found = Found(NAME, ident, data.history, title=data.title, started=_started(data, path),
                  where=shown(path), name=name)
    for key, kind in _HOME_BOUND:
        count = len(getattr(data, key))
        if count:
            found.leave_out(kind, count)
            found.details[key] = getattr(data, key)  # kept in the import record, as they were
    yield found


def recall_entries(root: Path) -> Iterator[tuple[str, Path]]:
    """The other home's recall entries that compaction stubs name (`<<ccr:KEY>>`): Go ChatCLI's
    raw text (`<key>.ccr`) and a chatcli's (`<key>.json`), as (file name, path)."""
    directory = home.recall_dir_of(root)
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return
    for filename in names:
        if home.go_entry_named(filename) or home.entry_named(filename):
            yield filename, directory / filename


def _started(data, path: Path) -> str:
    for message in data.history:
        for key in ("timestamp", "created_at", "time"):
            value = message.extra.get(key) if message._extra else None
            if isinstance(value, str) and value[:4].isdigit():
                return value
    return datetime.datetime.fromtimestamp(path.stat().st_mtime, datetime.timezone.utc).isoformat(timespec="seconds")
