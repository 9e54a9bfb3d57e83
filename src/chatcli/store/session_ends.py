"""The two ends of a large session file, read without parsing what lies between them: every
field and the messages that open the history (from the file's first bytes), and the latest
messages (from its last bytes). A turn's request needs no more than that (the system messages
and summaries that open a history, then its latest messages); the rest is read meanwhile.

Only for a file laid out as this version writes one for appends (every field, then
`chat_history` last, then `]}`); None for anything else, which is read whole as before.

A message boundary is found as `_read_in_pieces` finds one (store/sessions.py): a `{"role":`
(which cannot occur inside a JSON string, where the quote is escaped) after `},` or `[`, where
what follows, up to the history's closing `]`, parses as a JSON array. A `{"role":` nested in a
message leaves unbalanced brackets after it, which do not parse.
"""

from __future__ import annotations

import os
from collections import namedtuple

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

HISTORY_KEY = b'"chat_history":['
_MESSAGE = b'{"role":'
FRONT = 1 << 20  # the first bytes read for the fields and the opening messages
TRIES = 16  # candidate boundaries tried before giving up (objects with a "role" key nested in messages)


def head_of(first: bytes, laid_out: bool = True) -> tuple[dict, int] | None:
    """The document's fields before its history (with an empty history) parsed from its first
    bytes, and where its `"chat_history":[` starts; None when they are not all there or, when
    `laid_out` is asked for, not laid out for appends."""
    import orjson

    from chatcli.store.sessions import _appends_fit

    search = 0
    while True:  # where the history starts: the first place the fields before it parse
        at = first.find(HISTORY_KEY, search)
        if at < 0:
            return None
        try:
            head = orjson.loads(first[:at] + b'"chat_history":[]}')
            break
        except orjson.JSONDecodeError:
            search = at + 1
    return (head, at) if not laid_out or _appends_fit(head) else None


# A session file's fields (`data`, a SessionData whose history is empty), the messages that open
# its history (`front`: those whose bytes lie within its first FRONT bytes), and its latest
# messages (`tail`, which start at byte `tail_at`, after the front's last). A namedtuple: the
# listing imports this module, and dataclasses or typing would cost it milliseconds.
Ends = namedtuple("Ends", "data front tail tail_at")


def read_ends(read: int | Callable[[int, int], bytes], size: int, tail_bytes: int) -> Ends | None:
    """The ends of a session of `size` bytes, in file `read` (an open descriptor) or as
    `read(length, offset)` gives its bytes (a server's): about the last `tail_bytes` bytes of
    messages, and what FRONT bytes hold at the start. None when it is not laid out for
    appends, or too small for its ends to be apart."""
    import orjson

    from chatcli.core import session
    from chatcli.store.seal import is_sealed

    if size < FRONT + tail_bytes:
        return None
    pread = read if callable(read) else lambda length, offset: os.pread(read, length, offset)
    first = pread(FRONT, 0)
    if is_sealed(first) or pread(2, size - 2) != b"]}":
        return None
    found = head_of(first)
    if found is None:
        return None
    head, at = found
    start = at + len(HISTORY_KEY)
    front_items, front_end = _leading(orjson, first, start)
    tail_from = size - 2 - tail_bytes
    if tail_from <= front_end:
        return None
    tail_items, tail_at = _trailing(orjson, pread(size - 2 - tail_from, tail_from), tail_from)
    if tail_items is None:
        return None
    try:
        data = session.decode_session(head)
        front, tail = session.messages_of(front_items), session.messages_of(tail_items)
    except session.SessionFormatError:
        return None
    if session.reshaped(front, front_items) or session.reshaped(tail, tail_items):
        return None  # written back in another shape: the whole read says how (and rewrites it)
    from chatcli.store.sessions import _inexact

    data.history = [*front, *tail]
    if _inexact(data):
        return None
    data.history = []
    return Ends(data, front, tail, tail_at)


def _leading(orjson, first: bytes, start: int) -> tuple[list, int]:
    """The whole messages in `first` from byte `start` (where the history's first message
    starts), and the byte after the last of them; none when no boundary parses."""
    end, tries = len(first), 0
    while tries < TRIES:
        cut = first.rfind(_MESSAGE, start + 1, end)
        if cut < 0:
            break
        end = cut
        before = first[start:cut].rstrip()
        if not before.endswith(b"},"):
            continue
        tries += 1
        try:
            return orjson.loads(b"[" + before[:-1] + b"]"), start + len(before)
        except orjson.JSONDecodeError:
            continue
    return [], start


def _trailing(orjson, data: bytes, offset: int) -> tuple[list | None, int]:
    """The messages that `data` (the file from byte `offset` up to the history's closing `]`)
    ends with, from its first boundary that parses, and the byte where the first of them starts."""
    search, tries = 0, 0
    while tries < TRIES:
        cut = data.find(_MESSAGE, search)
        if cut < 0:
            break
        search = cut + 1
        if not data[:cut].rstrip().endswith(b"},"):
            continue
        tries += 1
        try:
            items = orjson.loads(b"[" + data[cut:].rstrip() + b"]")
        except orjson.JSONDecodeError:
            continue
        return items, offset + cut
    return None, 0


__all__ = ["Ends", "FRONT", "head_of", "read_ends"]
