"""What `chatcli session list` needs before anything else, importing little (on a cold page
cache every module read costs): each session file's stamp, the row of a file read in the common
shape, and the listing's caches beside the sessions directory, the rendered listing with the
stamp of every file it shows and the log of turns appended in place (see SessionStore.append).
The catalog (store.catalog) keeps its rows with the same stamps. Their names come from store.home:

  the rendered listing   "<format> <key length> <key><appends log size> <stamps> <names>\\n" then
                         the text, where <names> are the session files' names in directory
                         order joined by "/" (which no file name holds) and <stamps> their
                         stamps packed as 64-bit integers, in hexadecimal (compared as text:
                         several times quicker than 40,000 numbers written in decimal)
  the appends log        one line per append: ["<name>", mtime_ns, size, messages]
"""

from __future__ import annotations

import os
import struct
import sys
from stat import S_ISREG

from chatcli.store.home import appends_text, rendered_text, session_named

CATALOG_VERSION = 5
RENDERED_FORMAT = "r2"
# Within this of its last change, a file on a clock that counts whole seconds may still change
# without its stamp changing (see `kept_ctime`).
SETTLE_NS = 2_000_000_000
_SECOND = 1_000_000_000

Appended = tuple  # (name, mtime_ns, size, messages or None)


# -- the rows of a listing ------------------------------------------------------------------------
_session_info: type | None = None


def session_info() -> type:
    """The type of one row of a listing, SessionInfo (store.catalog exports it): name, messages
    (None when the file cannot be read), mtime, size, title, problem, transcript id. A plain
    tuple type: ten thousand are built per `session list`. Made at its first use: importing
    `collections` costs ~3 ms, a tenth of what a listing printed from its rendering adds to
    stat'ing the files."""
    global _session_info
    if _session_info is None:
        from collections import namedtuple

        _session_info = namedtuple("SessionInfo", "name messages mtime size title problem transcript",
                                   defaults=("", ""))
    return _session_info


def newest_first(rows: dict[str, list]) -> list:
    """Catalog rows (store.catalog) as a listing of SessionInfo, newest first (files of the
    same mtime in the order of `rows`)."""
    from operator import itemgetter

    make = session_info()._make
    infos = [make((name, row[2], row[0] / 1e9, row[1], row[3], row[4], row[5])) for name, row in rows.items()]
    infos.sort(key=itemgetter(2), reverse=True)
    return infos


def row_numbers(rows: dict[str, list]) -> list[int]:
    """The stamps of catalog rows, flattened (a ctime of None, from the appends log, as 0)."""
    numbers: list[int] = []
    for row in rows.values():
        numbers += (row[0], row[1], row[6] or 0, row[7])
    return numbers


# -- what a session file looks like -------------------------------------------------------------
def stamp(st: os.stat_result) -> list[int]:
    """What must be unchanged for a file's row to be kept: [mtime_ns, size, ctime_ns, inode].

    mtime and size alone miss a rewrite of the same size that keeps or puts back the mtime
    (`cp -p`, `rsync -t`, `touch -r`, an editor within one clock tick). The ctime cannot be set
    by anyone and changes with every write; since Linux 6.13 (ext4, xfs, btrfs, tmpfs) a change
    made after a stat gets a ctime distinct from the one that stat saw, so even a rewrite
    within the clock tick of our read is seen. The inode tells a file replaced by a rename
    (chatcli's own writes, an editor's safe save). What remains, a clock that counts whole
    seconds, is `kept_ctime`'s."""
    return [st.st_mtime_ns, st.st_size, st.st_ctime_ns, st.st_ino]


def kept_ctime(st: os.stat_result, now_ns: int) -> int:
    """The ctime to keep in the stamp of a row made by reading the file. On a clock that counts
    whole seconds (FAT, some network mounts) a file read within SETTLE_NS of its last change may
    change again without its stamp changing: it is kept as 0, which no file has, so the file is
    read again until it settles (git's "racily clean" entries, the same way). A kernel before
    6.13 with a fine clock leaves a same-size rewrite within one tick (≤ 10 ms) of our read
    unseen until the file's next change."""
    ctime = st.st_ctime_ns
    return 0 if ctime % _SECOND == 0 and now_ns - ctime < SETTLE_NS else ctime


Scan = tuple  # ([name, ...], [stat, ...]): the session files of a directory, in its order


def scan(root: str) -> Scan:
    """The names and stats of every session file in `root`, in directory order, following links
    as the catalog does (one that leads nowhere is left out). Raises OSError."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        filenames = os.listdir(fd)
        stat_of, names, stats = os.stat, [], []
        for filename, name in zip(filenames, map(session_named, filenames)):
            if name is not None:
                try:
                    stats.append(stat_of(filename, dir_fd=fd))  # one name to look up, not the whole path
                except OSError:
                    continue
                names.append(name)
    finally:
        os.close(fd)
    return names, stats


def stamps_text(numbers: list[int]) -> str | None:
    """Stamps, flattened ([mtime_ns, size, ctime_ns, inode] after one another), as the rendered
    listing keeps them; None for a number past 64 bits (no rendering is kept then)."""
    try:
        return struct.pack(f"<{len(numbers)}q", *numbers).hex()
    except struct.error:
        return None


def stat_numbers(stats: list[os.stat_result]) -> list[int]:
    """The stamps of `stats`, flattened."""
    numbers: list[int] = []
    for st in stats:
        numbers += (st.st_mtime_ns, st.st_size, st.st_ctime_ns, st.st_ino)
    return numbers


# -- one session file's row, read without the store ---------------------------------------------
_message = None  # core.messages.Message, imported at the first file read
_title_rule = None  # core.session.title_of, imported at the first title made
_SMALL = 1 << 20  # below this, a file is parsed by the json module unless orjson is loaded already


def parsed(raw: bytes) -> object | None:
    """The document in `raw` as the store's reader parses it when orjson takes it whole (a number
    past 64 bits aside, which no row shows), or None where that reader has more to say (not
    JSON, an append cut short, a number past a double). A small file is parsed by the json
    module while orjson is not loaded: importing orjson costs ~40 ms (it imports uuid,
    dataclasses, datetime), json ~14, and either parses less than a megabyte in less than the
    difference. Where the two could disagree json's answer is not taken (None): orjson refuses
    NaN and Infinity, a float past a double, a lone surrogate escape, bytes that are not UTF-8."""
    orjson = sys.modules.get("orjson")
    if orjson is None and len(raw) >= _SMALL:
        import orjson
    if orjson is not None:
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            return None
    import json

    try:
        text = raw.decode("utf-8")
        if "\\ud" in text or "\\uD" in text:
            return None  # a surrogate escape (orjson refuses a lone one): not worth telling them apart here
        return json.loads(text, parse_constant=_refused, parse_float=_finite)
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return None


def _refused(constant: str) -> float:
    raise ValueError(f"{constant} is not JSON")


def _finite(text: str) -> float:
    number = float(text)
    if number in (float("inf"), float("-inf")):
        raise ValueError(f"{text} is past a double")
    return number


def read_row(path: str, now_ns: int) -> list | None:
    """The catalog's row of session file `path` (store.catalog: [mtime_ns, size, messages, title,
    "", transcript id, ctime_ns, inode]) when it is a plain file in the shape chatcli and Go
    ChatCLI write (a v2 document, one history), read in four system calls (open, fstat, read,
    close) and taken from the parsed document without building the session: what the store's
    reader would say of it, for the cost of a parse. None for anything else (not a plain file,
    sealed, not JSON, an append cut short, a number past a double, v1, several histories, a
    message the reader refuses, a title made from multi-part content), left to that reader."""
    global _message, _title_rule
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not S_ISREG(st.st_mode):
            return None
        raw = os.read(fd, st.st_size)  # exactly what the stat says (an append may be landing)
        if 0 < len(raw) < st.st_size:  # a read cut short (a signal): the rest
            parts = [raw]
            while (left := st.st_size - sum(map(len, parts))) > 0 and (part := os.read(fd, left)):
                parts.append(part)
            raw = b"".join(parts)
    except OSError:
        return None
    finally:
        os.close(fd)
    document = parsed(raw)
    if _message is None:  # only when a file is read: a listing of unchanged sessions reads none
        from chatcli.core.messages import Message as _message
    from_dict = _message.from_dict
    if document.__class__ is not dict:
        return None
    version, chat = document.get("version"), document.get("chat_history") or []
    if version.__class__ is not int or version != 2 or chat.__class__ is not list \
            or document.get("agent_history") or document.get("coder_history"):
        return None
    try:
        for item in chat:  # what the reader refuses (Message.from_dict), looked at most cheaply
            if item.__class__ is not dict or len(item) != 2 or item.get("content").__class__ is not str \
                    or item.get("role").__class__ is not str:
                from_dict(item)  # any other shape: the reader's own checks
    except Exception:
        return None  # the reader says what is wrong, in its words
    title = document.get("title")
    if title.__class__ is not str or not title.strip():
        title = ""
        for item in chat:  # make_title's choice: the first user message with text
            if item["role"] == "user" and (content := item.get("content")):
                if content.__class__ is not str:
                    return None  # multi-part content: its text is the reader's business
                if content.strip():
                    if _title_rule is None:
                        from chatcli.core.session import title_of as _title_rule
                    title = _title_rule(content)
                    break
    transcript = document.get("transcript_id")
    return [st.st_mtime_ns, st.st_size, len(chat), title, "", transcript if transcript.__class__ is str else "",
            kept_ctime(st, now_ns), st.st_ino]


# -- the rendered listing ---------------------------------------------------------------------------
class Rendering:
    """A saved listing: its text, the names and stamps of the files it shows, and how long the
    appends log was when it was made."""

    __slots__ = ("text", "names", "stamps", "appends")

    def __init__(self, text: str, names: str, stamps: str, appends: int) -> None:
        self.text, self.names, self.stamps, self.appends = text, names, stamps, appends

    def shows(self, scanned: Scan) -> bool:
        """The files are the ones this listing was made from, stamp for stamp."""
        names, stats = scanned
        return "/".join(names) == self.names and stamps_text(stat_numbers(stats)) == self.stamps

    def stamp_table(self) -> dict[str, tuple[int, int, int, int]] | None:
        """{name: (mtime_ns, size, ctime_ns, inode)} of the files this listing shows, in directory order."""
        names = self.names.split("/") if self.names else []
        try:
            packed = bytes.fromhex(self.stamps)
            numbers = struct.unpack(f"<{len(packed) // 8}q", packed)
        except (ValueError, struct.error):
            return None
        if len(numbers) != 4 * len(names):
            return None
        return {name: numbers[4 * i: 4 * i + 4] for i, name in enumerate(names)}


def read_rendering(root: str, key: str) -> Rendering | None:
    """The listing saved under `key`, whether it still holds or not; None when there is none."""
    try:
        with open(rendered_text(root), encoding="utf-8") as handle:
            header = handle.readline().rstrip("\n")
            text = handle.read()
    except (OSError, ValueError):
        return None
    try:
        kind, length, rest = header.split(" ", 2)
        length = int(length)
        appends, stamps, names = rest[length:].split(" ", 2)
        appends = int(appends)
    except ValueError:
        return None
    if kind != RENDERED_FORMAT or rest[:length] != key:
        return None
    return Rendering(text, names, stamps, appends)


def read_rendered(root: str, key: str) -> str | None:
    """The text saved under `key` while every session file is as it was when it was saved;
    None when the listing must be made again."""
    rendering = read_rendering(root, key)
    if rendering is None:
        return None
    try:
        scanned = scan(root)
    except OSError:
        return None
    if not rendering.shows(scanned):
        return None
    return rendering.text


def save_rendered(root: str, key: str, text: str, names: list[str] | None = None, stamps: str | None = None,
                  appends: int = 0) -> None:
    """Keep `text` (a formatted listing) with the names of the files it was made from, in
    directory order, their stamps (`stamps_text`) and the appends log's size when their rows
    were made: written to a temporary file then renamed (a cache: not fsync'd; lost, it is made
    again). Nothing is kept without names and stamps, for a name no header line can hold, or
    for one that ends with a space (a line's name is read back as its first characters, padded
    with spaces to the widest: "a " would read as "a")."""
    if names is None or stamps is None or "\n" in key or any("\n" in name or name.endswith(" ") for name in names):
        return
    target = rendered_text(root)
    temp = f"{os.path.dirname(target)}/.{os.path.basename(target)}.{os.getpid()}.{os.urandom(6).hex()}.tmp"
    try:
        data = f"{RENDERED_FORMAT} {len(key)} {key}{appends} {stamps} {'/'.join(names)}\n{text}".encode("utf-8")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(temp, target)
    except (OSError, UnicodeError):
        try:
            os.unlink(temp)
        except OSError:
            pass


# -- the log of turns appended in place ----------------------------------------------------------
def appended_rows(root: str, start: int, end: int | None = None) -> list[Appended]:
    """The appends log's rows from byte `start` (to `end`); lines that do not parse are skipped."""
    try:
        with open(appends_text(root), "rb") as handle:
            handle.seek(start)
            data = handle.read(-1 if end is None else end - start)
    except OSError:
        return []
    return [row for row in map(parse_appended, data.split(b"\n")) if row is not None]


def appended_line(name: str, mtime_ns: int, size: int, messages: int | None) -> bytes:
    return f'["{name}", {mtime_ns}, {size}, {"null" if messages is None else messages}]\n'.encode()


def parse_appended(line: bytes) -> Appended | None:
    """One line of the log, or None. Session names need no JSON escapes (core.names)."""
    parts = line.strip().removeprefix(b"[").removesuffix(b"]").split(b", ")
    if len(parts) != 4 or len(parts[0]) < 3 or not parts[0].startswith(b'"') or not parts[0].endswith(b'"'):
        return None
    try:
        numbers = [int(part) for part in parts[1:3]]
        messages = None if parts[3] == b"null" else int(parts[3])
    except ValueError:
        return None
    return parts[0][1:-1].decode("utf-8", "replace"), numbers[0], numbers[1], messages


def note_appended(root: str, name: str, mtime_ns: int, size: int, messages: int | None) -> None:
    """One line to the log, in one write (O_APPEND: concurrent writers never interleave). A
    cache: a line that fails to be written leaves the row to the next scan."""
    try:
        fd = os.open(appends_text(root), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    except OSError:
        return
    try:
        os.write(fd, appended_line(name, mtime_ns, size, messages))
    except OSError:
        pass
    finally:
        os.close(fd)
