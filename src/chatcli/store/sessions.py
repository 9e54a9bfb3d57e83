"""The session store: one session per file in the v2 format (SPEC §4), named by store.home.

Reads and writes whole documents atomically, never overwrites a file it could not read,
appends turns in place, and offers a per-session lock for the read-merge-write of concurrent
surfaces. The listing of the directory is store.catalog's.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import sys
from collections import namedtuple
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from chatcli.core.names import validate_name
from chatcli.store import home
from chatcli.store.atomic import PRIVATE_DIR, RefusedFile, atomic_write, ensure_private_dir, open_in_home, os_cause
from chatcli.store.bulk import gc_paused
from chatcli.store.catalog import Catalog, SessionInfo
from chatcli.store.session_ends import HISTORY_KEY, Ends, head_of, read_ends
from chatcli.store.seal import SESSION_HEADER, SealError, is_sealed, sealer_for, session_layout
from chatcli.store.session_file import SessionError, SessionExists, SessionNotFound, read_regular

# `chatcli session list` imports this module and should load nothing it does not use:
# the session document (dataclasses, typing) is imported where a document is read or written.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from chatcli.core.messages import Message
    from chatcli.core.session import SessionData


class Stamp(namedtuple("Stamp", "mtime_ns size inode")):
    """What a file looked like when we last read or wrote it; any write elsewhere changes it."""

    __slots__ = ()

    @classmethod
    def of(cls, st: os.stat_result) -> Stamp:
        return cls(st.st_mtime_ns, st.st_size, st.st_ino)


def _document():
    from chatcli.core import session

    return session


def _json():
    # orjson parses and, above all, serialises several times faster than the standard
    # library (a write-through rewrites the whole file every turn); imported only when used.
    import orjson

    return orjson


def _appends_fit(document: object) -> bool:
    """A parsed session document laid out as this version writes it for appends: v2, no
    per-mode histories (the live history is then exactly its chat_history), chat_history last."""
    return (document.__class__ is dict and bool(document) and next(reversed(document)) == "chat_history"
            and document.get("version") == 2 and not document.get("agent_history")
            and not document.get("coder_history"))


# A plaintext session smaller than this is written whole at every turn (temp file, fsync, rename),
# not appended to in place: it is then whole JSON at every moment for every reader, where an
# append a kill stops between its two steps leaves trailing data until the next chatcli process
# that opens the store mends it. Measured (bench/safety.py): a whole write never costs less
# than the append's two fsyncs, but stays within about 1 ms of it up to 256 KB (1.1-1.6 ms
# against 0.65 ms), and grows with the file after (2.7 ms at 1 MB).
WHOLE_BELOW = 256 << 10

# A session file from this size on is read in pieces (`_read_in_pieces`): parsing 100 MB at once
# holds the bytes, the parser's own document tree and the objects built from it together (3.4×
# the file at its peak); in pieces, the objects and one piece.
CHUNKED_FROM = 16 << 20
PIECE = 4 << 20


def _read_in_pieces(fd: int, size: int, closed: bool = False) -> SessionData | None:
    """The session in file `fd` read PIECE bytes at a time, when it is a JSON object whose one
    long part is `chat_history`, its messages' keys starting with "role" (as this version and Go
    ChatCLI write them); None for anything else, which the caller reads whole (and reports, or
    recovers, as it does for every file). Read this way, a large file costs the messages and one
    piece in memory, not also its bytes and the parser's document of it.

    A piece ends between two messages: before a `{"role":` (which cannot occur inside a JSON
    string, where the quote is escaped) that follows `},`, and only if the piece then parses as
    a JSON array (cut inside a message, it would not). The fields after the history (Go
    ChatCLI writes its times there) are found from the file's end (`_after_history`).

    `closed`: the caller saw the closing `]}` at `size - 2` (an append in place may have made
    it `, ` since: the bytes before it are what was read)."""
    orjson = _json()
    session = _document()
    first = os.pread(fd, min(size, PIECE), 0)
    if is_sealed(first):
        return None
    found = head_of(first, laid_out=False)
    if found is None:
        return None
    head, at = found
    if closed or os.pread(fd, 2, size - 2) == b"]}":
        end, after = size - 2, {}
    else:
        end, after = _after_history(orjson, fd, size)
        if end is None or "chat_history" in after:
            return None
    head.update(after)
    if head.get("agent_history") or head.get("coder_history"):
        return None  # histories of several modes are merged by the whole-file reader
    laid_out = not after and _appends_fit(head)
    items: list = []
    offset = at + len(HISTORY_KEY)
    carry = b""
    buf = bytearray()
    misses = 0  # candidate cuts that did not parse (objects with a "role" key nested in a message)
    while offset < end or carry:
        # The piece is read into one buffer, used again for every piece, after "[" and what was
        # carried, with a byte to spare: each cut is made by writing "]" over the comma before
        # it, and orjson parses the buffer's start in place (copying every piece three times was
        # a quarter of the read; a new buffer for each piece made the process fault in twice the
        # memory, and everything it allocated after the read was slower for it).
        size_now = min(PIECE, end - offset) if offset < end else 0
        buf = _piece(buf, fd, carry, size_now, offset)
        if buf is None:
            return None  # the file shrank meanwhile: read whole, and said
        offset = min(end, offset + PIECE)
        filled = 1 + len(carry) + size_now  # "[" and the data; then a byte to spare
        if offset >= end:  # the rest, up to the closing "]"
            last = filled - 1
            while last > 0 and buf[last] in _WHITESPACE:
                last -= 1
            buf[last + 1] = 0x5D  # "]"
            try:
                items += orjson.loads(memoryview(buf)[:last + 2])
            except orjson.JSONDecodeError:
                return None
            break
        start, floor = filled, 1 + max(0, len(carry) - len(b'{"role":'))  # the carry had no cut before
        while True:
            start = buf.rfind(b'{"role":', floor, start)
            if start <= 1:
                carry = bytes(memoryview(buf)[1:filled])  # one message longer than a piece: read on
                break
            comma = start - 1
            while buf[comma] in _WHITESPACE:
                comma -= 1
            if buf[comma] != 0x2C or buf[comma - 1] != 0x7D:  # not after "},"
                continue
            buf[comma] = 0x5D
            try:
                items += orjson.loads(memoryview(buf)[:comma + 1])
            except orjson.JSONDecodeError:
                buf[comma] = 0x2C
                misses += 1
                if misses > 16:
                    return None  # not worth guessing on: read it whole
                continue
            carry = bytes(memoryview(buf)[start:filled])
            break
    try:
        data = session.decode_session(head)
        data.history = session.messages_of(items)
        if head.get("version", 1) != session.VERSION:  # an older version's: each message gets its mode
            data.history = session.merge_mode_histories(data.history, [], [])
    except session.SessionFormatError:
        return None
    if _inexact(data):
        return None  # the whole-file reader parses such numbers exactly
    data.reshaped = session.reshaped(data.history, items)
    data.appendable = laid_out and not data.reshaped
    return data


_WHITESPACE = frozenset(b" \t\r\n")  # JSON's


def _piece(buf: bytearray, fd: int, carry: bytes, size: int, offset: int) -> bytearray | None:
    """`buf` (or a larger buffer, when it is too small) beginning with b"[" + `carry` + the
    `size` bytes of file `fd` at `offset`, with a byte to spare after them; None when the file
    has fewer bytes there."""
    if len(buf) < len(carry) + size + 2:
        buf = bytearray(max(len(carry) + size + 2, PIECE + 2))
    buf[0] = 0x5B  # "["
    buf[1:1 + len(carry)] = carry
    if size and os.preadv(fd, [memoryview(buf)[1 + len(carry):1 + len(carry) + size]], offset) != size:
        return None
    return buf


def _after_history(orjson, fd: int, size: int) -> tuple[int | None, dict]:
    """Where the history's closing `]` is, in a file whose history is followed by other fields
    (`...}],"created_at":"…"}`), and those fields: the last `]` after which the rest of the file
    parses as the end of an object. (None, {}) when there is no such place near the end."""
    window = min(size, 64 << 10)
    tail = os.pread(fd, window, size - window)
    position, tries = len(tail), 0
    while tries < 16:
        position = tail.rfind(b"]", 0, position)
        if position < 0:
            break
        tries += 1
        rest = tail[position + 1:].strip()
        if not rest.startswith(b","):
            continue
        try:
            fields = orjson.loads(b"{" + rest[1:])
        except orjson.JSONDecodeError:
            continue
        if isinstance(fields, dict):
            return size - window + position, fields
    return None, {}


# A plaintext session of this many messages is written in pieces (`_pieces_of`), not encoded
# whole first: 100,000 messages would hold their dictionaries and the file's bytes at once.
STREAMED_FROM = 10_000
_ENCODED_AT_ONCE = 1_000


def _pieces_of(head: dict, history: Sequence[Message]) -> Iterator[bytes]:
    """The bytes of the document whose fields but its history are `head` (core/session.py's
    encode_head), holding `history`, a piece at a time: the same bytes as the whole document
    encoded at once (`chat_history` last), the closing "]}" kept within one disk sector (see
    `append`). Raises TypeError as orjson does."""
    orjson = _json()
    opening = orjson.dumps({**head, "chat_history": []})
    if not opening.endswith(b'"chat_history":[]}'):
        raise TypeError("the history is not the document's last field")
    yield opening[:-2]
    size = len(opening) - 2
    for start in range(0, len(history), _ENCODED_AT_ONCE):
        # One list encoded (its brackets cut off) rather than a message at a time and joined:
        # a thousand small allocations fewer a piece, which the allocator may have to fault in.
        piece = orjson.dumps([m.to_dict() for m in history[start:start + _ENCODED_AT_ONCE]])[1:-1]
        if start:
            piece = b"," + piece
        size += len(piece)
        yield piece
    yield b" ]}" if _straddles(size) else b"]}"


def _inexact(data: SessionData) -> bool:
    from chatcli.core.messages import holds_inexact_number, message_holds_inexact_number

    return (holds_inexact_number(data.extra) or holds_inexact_number(data.attachments)
            or holds_inexact_number(data.checkpoints) or holds_inexact_number(data.shared_memory)
            or any(map(message_holds_inexact_number, data.history)))


def _straddles(offset: int) -> bool:
    """Two bytes written at `offset` would cross a 512-byte sector boundary (a write within
    one sector is all or nothing on the storage chatcli runs on; across two, it may tear)."""
    return offset % 512 == 511


def _appendable(st: os.stat_result, expect: Stamp) -> bool:
    """The open file is the one expected, and may be grown in place (writable, one link)."""
    return (stat.S_ISREG(st.st_mode) and Stamp.of(st) == expect and bool(st.st_mode & stat.S_IWUSR)
            and st.st_nlink == 1)


def _apply_steps(fd: int, size: int, steps: list[tuple[bytes, int]]) -> None:
    """Write each (data, offset) and fsync, in order. On a failure (a full disk) the file is put
    back as it was: what a step overwrote is written back, what was added is cut off."""
    undo = []
    try:
        for data, offset in steps:
            if offset < size:
                undo.append((os.pread(fd, min(len(data), size - offset), offset), offset))
            _pwrite_all(fd, data, offset)
            os.fsync(fd)
    except OSError:
        with contextlib.suppress(OSError):
            for old, offset in reversed(undo):
                os.pwrite(fd, old, offset)
            os.ftruncate(fd, size)
            os.fsync(fd)
        raise


def _pwrite_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


def _before_torn_append(raw: bytes, exc) -> tuple[object | None, int]:
    """The document of a file whose in-place append (`SessionStore.append`) stopped before its
    second step (a whole document, then all or part of the new messages, or what a crash left
    there), and where it ends: a v2 document with its history last, complete, then anything.
    Anything else that fails to parse is not ours to guess at (None)."""
    position = getattr(exc, "pos", None)
    if isinstance(position, int) and not raw.isascii():  # orjson counts characters, not bytes
        try:
            position = len(raw.decode("utf-8")[:position].encode("utf-8"))
        except UnicodeError:
            return None, 0
    # Whatever follows (step 1's messages, written in part, or zeros a crash left) is dropped.
    if not isinstance(position, int) or not 0 < position < len(raw) or not raw[:position].endswith(b"]}"):
        return None, 0
    try:
        document = _json().loads(raw[:position])
    except ValueError:
        return None, 0
    if not _appends_fit(document):
        return None, 0
    return document, position


# What orjson says of a number a double cannot hold (an integer of 310 digits, say, or 1e400).
_NUMBER_TOO_BIG = "number is infinity when parsed as double"


class _TooManyDigits(ValueError):
    """An integer longer than Python converts (sys.get_int_max_str_digits)."""


def _parse_exactly(raw: bytes) -> tuple[object | None, int]:
    """The document of a file orjson refused for the size of a number, parsed by the json module
    (integers of any size, up to the interpreter's digit limit, come back as written), and where
    it ends: the end of the file, or of a document an append stopped after (`_before_torn_append`).
    None for what is still not JSON: NaN, Infinity, or a float past a double (1e400 would be
    written back as Infinity, which no JSON reader takes)."""
    from chatcli.core.messages import holds_infinite_number, refuse_json_constant

    try:
        text = raw.decode("utf-8")
        start = len(text) - len(text.lstrip())
        document, end = json.JSONDecoder(parse_constant=refuse_json_constant).raw_decode(text, start)
    except json.JSONDecodeError:
        return None, 0
    except ValueError as exc:  # the only other ValueError json raises: the interpreter's digit limit
        if "digits" in str(exc):
            raise _TooManyDigits(str(exc)) from None
        return None, 0
    if holds_infinite_number(document):
        return None, 0
    if text[end:].strip():  # more after the document: only an append cut short may leave that
        if not text[:end].endswith("]}") or not _appends_fit(document):
            return None, 0
        return document, len(text[:end].encode("utf-8"))
    return document, len(raw)


def _parsed(raw: bytes) -> tuple[object | None, int, Exception | None]:
    """(the document, where it ends, orjson's error when the bytes are not one document): the
    whole file; or a document an append stopped after (`_before_torn_append`); or one orjson
    refused for the size of a number (`_parse_exactly`). Raises _TooManyDigits."""
    orjson = _json()
    try:
        return orjson.loads(raw), len(raw), None
    except orjson.JSONDecodeError as exc:
        document, cut = _before_torn_append(raw, exc)
        if document is None and _NUMBER_TOO_BIG in str(exc):  # an integer past a double: parse exactly
            document, cut = _parse_exactly(raw)
            if document is not None and cut == len(raw):
                return document, cut, None
        return document, cut, exc


def document_of(raw: bytes) -> object:
    """The JSON document a session file's plaintext bytes hold: what `load` reads of them, a file
    whose last append a crash cut short included (the document before it). ValueError when
    they hold none."""
    document, _cut, exc = _parsed(raw)
    if document is None:
        raise ValueError(str(exc) if exc is not None else "no JSON document")
    return document


def turn_body(messages: Sequence[Message]) -> bytes | None:
    """An appended turn's messages as the history holds them: JSON objects joined by commas; None
    when there are none, or one orjson refuses (the session is then written whole)."""
    if not messages:
        return None
    orjson = _json()
    try:
        return b",".join([orjson.dumps(m.to_dict()) for m in messages])
    except TypeError:
        return None


class SessionStore:
    """Session files in `root`. With a master key (CHATCLI_ENCRYPTION_KEY) every file written is
    sealed (store.seal), sealed files are opened, and the listing caches beside the directory
    keep names, times and sizes only; plaintext files still load (they are sealed when next
    written)."""

    def __init__(self, root: Path, key: bytes | None = None) -> None:
        self.root = root
        self.key = key
        self._checked_mode = False
        # A sealed file that this store's key (or lack of one) cannot open was met: the listing
        # caches are then left as they are (a wrong or missing key changes no file).
        self.locked_out = False
        self.catalog = Catalog(self)

    @property
    def private(self) -> bool:
        """Encryption is on: nothing derived from a session's content goes into a cache."""
        return self.key is not None

    def _opened(self, name: str, raw: bytes) -> tuple[bytes, bool, str]:
        """A session file's JSON bytes (as they are, or opened when sealed), and for a sealed
        one whether turns can be appended to it as it is and what of its tail was left out
        (Sealer.open_session)."""
        if not is_sealed(raw):
            return raw, False, ""
        if self.key is None:
            self.locked_out = True
            raise SessionError(f"session '{name}' is encrypted: set CHATCLI_ENCRYPTION_KEY to the key that sealed "
                               "it; the file was left untouched")
        try:
            return sealer_for(self.key).open_session(raw, name, f"session '{name}'")
        except SealError as exc:
            self.locked_out = True
            raise SessionError(str(exc)) from None

    # -- paths ---------------------------------------------------------------------------
    @property
    def location(self) -> str:
        """Where this store keeps its sessions, as the user is told."""
        return str(self.root)

    def where(self, name: str) -> str:
        """Where session `name` is kept, as errors and /session status show it."""
        return str(home.session_path(self.root, name))

    def path(self, name: str) -> Path:
        return home.session_path(self.root, validate_name(name))

    def stamp(self, name: str) -> Stamp | None:
        try:  # the entry itself: a symbolic link (even a dangling one) is there, and refused when read
            return Stamp.of(os.lstat(self.path(name)))
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise self._error(name, exc) from None

    def exists(self, name: str) -> bool:
        return self.stamp(name) is not None

    # -- read / write --------------------------------------------------------------------
    def load(self, name: str, *, mend: bool = True) -> tuple[SessionData, Stamp]:
        """Session `name` as its file holds it. A plaintext file an append left between its two
        steps is mended first when it can be at once (`mend`), and read as mended."""
        path = self.path(name)
        try:
            raw, st = read_regular(path, chunked_from=CHUNKED_FROM)
        except FileNotFoundError:
            raise SessionNotFound(f"session '{name}' does not exist") from None
        except OSError as exc:
            raise self._error(name, exc) from None
        if isinstance(raw, int):  # a large file: read piece by piece when it is laid out as this version writes it
            data, raw = self._read_large(name, raw, st)
            if data is not None:
                return data, Stamp.of(st)
        data = self.decode(name, raw)
        if data.torn and mend and self.mend(name):
            return self.load(name, mend=False)
        stamp = Stamp.of(st)
        if data.torn:  # read before the second step of an append: never the stamp of a whole file
            stamp = stamp._replace(size=-1)
        return data, stamp

    def _read_large(self, name: str, fd: int, st: os.stat_result,
                    closed: bool = False) -> tuple[SessionData | None, bytes]:
        """The session in the open file `fd` (closed here), of `st.st_size` bytes: read in pieces
        when it can be (the document, no bytes), else its bytes (no document). `closed`: see
        `_read_in_pieces`."""
        try:
            with gc_paused():
                data = _read_in_pieces(fd, st.st_size, closed) if self.key is None else None
            if data is not None:
                return data, b""
            with open(fd, "rb", closefd=False) as handle:
                raw = handle.read(st.st_size)
            return None, raw[:-2] + b"]}" if closed else raw
        except OSError as exc:
            raise self._error(name, exc) from None
        finally:
            os.close(fd)

    def open_ends(self, name: str, tail_bytes: int) -> tuple[Ends, Stamp, int, os.stat_result] | None:
        """A large plaintext session's ends (store/session_ends.py), its stamp, and its file
        still open, for `load_opened` to read whole (the same bytes, whatever is written to the
        name meanwhile); None when it is not such a file (`load` reads it, and says why not)."""
        if self.key is not None:
            return None
        try:
            raw, st = read_regular(self.path(name), chunked_from=CHUNKED_FROM)
        except OSError:
            return None
        if not isinstance(raw, int):
            return None
        try:
            ends = read_ends(raw, st.st_size, tail_bytes)
        except OSError:
            ends = None
        if ends is None:
            os.close(raw)
            return None
        return ends, Stamp.of(st), raw, st

    def fields(self, name: str, reach: int = 65536) -> dict:
        """The session's top-level fields but its history (encode_head's document): from its
        first `reach` bytes when it is a plaintext file laid out as chatcli writes it (the
        history last), else from the whole file. SessionError as for `load`."""
        if self.key is None:
            try:
                fd = open_in_home(self.path(name), os.O_RDONLY)
                try:
                    first = os.read(fd, reach)
                finally:
                    os.close(fd)
            except OSError as exc:
                raise self._error(name, exc) from None
            found = head_of(first, laid_out=False)
            if found is not None:
                found[0].pop("chat_history", None)
                return found[0]
        data, _ = self.load(name)
        return _document().encode_head(data)

    def watched_stamp(self, name: str) -> Stamp | None:
        """The stamp, for the check before a turn (a server's store may answer it from what it
        was told of changes; a file's stat costs nothing to ask)."""
        return self.stamp(name)

    @staticmethod
    def close_opened(fd: int) -> None:
        """The file `open_ends` left open, when it is not to be read after all."""
        os.close(fd)

    def load_opened(self, name: str, fd: int, st: os.stat_result) -> SessionData:
        """The whole session in the file `open_ends` left open (closed here), as of `st`: what it
        held then, whatever was appended to it in place since."""
        data, raw = self._read_large(name, fd, st, closed=True)
        return data if data is not None else self.decode(name, raw)

    def mend(self, name: str) -> bool:
        """Make a plaintext session file an append left between its two steps (a kill, a power
        cut) whole JSON again, for every reader (json, jq, Go ChatCLI refuse the trailing data):
        when the first step was written whole, the second is made (the turn stays); otherwise what
        the first step left is cut off (the file is the document before that turn, whose messages
        the journal holds and a load takes back). Under the session's lock, never waiting for it:
        a holder may be between the two steps itself, and finishes them. Whether it changed the file."""
        if self.key is not None:  # sealed: no other reader, and a record cut short is left out as it is
            return False
        try:
            with self.lock(name, wait=False) as held:
                if not held:
                    return False
                return self._mend_locked(name)
        except (OSError, SessionError):
            return False  # a read-only home, a link: read as it is

    def _mend_locked(self, name: str) -> bool:
        fd = self._open_for_append(name)
        if fd is None:
            return False
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
                return False
            raw = os.pread(fd, st.st_size, 0)
            document, cut, _exc = _parsed(raw)
            if document is None or not 2 <= cut < len(raw):
                return False  # whole already (mended, or its writer finished), or not ours to change
            empty = raw[:cut - 2].rstrip().endswith(b"[")
            joined = raw[:cut - 2] + (b"  " if empty else b", ") + raw[cut:]
            whole, end, _exc = _parsed(joined)
            complete = end == len(joined) and _appends_fit(whole)
            if complete:  # the first step is all there: make the second
                _apply_steps(fd, st.st_size, [(b"  " if empty else b", ", cut - 2)])
            else:  # cut short within the first step: back to the document before it
                os.ftruncate(fd, cut)
                os.fsync(fd)
            return True
        finally:
            os.close(fd)

    def decode(self, name: str, raw: bytes) -> SessionData:
        with gc_paused():
            return self._decode(name, raw)

    def _decode(self, name: str, raw: bytes) -> SessionData:
        plain = not is_sealed(raw)
        raw, sealed_appendable, left_out = self._opened(name, raw)
        torn = False
        try:
            document, cut, exc = _parsed(raw)
        except _TooManyDigits:
            raise SessionError(f"session '{name}' ({self.where(name)}) holds an integer "
                               f"of more than {sys.get_int_max_str_digits()} digits, more than Python "
                               "reads; the file was left untouched") from None
        if exc is not None:
            if document is None:
                where = f" (line {exc.lineno}, column {exc.colno})" if getattr(exc, "lineno", None) else ""
                kind = "is empty" if not raw.strip() else f"is not valid JSON{where}"
                raise SessionError(f"session '{name}' ({self.where(name)}) {kind}; the file was left "
                                   "untouched") from None
            torn = cut < len(raw)
        session = _document()
        try:
            data = session.decode_session(document)
            if _inexact(data):  # an integer past 64 bits came back as a float: parse exactly
                data = session.decode_session(json.loads(raw[:cut]))
            # Written by this version (history last, nothing after it): a turn can be appended in
            # place. A file with an append cut short is rewritten whole at the next write.
            data.torn = torn
            data.left_out = "cut" if torn else left_out
            data.appendable = (plain or sealed_appendable) and not torn and not data.reshaped \
                and _appends_fit(document) and raw.endswith(b"]}")
            return data
        except session.SessionFormatError as exc:
            raise SessionError(f"session '{name}' ({self.where(name)}): {exc}; the file was left "
                               "untouched") from None

    def save(self, name: str, data: SessionData,
             before_replace: Callable[[SessionData], None] | None = None) -> Stamp:
        """Replace session `name` with `data`, under its lock. An existing file that cannot be
        read (newer version, malformed) is refused, never overwritten; one that can is handed
        to `before_replace` first (to keep what it held, say)."""
        with self.lock(name):
            if self.stamp(name) is not None:
                try:
                    previous, _ = self.load(name)
                except SessionError as exc:
                    raise SessionError(f"{exc}; not overwriting it (delete it or choose another name)") from None
                if before_replace is not None:
                    before_replace(previous)
            return self.write(name, data)

    def create(self, name: str, data: SessionData, *, latest: bool = True) -> Stamp:
        """Write a new session; SessionExists if another process (or an earlier run) made it first.
        `latest`: as for `write`."""
        with self.lock(name):
            if self.stamp(name) is not None:
                raise SessionExists(f"session '{name}' already exists")
            return self.write(name, data, latest=latest)

    def date(self, name: str, when: float | None) -> None:
        """Give session `name` the time of its last change as `when` (seconds since the epoch),
        when that is in the past: a conversation imported from another tool is listed, and
        resumed by --continue, by when it was held, not by when it was imported. Best effort."""
        import time

        if when is None or when >= time.time():
            return
        with contextlib.suppress(OSError):
            os.utime(self.path(name), (when, when), follow_symlinks=False)

    def write(self, name: str, data: SessionData, *, latest: bool = True) -> Stamp:
        """The atomic write itself, with no checks: callers hold `lock(name)` and have decided.
        `latest=False` leaves the pointer to the session written last as it is (a write the user
        did not make, a machine mirror, is not the session to offer at start-up)."""
        path = self.path(name)
        session = _document()
        if data.title is None:
            data.title = session.make_title(data.history)
        try:
            self._refuse_protected(name, path)
            ensure_private_dir(self.root)
            if self._loose_dir():
                os.chmod(self.root, PRIVATE_DIR)
            if self.key is None and len(data.history) >= STREAMED_FROM:
                try:
                    atomic_write(path, _pieces_of(session.encode_head(data), data.history))
                except TypeError:  # a value orjson refuses: written whole, below
                    atomic_write(path, self._payload(name, session.encode_session(data)))
            else:
                atomic_write(path, self._payload(name, session.encode_session(data)))
            stamp = Stamp.of(os.stat(path))
        except OSError as exc:
            raise self._error(name, exc, writing=True) from None
        if latest:
            self.catalog.note_latest(name, stamp.mtime_ns, None if self.private else len(data.history))
        self.catalog.note_journal(name, data.transcript_id)
        data.appendable = True
        return stamp

    def _payload(self, name: str, document: dict) -> bytes:
        """The bytes of a whole session document, sealed with a key."""
        try:
            payload = _json().dumps(document)
        except TypeError:  # a value orjson refuses (an integer past 64 bits in a foreign field)
            # A lone surrogate (no character: turns clean their text, this is the last line of
            # defence) is written as "?" rather than leaving the whole session unwritten.
            payload = json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "replace")
        if self.key is not None:
            return sealer_for(self.key).seal(payload, "session", name)
        if _straddles(len(payload) - 2):  # keep the closing "]}" within one disk sector (see append)
            payload = payload[:-2] + b" ]}"
        return payload

    def landed(self, name: str) -> int | None:
        """For a store whose writes can be done without their caller knowing (a server's answer
        lost): see PgSessionStore.landed. A file written here either was or was not."""
        return None

    def raw(self, name: str) -> tuple[bytes, Stamp] | None:
        """Session `name`'s bytes as they are kept (sealed, with a key), and its stamp; None when
        there is none. For moving a store whole (store.migrate): nothing is decoded or mended."""
        try:
            raw, st = read_regular(self.path(name))
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise self._error(name, exc) from None
        return raw, Stamp.of(st)

    def put_raw(self, name: str, raw: bytes, changed_ns: int, data: SessionData) -> Stamp:
        """Keep `raw` (another store's bytes of session `name`, which decode as `data`) as this
        store's session, its time of change `changed_ns`. The caller holds `lock(name)` and
        knows there is no such session here."""
        path = self.path(name)
        try:
            ensure_private_dir(self.root)
            atomic_write(path, raw)
            os.utime(path, ns=(changed_ns, changed_ns), follow_symlinks=False)
            stamp = Stamp.of(os.stat(path))
        except OSError as exc:
            raise self._error(name, exc, writing=True) from None
        self.catalog.note_journal(name, None if self.private else data.transcript_id)
        return stamp

    def head(self, data: SessionData) -> bytes | None:
        """Every field of `data`'s document but its history, as written (before sealing): two
        documents with the same head differ only in their histories (what `append` may add)."""
        try:
            return _json().dumps(_document().encode_head(data))
        except TypeError:
            return json.dumps(_document().encode_head(data), ensure_ascii=False).encode("utf-8")

    def append(self, name: str, messages: Sequence[Message], count: int, expect: Stamp) -> Stamp | None:
        """Add `messages` to the end of session `name`'s history, in place, without rewriting the
        file: a turn costs the same at 100 messages as at 100,000. The caller holds `lock(name)`,
        and knows that the file is still `expect` (its own last read or write), that it was
        `appendable`, that it holds `count` messages, and that nothing else in it changed.

        Two steps, each fsync'd, so that a crash at any point leaves a file that reads as
        either the old document or the new one:
          1. the messages and a new closing `]}` are written after the end of the file: readers
             parse the old document and ignore what follows it (`_before_torn_append`);
          2. the old closing `]}` (two bytes, never across a 512-byte sector: `_straddles`)
             becomes `, ` (or two spaces for an empty history): the document now runs on to
             the new end.
        A sealed session gets one sealed record per turn instead (Sealer.open_session), in one
        fsync'd write: a crash leaves a last record cut short, which readers leave out. Once the
        records outweigh the snapshot they follow, the file is rewritten whole (None), so a
        sealed file costs at most twice its size to read.

        Returns the new stamp, or None when this is not the file expected (the caller writes it
        whole)."""
        body = turn_body(messages)
        if body is None:
            return None
        if self.key is not None:
            return self._append_sealed(name, body, expect)
        fd = self._open_for_append(name)
        if fd is None:
            return None
        try:
            st = os.fstat(fd)
            # A hard-linked file (a backup made with `cp -al`) is written whole, as before: the
            # rename gives this name a file of its own instead of changing the backup's.
            if not _appendable(st, expect) or st.st_size < WHOLE_BELOW:
                return None  # small: written whole, so that it is whole JSON at every moment
            ending = os.pread(fd, min(st.st_size, 64), max(0, st.st_size - 64))
            if not ending.endswith(b"]}") or _straddles(st.st_size - 2):
                return None
            empty = ending[:-2].rstrip().endswith(b"[")  # the history's last byte before its "]"
            end = st.st_size + len(body)
            _apply_steps(fd, st.st_size, [(body + (b" ]}" if _straddles(end) else b"]}"), st.st_size),
                                          (b"  " if empty else b", ", st.st_size - 2)])
            stamp = Stamp.of(os.fstat(fd))
        except OSError as exc:
            raise self._error(name, exc, writing=True) from None
        finally:
            os.close(fd)
        total = None if self.private else count + len(messages)
        self.catalog.note_appended(name, stamp, total)
        self.catalog.note_latest(name, stamp.mtime_ns, total)
        return stamp

    def _open_for_append(self, name: str) -> int | None:
        try:
            return os.open(self.path(name), os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise self._error(name, exc, writing=True) from None

    def _append_sealed(self, name: str, body: bytes, expect: Stamp) -> Stamp | None:
        fd = self._open_for_append(name)
        if fd is None:
            return None
        try:
            st = os.fstat(fd)
            header = os.pread(fd, SESSION_HEADER, 0)
            snapshot = session_layout(header)
            if not _appendable(st, expect) or snapshot is None or (st.st_size - snapshot) + len(body) > snapshot:
                return None  # not the file expected, or time to fold the turns into a new snapshot
            _apply_steps(fd, st.st_size, [(sealer_for(self.key).append_record(header, name, st.st_size, body),
                                           st.st_size)])
            stamp = Stamp.of(os.fstat(fd))
        except OSError as exc:
            raise self._error(name, exc, writing=True) from None
        finally:
            os.close(fd)
        self.catalog.note_appended(name, stamp, None)
        self.catalog.note_latest(name, stamp.mtime_ns, None)
        return stamp

    def index_rows(self, name: str) -> tuple[list[tuple[int, str, str]], int, int, int, str] | None:
        """What a search index takes of session `name`, read whole: the (position, role, text)
        of its messages but its system prompts; the file's inode, or 0 when a turn cannot be
        appended to it in place as it is (the index then reads it whole again); its size; its
        message count; the journal it names. None when it cannot be read (it is not searched)."""
        try:
            data, stamp = self.load(name)
        except Exception:  # noqa: BLE001 - a session that cannot be read is not searched
            return None
        rows = [(pos, m.role, m.content) for pos, m in enumerate(data.history, 1) if m.role != "system"]
        return rows, stamp.inode if data.appendable else 0, stamp.size, len(data.history), data.transcript_id or ""

    def appended_since(self, name: str, inode: int, size: int) -> tuple[list[Message], int, int] | None:
        """The messages appended in place to session `name` since it was `size` bytes long as
        inode `inode` (a search index catching up), with the file's inode and size now; None
        when the file was rewritten since (another inode, shorter, sealed) or does not read that
        way. Reads only what was added."""
        if self.key is not None:
            return None
        try:
            fd = os.open(self.path(name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_ino != inode or st.st_size < size or size < 2:
                return None
            data = os.pread(fd, st.st_size - size + 2, size - 2)
        except OSError:
            return None
        finally:
            os.close(fd)
        if data.startswith(b"]}"):  # nothing added (or an append cut short before its second step)
            return [], st.st_ino, size
        if not (data.startswith(b", ") or data.startswith(b"  ")) or not data.endswith(b"]}"):
            return None
        try:
            items = _json().loads(b"[" + data[2:-2] + b"]")
            messages = list(map(_document().Message.from_dict, items))
        except (ValueError, TypeError):
            return None
        if _document().reshaped(messages, items):
            return None  # tool calls another version appended in a shape Go refuses: read whole, write whole
        return messages, st.st_ino, st.st_size

    def protected(self, name: str) -> str | None:
        """Why session `name` must not be replaced, or None: its owner made it read-only (chmod
        a-w; the rename that makes a write atomic would ignore the mode), or it is a symbolic
        link (the rename would replace the link, not what it leads to). One lstat."""
        path = self.path(name)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return None
        if stat.S_ISLNK(st.st_mode):
            return f"{path} is a symbolic link"
        if stat.S_ISREG(st.st_mode) and not st.st_mode & stat.S_IWUSR:
            return f"{path} is read-only (mode {stat.S_IMODE(st.st_mode):04o}; chmod u+w allows writing it)"
        return None

    def _refuse_protected(self, name: str, path: Path) -> None:
        why = self.protected(name)
        if why:
            raise SessionError(f"session '{name}': {why}; not overwriting it; nothing was written")

    def _loose_dir(self) -> bool:
        """A sessions directory made by someone else with group/other access (checked once)."""
        if self._checked_mode:
            return False
        self._checked_mode = True
        return bool(os.stat(self.root).st_mode & 0o077)

    def delete(self, name: str) -> None:
        if self.stamp(name) is None:
            raise SessionNotFound(f"session '{name}' does not exist")
        with self.lock(name, drop=True):
            try:
                os.unlink(self.path(name))
            except FileNotFoundError:
                raise SessionNotFound(f"session '{name}' does not exist") from None
            except OSError as exc:
                raise self._error(name, exc, writing=True) from None

    def remove_if_unchanged(self, name: str, mtime_ns: int, size: int, inode: int) -> bool:
        """Delete session `name` only if it is still the file a retention plan saw (same inode,
        mtime and size; every chatcli write is a rename, so a rewrite changes the inode): a
        session another surface wrote since is kept. False when it changed or is gone."""
        path = home.session_text(str(self.root), validate_name(name))  # strings: a sweep calls this 10,000 times
        with self.lock(name, drop=True):
            try:
                st = os.stat(path)
            except FileNotFoundError:
                return False
            if st.st_ino != inode or st.st_mtime_ns != mtime_ns or st.st_size != size:
                return False
            os.unlink(path)
            return True

    def lock_path(self, name: str) -> Path:
        return home.lock_path(self.root, validate_name(name))

    @contextlib.contextmanager
    def lock(self, name: str, *, drop: bool = False, wait: bool = True) -> Iterator[bool]:
        """Exclusive per-session lock across processes (held only around read-merge-write).

        The lock is the inode at the session's lock path (store.home names it). Whoever deletes
        the session unlinks the lock file while holding it (`drop=True`), so deleted sessions
        leave nothing behind; a process that was waiting on the unlinked inode sees, once it gets
        it, that the path no longer leads there, and starts over on the current file. So two
        holders can never coexist. With `wait=False` a lock someone holds (this process
        included) is not waited for: the block runs with False.
        """
        lock_path = home.lock_text(str(self.root), validate_name(name))
        while True:
            try:
                try:
                    fd = open_in_home(lock_path, os.O_RDWR | os.O_CREAT)
                except FileNotFoundError:  # no sessions directory yet
                    ensure_private_dir(self.root)
                    fd = open_in_home(lock_path, os.O_RDWR | os.O_CREAT)
            except RefusedFile as exc:  # a link or a FIFO at the lock path: refused, as a linked session is
                raise SessionError(f"session '{name}': cannot write {lock_path}: {os_cause(exc)}; nothing was "
                                   "written") from None
            except OSError as exc:
                raise self._error(name, exc, writing=True) from None
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:  # held, and not waited for
                    os.close(fd)
                    fd = -1
                    break
                held = os.fstat(fd)
                try:
                    current = os.stat(lock_path)
                except FileNotFoundError:
                    current = None
                if current is not None and current.st_ino == held.st_ino and current.st_dev == held.st_dev:
                    break
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)  # a lock file deleted while we waited: take the new one
        if fd < 0:
            yield False
            return
        try:
            yield True
        finally:
            if drop:
                with contextlib.suppress(OSError):
                    os.unlink(lock_path)
            os.close(fd)

    def remove_orphan_lock(self, lock_path: Path, mtime_ns: int) -> bool:
        """Unlink a lock file whose session does not exist, unless someone holds it, the session
        appeared, or the file changed since it was planned for removal."""
        try:
            fd = os.open(lock_path, os.O_RDWR)
        except FileNotFoundError:
            return False
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            held = os.fstat(fd)
            owner = home.locked_session(lock_path.name)
            try:
                current = os.stat(lock_path)
            except FileNotFoundError:
                return False
            if (current.st_ino != held.st_ino or current.st_mtime_ns != mtime_ns or owner is None
                    or home.session_path(lock_path.parent, owner).exists()):
                return False
            os.unlink(lock_path)
            return True
        finally:
            os.close(fd)

    # -- the listing (store.catalog) ----------------------------------------------------------
    def list(self, fresh: bool = False) -> list[SessionInfo]:
        return self.catalog.list(fresh)

    def entries(self, fresh: bool = False, record: bool = True, reveal: bool = False) -> dict[str, list]:
        return self.catalog.entries(fresh, record, reveal)

    def latest(self) -> SessionInfo | None:
        return self.catalog.latest()

    # -- errors --------------------------------------------------------------------------
    def _error(self, name: str, exc: OSError, writing: bool = False) -> SessionError:
        action = "cannot write" if writing else "cannot read"
        nothing = "; nothing was written" if writing else ""
        return SessionError(f"session '{name}': {action} {self.path(name)}: {os_cause(exc)}{nothing}")


__all__ = ["PRIVATE_DIR", "SessionError", "SessionExists", "SessionInfo", "SessionNotFound", "SessionStore", "Stamp"]
