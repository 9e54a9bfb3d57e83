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
import sys
import time
from pathlib import Path

from chatcli.core.errors import ChatcliError
from chatcli.core.names import NAME_RE
from chatcli.store import home, listing_cache
from chatcli.store.atomic import atomic_write
from chatcli.store.bulk import gc_paused
from chatcli.store.listing_cache import CATALOG_VERSION, kept_ctime, newest_first, session_info, stamp
from chatcli.store.session_file import SessionError, read_regular

TYPE_CHECKING = False
if TYPE_CHECKING:
    from chatcli.store.sessions import SessionStore, Stamp

APPENDS_FOLD = 64 * 1024  # bytes of the appends log a listing applies before folding them into the catalog

SessionInfo = session_info()  # one row of a listing (see listing_cache.session_info)


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
        # The rows of the last listing, which a rendering of it is saved with (`save_rendered`),
        # and the appends log's size when they were made.
        self._listed: dict[str, list] | None = None
        self._listed_appends = 0

    @property
    def root(self) -> Path:
        return self.store.root

    def list(self, fresh: bool = False, scanned: listing_cache.Scan | None = None) -> list[SessionInfo]:
        """Every session, newest first, from a catalog keyed by each file's stamp (never by parsing all files).

        Every file is stat'ed, at every listing, and only those whose stamp (mtime, size,
        ctime, inode: listing_cache.stamp) is not the one recorded are opened. The directory's
        mtime would be cheaper (one stat instead of 10,000, which take ~40 ms) but says nothing of
        a file another program rewrote in place (Go ChatCLI, an editor: same name, same inode,
        the directory unchanged), and nothing of a deletion when its mtime was put back. `fresh`
        is kept for callers that asked for this before it was the rule. `scanned` is the
        directory as a caller already stat'ed it (listing_cache.scan), not stat'ed again. The
        catalog lives beside the directory and is a cache: deleting it costs one slower listing.
        """
        return self.infos(self.entries(fresh, scanned=scanned))

    @staticmethod
    def infos(rows: dict[str, list]) -> list[SessionInfo]:
        """The catalog's rows as a listing, newest first."""
        return newest_first(rows)

    def entries(self, fresh: bool = False, record: bool = True, reveal: bool = False,
                scanned: listing_cache.Scan | None = None) -> dict[str, list]:
        """The catalog itself: {name: [mtime_ns, size, messages, title, problem, transcript id,
        ctime_ns, inode]}, in directory order (see `list` for how it is kept true). `record=False`
        leaves the catalog file as it is (a dry run must change nothing on disk). With encryption
        on the catalog knows no contents; `reveal` reads every file for them, in memory only
        (storage needs each session's journal id)."""
        if reveal and self.store.private:
            return self._scan({}, reveal=True, scanned=scanned)[0]
        catalog, seen = self._read_catalog()
        _, end = self._read_appends(seen, catalog)
        self._listed_appends = end
        rows, changed = self._scan(catalog, scanned=scanned)
        writable = record and not self.store.locked_out  # known once the files were looked at
        # Turns appended in place are in the log, which every listing applies: the catalog is
        # written again for them only once the log has grown past APPENDS_FOLD.
        if writable and (changed or end - seen > APPENDS_FOLD):
            self._write_catalog(rows, end)
        if writable and changed:
            self._learn_journals(rows)
        self._listed = rows
        return rows

    def _scan(self, catalog: dict[str, list], reveal: bool = False,
              scanned: listing_cache.Scan | None = None) -> tuple[dict[str, list], bool]:
        """(the rows of the files there are now, whether any differs from `catalog`'s)."""
        read_all = reveal or not self.store.private
        try:
            names, stats = scanned if scanned is not None else self._directory(catalog if read_all else None)
        except FileNotFoundError:
            return {}, bool(catalog)
        except OSError as exc:
            raise SessionError(f"cannot list sessions in {self.root}: {exc.strerror or exc}") from None
        if stats.count(None) > 64:  # that many files to parse: orjson's import (~40 ms) pays for itself
            import orjson  # noqa: F401 - listing_cache.parsed takes it once it is loaded
        now = time.time_ns()
        rows: dict[str, list] = {}
        changed = False
        private = self.store.private and not reveal  # encryption on: names, times and sizes; nothing from inside
        root, read_row, session_text, fullmatch = str(self.root), listing_cache.read_row, home.session_text, \
            NAME_RE.fullmatch
        with gc_paused():  # 10,000 rows and the documents read for them: all alive
            for name, st in zip(names, stats):
                valid = tried = None
                if st is None:  # new to the catalog (_directory): read as it is, stat'ed only if not plain
                    changed = True
                    path = session_text(root, name)
                    valid = tried = fullmatch(name) is not None and ".." not in name
                    if valid and (row := read_row(path, now)) is not None:
                        rows[name] = row
                        continue
                    try:
                        st = os.stat(path)
                    except OSError:
                        continue  # gone, or a link that leads nowhere: not listed
                elif (cached := catalog.get(name)) is not None and cached[0] == st.st_mtime_ns \
                        and cached[1] == st.st_size and cached[7] == st.st_ino:
                    if cached[6] == st.st_ctime_ns:
                        rows[name] = cached
                        continue
                    if cached[6] is None:  # from the appends log, which knows no ctime
                        rows[name] = [*cached[:6], st.st_ctime_ns, st.st_ino]
                        continue
                if valid is None:
                    changed = True
                    path = session_text(root, name)
                    valid = fullmatch(name) is not None and ".." not in name
                if not stat.S_ISREG(st.st_mode):
                    rows[name] = [st.st_mtime_ns, st.st_size, None, "", "not a regular file", "", *stamp(st)[2:]]
                elif not valid:
                    rows[name] = [st.st_mtime_ns, st.st_size, None, "",
                                  "not a valid session name; rename the file to use it", "", *stamp(st)[2:]]
                elif private:
                    rows[name] = [st.st_mtime_ns, st.st_size, None, "", "", "", *stamp(st)[2:]]
                elif (row := self._summarise(name, path, st, now, lean=not tried)) is not None:
                    rows[name] = row
        return rows, changed or any(name not in rows for name in catalog)

    def _directory(self, catalog: dict[str, list] | None) -> listing_cache.Scan:
        """The session files as listing_cache.scan gives them, except that a file with no row in
        `catalog` is not stat'ed (None): it is read as it is, and the stat it was read with is
        its stamp (one system call fewer a file: 10,000 stats are a tenth of a first listing).
        Raises OSError."""
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            filenames = os.listdir(fd)
            names: list[str] = []
            stats: list[os.stat_result | None] = []
            for filename, name in zip(filenames, map(home.session_named, filenames)):
                if name is None:
                    continue
                if catalog is not None and name not in catalog:
                    st = None
                else:
                    try:
                        st = os.stat(filename, dir_fd=fd)
                    except OSError:
                        continue
                names.append(name)
                stats.append(st)
        finally:
            os.close(fd)
        return names, stats

    def _summarise(self, name: str, path: str, st: os.stat_result | None, now_ns: int,
                   lean: bool = False) -> list | None:
        """The row of file `path` read now, stamped with the stat it was read with (None when it
        vanished before it could be stat'ed). `lean`: tried by listing_cache.read_row first."""
        if lean and (row := listing_cache.read_row(path, now_ns)) is not None:
            return row  # the common shape, for the cost of a parse
        try:  # anything else, as the store reads it: its key, its errors, an append cut short mended
            raw, st = read_regular(Path(path))
            data = self.store.decode(name, raw)
            if data.torn and self.store.mend(name):  # an append cut short: whole JSON again for every reader
                raw, st = read_regular(Path(path))
                data = self.store.decode(name, raw)
        except (SessionError, OSError) as exc:
            problem = str(exc) if isinstance(exc, SessionError) else (exc.strerror or str(exc))
            try:
                st = st or os.stat(path)
            except OSError:
                return None
            return [st.st_mtime_ns, st.st_size, None, "", problem, "", kept_ctime(st, now_ns), st.st_ino]
        title = data.title or _make_title(data.history) or ""
        return [st.st_mtime_ns, st.st_size, len(data.history), title, "", data.transcript_id or "",
                kept_ctime(st, now_ns), st.st_ino]

    @property
    def path(self) -> Path:
        # Beside the sessions directory: writing it must not change the directory's mtime.
        return home.catalog_path(self.root)

    def _read_catalog(self) -> tuple[dict[str, list], int]:
        """(its rows, how much of the appends log it holds)."""
        # The standard json module here: importing orjson costs more (~30 ms) than it would
        # save on a catalog, and a listing of unchanged sessions needs nothing else from it.
        try:
            value = json.loads(self.path.read_bytes())
        except (OSError, ValueError, RecursionError):  # a cache: damaged or absurdly nested, made again
            return {}, 0
        if not isinstance(value, dict) or value.get("version") != CATALOG_VERSION \
                or value.get("private", False) != self.store.private:  # made with encryption on (or off): start again
            return {}, 0
        entries = value.get("entries")
        seen = value.get("appends_end", 0)
        if not isinstance(entries, dict) or not all(
                isinstance(row, list) and len(row) == 8 for row in entries.values()):
            return {}, 0
        return entries, seen if isinstance(seen, int) else 0

    def _write_catalog(self, entries: dict[str, list], appends_end: int = 0) -> None:
        document = {"version": CATALOG_VERSION, "entries": entries, "private": self.store.private,
                    "appends_end": appends_end}
        orjson = sys.modules.get("orjson")  # loaded when files were read: ten times json's speed
        try:  # a cache: failing to write it only costs the next listing some work
            data = orjson.dumps(document) if orjson is not None else \
                json.dumps(document, separators=(",", ":")).encode("utf-8")
            atomic_write(self.path, data, durable=False)
        except (OSError, TypeError):
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
                # The inode is the one appended to; the ctime the scan takes from the file.
                catalog[name] = [mtime_ns, size_now, None if private else messages, row[3], "", row[5], None, row[7]]
                if not row[3] and not private:  # created empty: its first appended turn names it
                    path = self.store.path(name)
                    row = self._summarise(name, str(path), None, time.time_ns(), lean=True)
                    catalog[name] = row or catalog[name]
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

    # -- a rendered listing, valid while every file keeps its stamp -----------------------------
    @property
    def rendered_path(self) -> Path:
        return home.rendered_path(self.root)

    def save_rendered(self, key: str, text: str) -> None:
        """Keep `text`, a formatted listing of this catalog's last `list()`, for as long as every
        session file keeps the stamp it had then."""
        rows = self._listed
        if rows is not None and not self.store.locked_out and os.path.isdir(self.root):
            stamps = listing_cache.stamps_text(listing_cache.row_numbers(rows))
            listing_cache.save_rendered(str(self.root), key, text, list(rows), stamps, self._listed_appends)


__all__ = ["APPENDS_FOLD", "Catalog", "SessionInfo"]
