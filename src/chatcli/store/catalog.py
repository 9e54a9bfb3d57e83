"""The listing of a sessions directory: every session, newest first, from a stat-keyed catalog
instead of parsing every file; the log of turns appended in place that keeps it current; the
pointer to the session written last; the rendered listing `chatcli session list` prints; and
the journal chatcli last named in each session's file.

All are caches beside the directory (store.home names them): deleting any of them costs one
slower listing, never a session (the last, a journal's protection from a program that rewrites
a session without naming its journal: see `remembered_journals`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import time
from collections import namedtuple
from operator import itemgetter
from pathlib import Path

from chatcli.core.errors import ChatcliError
from chatcli.core.names import NAME_RE
from chatcli.store import home, listing_cache
from chatcli.store.atomic import atomic_write
from chatcli.store.listing_cache import CATALOG_VERSION, SETTLE_NS
from chatcli.store.session_file import SessionError, read_regular

TYPE_CHECKING = False
if TYPE_CHECKING:
    from chatcli.store.sessions import SessionStore, Stamp

APPENDS_FOLD = 64 * 1024  # bytes of the appends log a listing applies before folding them into the catalog

# One row of a listing: name, messages (None when the file cannot be read), mtime, size,
# title, problem, transcript id. A plain tuple type: ten thousand are built per `session list`.
SessionInfo = namedtuple("SessionInfo", "name messages mtime size title problem transcript", defaults=("", ""))


def _make_title(history) -> str | None:
    # The session document is imported only when a file is read (a listing of unchanged
    # sessions reads none), as in store.sessions.
    from chatcli.core.session import make_title

    return make_title(history)


class Catalog:
    """The listing of `store`'s directory. Files are read through the store (its key, its
    errors); with encryption on, the caches keep names, times and sizes only."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        # The remembered journals as last read: ((inode, mtime, size) of the file, {name: id}).
        self._journals: tuple[tuple[int, int, int], dict[str, str]] | None = None

    @property
    def root(self) -> Path:
        return self.store.root

    def list(self, fresh: bool = False) -> list[SessionInfo]:
        """Every session, newest first, from a catalog keyed by stat data (never by parsing all files).

        Every write chatcli makes in the sessions directory is a create, rename or unlink, and
        each of those changes the directory's mtime. So when the directory's mtime is the one
        the catalog recorded, the catalog is the answer and no file is stat'ed (on these
        machines a stat costs ~7 µs: 70 ms for 10,000 sessions). Otherwise every file is
        stat'ed and only those whose mtime or size changed are opened. A directory changed in
        the last SETTLE_NS is not trusted (timestamps are coarse). What this cannot see is a
        file rewritten in place by another program: it shows at the next change to the
        directory, and `fresh=True` (used by --continue) always stats every file. The catalog
        lives beside the directory (so writing it changes nothing) and is a cache: deleting
        it costs one slower listing.
        """
        make = SessionInfo._make
        infos = [make((name, row[2], row[0] / 1e9, row[1], row[3], row[4], row[5]))
                 for name, row in self.entries(fresh).items()]
        infos.sort(key=itemgetter(2), reverse=True)
        return infos

    def entries(self, fresh: bool = False, record: bool = True, reveal: bool = False) -> dict[str, list]:
        """The catalog itself: {name: [mtime_ns, size, messages, title, problem, transcript id]}
        (see `list` for when it is trusted without looking at the files). `record=False` leaves
        the catalog file as it is (a dry run must change nothing on disk). With encryption on the
        catalog knows no contents; `reveal` reads every file for them, in memory only (storage
        needs each session's journal id)."""
        if reveal and self.store.private:
            return self._scan({}, reveal=True)
        try:
            directory = os.stat(self.root)
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise SessionError(f"cannot list sessions in {self.root}: {exc.strerror or exc}") from None
        recorded, catalog, seen = self._read_catalog()
        appended, end = self._read_appends(seen, catalog)
        if not fresh and recorded is not None and recorded == directory.st_mtime_ns:
            if record and end - seen > APPENDS_FOLD and not self.store.locked_out:
                self._write_catalog(recorded, catalog, end)
            return catalog
        rows = self._scan(catalog)
        settled = time.time_ns() - directory.st_mtime_ns > SETTLE_NS
        mark = directory.st_mtime_ns if settled else None
        if record and (rows != catalog or mark != recorded or appended) and not self.store.locked_out:
            self._write_catalog(mark, rows, end)
        if record and not self.store.locked_out:
            self._learn_journals(rows)
        return rows

    def _scan(self, catalog: dict[str, list], reveal: bool = False) -> dict[str, list]:
        named = home.session_named
        try:
            entries = [(name, e) for e in os.scandir(self.root) if (name := named(e.name)) is not None]
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise SessionError(f"cannot list sessions in {self.root}: {exc.strerror or exc}") from None
        rows: dict[str, list] = {}
        for name, entry in entries:
            try:
                st = entry.stat()
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                rows[name] = [st.st_mtime_ns, st.st_size, None, "", "not a regular file", ""]
                continue
            if not NAME_RE.fullmatch(name) or ".." in name:
                rows[name] = [st.st_mtime_ns, st.st_size, None, "",
                              "not a valid session name; rename the file to use it", ""]
                continue
            cached = catalog.get(name)
            if cached and cached[0] == st.st_mtime_ns and cached[1] == st.st_size:
                rows[name] = cached
            else:
                rows[name] = self._summarise(name, Path(entry.path), st, reveal)
        return rows

    def _summarise(self, name: str, path: Path, st: os.stat_result, reveal: bool = False) -> list:
        if self.store.private and not reveal:  # encryption on: names, times and sizes; nothing from inside
            return [st.st_mtime_ns, st.st_size, None, "", "", ""]
        try:
            data = self.store.decode(name, read_regular(path)[0])
            if data.torn and self.store.mend(name):  # an append cut short: whole JSON again for every reader
                st = os.stat(path)
                data = self.store.decode(name, read_regular(path)[0])
        except (SessionError, OSError) as exc:
            problem = str(exc) if isinstance(exc, SessionError) else (exc.strerror or str(exc))
            return [st.st_mtime_ns, st.st_size, None, "", problem, ""]
        title = data.title or _make_title(data.history) or ""
        return [st.st_mtime_ns, st.st_size, len(data.history), title, "", data.transcript_id or ""]

    @property
    def path(self) -> Path:
        # Beside the sessions directory: writing it must not change the directory's mtime.
        return home.catalog_path(self.root)

    def _read_catalog(self) -> tuple[int | None, dict[str, list], int]:
        """(the directory mtime it was made at, its rows, how much of the appends log it holds)."""
        # The standard json module here: importing orjson costs more (~30 ms) than it would
        # save on a catalog, and a listing of unchanged sessions needs nothing else from it.
        try:
            value = json.loads(self.path.read_bytes())
        except (OSError, ValueError, RecursionError):  # a cache: damaged or absurdly nested, made again
            return None, {}, 0
        if not isinstance(value, dict) or value.get("version") != CATALOG_VERSION \
                or value.get("private", False) != self.store.private:  # made with encryption on (or off): start again
            return None, {}, 0
        entries = value.get("entries")
        recorded = value.get("directory_mtime_ns")
        seen = value.get("appends_end", 0)
        if not isinstance(entries, dict) or not all(
                isinstance(row, list) and len(row) == 6 for row in entries.values()):
            return None, {}, 0
        return (recorded if isinstance(recorded, int) else None), entries, seen if isinstance(seen, int) else 0

    def _write_catalog(self, directory_mtime_ns: int | None, entries: dict[str, list], appends_end: int = 0) -> None:
        document = {"version": CATALOG_VERSION, "directory_mtime_ns": directory_mtime_ns, "entries": entries,
                    "private": self.store.private, "appends_end": appends_end}
        try:  # a cache: failing to write it only costs the next listing some work
            atomic_write(self.path, json.dumps(document, separators=(",", ":")).encode("utf-8"), durable=False)
        except OSError:
            pass

    # -- turns appended in place ------------------------------------------------------------
    # An append (SessionStore.append) changes a file but not the directory, so the catalog cannot
    # see it by the directory's mtime. The appender says what it wrote in one line of a log beside
    # the catalog: [name, mtime_ns, size, messages]; listings apply the lines the catalog does not
    # hold yet, and fold them into it once they pass APPENDS_FOLD bytes. The log is a cache like
    # the catalog: a line lost leaves the row to the next scan, which re-reads that file.
    @property
    def appends_path(self) -> Path:
        return home.appends_path(self.root)

    def note_appended(self, name: str, stamp: Stamp, messages: int | None) -> None:
        listing_cache.note_appended(str(self.root), name, stamp.mtime_ns, stamp.size, messages)

    def _read_appends(self, seen: int, catalog: dict[str, list]) -> tuple[bool, int]:
        """Apply the appends log past byte `seen` to `catalog`'s rows; (any applied, the log's end)."""
        try:
            size = os.stat(self.appends_path).st_size
        except OSError:
            return False, 0
        if seen > size:  # the log was replaced: read it all
            seen = 0
        applied = False
        private = self.store.private
        for name, mtime_ns, size_now, messages in listing_cache.appended_rows(str(self.root), seen, size):
            row = catalog.get(name)
            if row is not None and mtime_ns >= row[0]:
                catalog[name] = [mtime_ns, size_now, None if private else messages, row[3], "", row[5]]
                if not row[3] and not private:  # created empty: its first appended turn names it
                    path = self.store.path(name)
                    try:
                        catalog[name] = self._summarise(name, path, os.stat(path))
                    except OSError:
                        pass
                applied = True
        return applied, size

    # -- the most recent session, without listing them all ---------------------------------
    @property
    def latest_path(self) -> Path:
        return home.latest_path(self.root)

    def note_latest(self, name: str, mtime_ns: int, messages: int | None) -> None:
        """Remember the session written last (every chatcli write comes through
        SessionStore.write), so the REPL can name it at start-up without a listing. A hint: not
        fsync'd, and ignored when it no longer matches the file. A write of no messages (a
        session created empty by --session NEW or /web) leaves it naming the one before: like
        --continue, it offers where the user left off, never an empty session."""
        # Names and counts only: nothing of a conversation's content (SPEC §9 encrypts that).
        if messages == 0:
            return
        payload = json.dumps({"name": name, "mtime_ns": mtime_ns, "messages": messages}, ensure_ascii=False)
        with contextlib.suppress(OSError):
            atomic_write(self.latest_path, payload.encode("utf-8"), durable=False)

    def latest(self) -> SessionInfo | None:
        """The session chatcli wrote last, if it still exists (its message count only while the
        file is the one that was written)."""
        try:
            value = json.loads(self.latest_path.read_bytes())
            name = value["name"]
            st = os.stat(self.store.path(name))
        except (OSError, ValueError, KeyError, TypeError, ChatcliError):
            return None
        same = value.get("mtime_ns") == st.st_mtime_ns
        messages = value.get("messages") if same else None
        return SessionInfo(name, messages if isinstance(messages, int) else None, st.st_mtime_ns / 1e9, st.st_size, "")

    # -- the journal each session's file named, as chatcli last wrote it -----------------------
    # Another program that writes a session back drops what it does not know: Go ChatCLI's
    # SessionData has no `transcript_id`, so a session Go continued no longer names its journal,
    # which holds what compactions replaced. chatcli remembers here the journal it last named in
    # each session's file: a load takes it back (engine.binding) and the retention plan keeps it
    # while the session exists (store.storage). Not with encryption on: Go cannot open a sealed
    # session, so it never writes one back, and the caches then keep names, times and sizes only.
    @property
    def journals_path(self) -> Path:
        return home.journals_path(self.root)

    def remembered_journals(self) -> dict[str, str]:
        """{session name: the transcript id chatcli last wrote in its file, or saw it name}. Read
        again only when it changed (a write of a session whose journal is the same costs a stat)."""
        if self.store.private:
            return {}
        try:
            st = os.stat(self.journals_path)
        except OSError:
            return {}
        mark = (st.st_ino, st.st_mtime_ns, st.st_size)
        if self._journals is not None and self._journals[0] == mark:
            return self._journals[1]
        try:
            value = json.loads(self.journals_path.read_bytes())
        except (OSError, ValueError, RecursionError):
            return {}
        found = value.get("journals") if isinstance(value, dict) and value.get("version") == 1 else None
        journals = {name: transcript for name, transcript in found.items()
                    if isinstance(name, str) and isinstance(transcript, str) and transcript} \
            if isinstance(found, dict) else {}
        self._journals = (mark, journals)
        return journals

    def remembered_journal(self, name: str) -> str | None:
        return self.remembered_journals().get(name)

    def _learn_journals(self, rows: dict[str, list]) -> None:
        """The journals the files name, as a listing read them, are remembered too, so that those
        an earlier version wrote (or all of them, once this cache was deleted) are known before
        another program rewrites the files. A file naming none changes nothing."""
        if self.store.private:
            return
        remembered = self.remembered_journals()
        # Only names it does not know yet: rows read without a lock may be older than an entry
        # another process wrote meanwhile, which a write of that session made (note_journal).
        learned = {name: row[5] for name, row in rows.items() if row[5] and name not in remembered}
        if learned:
            self._change_journals(learned)

    def note_journal(self, name: str, transcript_id: str | None) -> None:
        """Session `name`'s file was just written naming journal `transcript_id`."""
        if self.store.private:  # sealed from now on: what was remembered in plaintext goes
            with contextlib.suppress(OSError):
                os.unlink(self.journals_path)
            return
        if not transcript_id or self.remembered_journal(name) == transcript_id:
            return
        self._change_journals({name: transcript_id})

    def forget_journals(self, names: list[str]) -> None:
        """Sessions chatcli removed (with their journals, when it could): nothing to take back."""
        remembered = self.remembered_journals()
        if any(name in remembered for name in names):
            self._change_journals(dict.fromkeys(names))

    def _change_journals(self, changes: dict[str, str | None]) -> None:
        """Set each name's journal, or forget the name (None)."""
        # Read, changed and replaced under a lock on the sessions directory (which no one else
        # locks): two processes noting two sessions at once must not lose one of them.
        try:
            fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._journals = None
            journals = dict(self.remembered_journals())
            for name, transcript_id in changes.items():
                if transcript_id is None:
                    journals.pop(name, None)
                else:
                    journals[name] = transcript_id
            document = {"version": 1, "journals": journals}
            atomic_write(self.journals_path, json.dumps(document, ensure_ascii=False, separators=(",", ":"))
                         .encode("utf-8"))
            st = os.stat(self.journals_path)  # what we wrote is what the next look would read again
            self._journals = ((st.st_ino, st.st_mtime_ns, st.st_size), journals)
        except OSError:
            pass  # best effort: without it, a session another program rewrites starts a new journal, as before
        finally:
            os.close(fd)

    # -- a rendered listing, valid while the directory is unchanged ---------------------------
    @property
    def rendered_path(self) -> Path:
        return home.rendered_path(self.root)

    def save_rendered(self, key: str, text: str) -> None:
        """Keep `text` (a formatted listing) for as long as the directory stays unchanged."""
        if not self.store.locked_out:
            listing_cache.save_rendered(str(self.root), key, text)


__all__ = ["APPENDS_FOLD", "Catalog", "SessionInfo"]
