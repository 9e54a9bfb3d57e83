"""Where everything lives under CHATCLI_HOME, and the key it is sealed with: the one module that
knows the storage layout.

  sessions/<name>.json     a session (store.sessions); `.<name>.lock` beside it is its lock
  sessions.catalog.json    the listing's caches (store.catalog, store.listing_cache): beside the
  sessions.catalog.log     directory, not in it, so that writing them never changes the
  sessions.latest.json     directory's mtime (the catalog's test of freshness)
  sessions.listing.txt
  sessions.journals.json   the journal chatcli last named in each session's file (store.catalog)
  transcripts/<id>.jsonl   a conversation's journal (store.journal)
  ccr/<key>.json           a recall entry (store.recall)
  ccr/<key>.ccr            a recall entry Go ChatCLI wrote: its raw text (read, never written or pruned)
  memory/<id>.json         a note of the global memory (store.memory)
  contexts/<name>.json     a context snapshot, its files cut into chunks (store.contexts)
  costs/<ref>.jsonl        a cost snapshot: one line per request of a session's lineage (store.costs)
  schedule.json            the /schedule jobs (store.schedule); `.schedule.lock` is taken to run one
  index/search.sqlite      the search index (store.search); `sealed.sqlite` with a key
  logs/<name>.log          a server's log (gateway, mcp-server, acp; engine.upkeep), 0600: past
                           CHATCLI_LOG_MAX_SIZE it becomes <name>.log.1, the older copies shift
                           up to .log.3 (LOG_BACKUPS) and the oldest goes
  key-check                a sealed known text, to tell a wrong key at start-up (store.seal)
  hub.db                   the chat gateway's principals, bindings, threads, delivery state (store.hub;
                           on the server with a server store: store.pg_hub)
  spool/<channel>/*.json   a chat channel's messages received and not yet answered, and answers
                           not yet sent (store.spool; WhatsApp's), sealed with a key; `.lock`
                           in it is held by the one gateway serving it
  gateway.toml             the gateway's settings and tokens: read by config.gateway, never written
  .import.lock             held by the one `chatcli import` running (engine/importing.py)

Everything else asks here. The engine opens its stores through a `Home` made from the
settings, so the encryption key is handed to the stores in this one place. The functions on
strings import nothing but `os`: `chatcli session list`'s fast path (cli/quick_list.py,
store/listing_cache.py) calls them before anything heavier is loaded, which is also why the
stores are imported only where a `Home` opens one.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from chatcli.config.settings import Settings
    from chatcli.store.contexts import ContextStore
    from chatcli.store.costs import CostStore
    from chatcli.store.hub import Hub
    from chatcli.store.pg_hub import PgHub
    from chatcli.store.schedule import ScheduleStore
    from chatcli.store.journal import Journal
    from chatcli.store.memory import MemoryStore
    from chatcli.store.recall import RecallStore
    from chatcli.store.search import SearchIndex
    from chatcli.store.spool import Spool
    from chatcli.store.sessions import SessionStore

_SESSIONS = "sessions"
_TRANSCRIPTS = "transcripts"
_RECALL = "ccr"
_MEMORY = "memory"
_CONTEXTS = "contexts"
_COSTS = "costs"
_SCHEDULE = "schedule.json"
_SCHEDULE_LOCK = ".schedule.lock"
_INDEX = "index"
_LOGS = "logs"
_KEY_CHECK = "key-check"
_HUB = "hub.db"
_SCHEDULE_KIND = "schedule"  # the schedule's kind of file on a server store
_SPOOL = "spool"
_SPOOL_LOCK = ".lock"
_IMPORT_LOCK = ".import.lock"
_PLAIN_INDEX, _SEALED_INDEX = "search.sqlite", "sealed.sqlite"
# A log is rotated into this many older copies (<name>.log.1 the newest): with the size cap
# (CHATCLI_LOG_MAX_SIZE) this bounds what each log may take.
LOG_BACKUPS = 3

_SESSION = ".json"
_LOCK = ".lock"
_JOURNAL = ".jsonl"
_ENTRY = ".json"  # a recall entry
_GO_ENTRY = ".ccr"  # a recall entry Go ChatCLI wrote
_LOG = ".log"
# Beside the sessions directory, named after it.
_CATALOG = ".catalog.json"
_APPENDS = ".catalog.log"
_LATEST = ".latest.json"
_RENDERED = ".listing.txt"
_JOURNALS = ".journals.json"


# -- as strings, for the fast path -------------------------------------------------------------
def sessions_dir_text(home: str) -> str:
    return os.path.join(home, _SESSIONS)


def key_check_text(home: str) -> str:
    return os.path.join(home, _KEY_CHECK)


def session_text(sessions: str, name: str) -> str:
    return f"{sessions}/{name}{_SESSION}"


def lock_text(sessions: str, name: str) -> str:
    return f"{sessions}/.{name}{_LOCK}"


def appends_text(sessions: str) -> str:
    return sessions + _APPENDS


def rendered_text(sessions: str) -> str:
    return sessions + _RENDERED


def index_text(home: str) -> str:
    """The plaintext search index (a store without a key)."""
    return os.path.join(home, _INDEX, _PLAIN_INDEX)


def journal_text(home: str, transcript_id: str) -> str:
    return os.path.join(home, _TRANSCRIPTS, transcript_id + _JOURNAL)


# -- what a file in a store's directory is -------------------------------------------------------
def session_named(filename: str) -> str | None:
    """The session a file of the sessions directory holds ("notes.json" → "notes"); None for
    anything else (a hidden file, a lock, a temporary file)."""
    if filename.endswith(_SESSION) and not filename.startswith("."):
        return filename[: -len(_SESSION)]
    return None


def locked_session(filename: str) -> str | None:
    """The session whose lock file this is (".notes.lock" → "notes"), or None."""
    if filename.startswith(".") and filename.endswith(_LOCK):
        return filename[1: -len(_LOCK)]
    return None


def journal_named(filename: str) -> str | None:
    """The transcript id of a journal file ("<id>.jsonl" → "<id>"), or None."""
    return filename[: -len(_JOURNAL)] if filename.endswith(_JOURNAL) else None


def entry_named(filename: str) -> str | None:
    """The key of a recall entry's file ("<key>.json" → "<key>"), or None."""
    return filename[: -len(_ENTRY)] if filename.endswith(_ENTRY) else None


def go_entry_named(filename: str) -> str | None:
    """The key of a recall entry Go ChatCLI wrote ("<key>.ccr" → "<key>"), or None."""
    return filename[: -len(_GO_ENTRY)] if filename.endswith(_GO_ENTRY) else None


def log_named(filename: str) -> str | None:
    """The log a file of the logs directory belongs to: "gateway.log" and its rotated copies
    "gateway.log.1", "gateway.log.2"… → "gateway.log"; None for anything else."""
    if filename.startswith("."):
        return None
    base, dot, number = filename.rpartition(".")
    if dot and number.isdigit() and number.isascii():
        filename = base
    return filename if filename.endswith(_LOG) and len(filename) > len(_LOG) else None


# -- as paths, within a store's directory (a store may live anywhere: the tests put them in tmp) --
def sessions_dir_of(root: Path) -> Path:
    """The sessions directory of a home at `root` (another ChatCLI's, read by `chatcli import`)."""
    return root / _SESSIONS


def recall_dir_of(root: Path) -> Path:
    """The recall entries' directory of a home at `root`."""
    return root / _RECALL


def session_path(sessions: Path, name: str) -> Path:
    return sessions / (name + _SESSION)


def lock_path(sessions: Path, name: str) -> Path:
    return sessions / f".{name}{_LOCK}"


def catalog_path(sessions: Path) -> Path:
    return sessions.with_name(sessions.name + _CATALOG)


def appends_path(sessions: Path) -> Path:
    return sessions.with_name(sessions.name + _APPENDS)


def latest_path(sessions: Path) -> Path:
    return sessions.with_name(sessions.name + _LATEST)


def rendered_path(sessions: Path) -> Path:
    return sessions.with_name(sessions.name + _RENDERED)


def journals_path(sessions: Path) -> Path:
    return sessions.with_name(sessions.name + _JOURNALS)


def journal_path(transcripts: Path, transcript_id: str) -> Path:
    return transcripts / (transcript_id + _JOURNAL)


def entry_path(recall: Path, key: str) -> Path:
    return recall / (key + _ENTRY)


def go_entry_path(recall: Path, key: str) -> Path:
    return recall / (key + _GO_ENTRY)


def entry_file(key: str) -> str:
    """A recall entry's file name (in its directory, or on the server)."""
    return key + _ENTRY


def go_entry_file(key: str) -> str:
    return key + _GO_ENTRY


def cost_file(ref: str) -> str:
    return ref + _JOURNAL


def cost_path(costs: Path, ref: str) -> Path:
    """A cost snapshot: lines, as a journal's."""
    return costs / (ref + _JOURNAL)


def cost_named(filename: str) -> str | None:
    return journal_named(filename)


class Home:
    """CHATCLI_HOME (`root`) and its master key (`key`, None without encryption): the places in
    it, and its stores opened with the key. Two attributes, so made wherever needed."""

    __slots__ = ("key", "root", "store")

    def __init__(self, root: Path, key: bytes | None = None, store: str | None = None) -> None:
        self.root = root
        self.key = key
        self.store = store  # CHATCLI_STORE's PostgreSQL address; None: sessions are files under root

    @classmethod
    def of(cls, settings: Settings) -> Home:
        return cls(settings.home, settings.encryption_key, settings.store)

    # -- places ------------------------------------------------------------------------------
    @property
    def sessions_dir(self) -> Path:
        return self.root / _SESSIONS

    @property
    def transcripts_dir(self) -> Path:
        return self.root / _TRANSCRIPTS

    @property
    def recall_dir(self) -> Path:
        return self.root / _RECALL

    @property
    def memory_dir(self) -> Path:
        return self.root / _MEMORY

    @property
    def contexts_dir(self) -> Path:
        return self.root / _CONTEXTS

    @property
    def costs_dir(self) -> Path:
        return self.root / _COSTS

    @property
    def schedule_path(self) -> Path:
        return self.root / _SCHEDULE

    def schedule(self) -> ScheduleStore:
        from chatcli.store.schedule import ScheduleStore

        return ScheduleStore(self._place(self.root, _SCHEDULE_KIND), _SCHEDULE, _SCHEDULE_LOCK)

    def _place(self, directory: Path, kind: str):
        """Where a small store keeps its files (store.places): `directory`, or rows of `kind` on
        the sessions' server."""
        if self.store is None:
            from chatcli.store.places import Files

            return Files(directory)
        from chatcli.store.pg_places import ServerFiles

        return ServerFiles(self.store, kind)

    @property
    def index_dir(self) -> Path:
        return self.root / _INDEX

    @property
    def index_paths(self) -> tuple[Path, Path]:
        """(the plaintext search index, the sealed one): a store has at most one in use, and
        may hold the other from before the key was set or removed."""
        return self.index_dir / _PLAIN_INDEX, self.index_dir / _SEALED_INDEX

    @property
    def logs_dir(self) -> Path:
        return self.root / _LOGS

    @property
    def key_check_path(self) -> Path:
        return self.root / _KEY_CHECK

    @property
    def hub_path(self) -> Path:
        return self.root / _HUB

    def hub(self, readonly: bool = False) -> Hub | PgHub:
        """The gateway's hub: hub.db here, or on the sessions' server, where every gateway replica
        shares it (store.pg_hub). `readonly`: for looking only (/storage); a hub.db that is not
        there is a HubError, nothing is made."""
        if self.store is not None:
            from chatcli.store.pg_hub import PgHub

            return PgHub(self.store, readonly=readonly)
        from chatcli.store.hub import Hub

        return Hub(self.hub_path, readonly=readonly)

    def spool(self, channel: str) -> Spool:
        from chatcli.store.spool import Spool

        root = self.root / _SPOOL / channel
        return Spool(root, self.key, root / _SPOOL_LOCK)

    def import_lock(self):
        """Held while an import runs (store.held): two at once would each make the same
        conversation a new session. None when another import holds it."""
        from chatcli.store.held import hold

        return hold(self.root / _IMPORT_LOCK)

    def journal_path(self, transcript_id: str) -> Path:
        return journal_path(self.transcripts_dir, transcript_id)

    # -- stores, opened with the key ---------------------------------------------------------
    def sessions(self) -> SessionStore:
        if self.store is not None:
            from chatcli.store.pg_sessions import PgSessionStore

            return PgSessionStore(self.store, self.key)
        from chatcli.store.sessions import SessionStore

        return SessionStore(self.sessions_dir, self.key)

    def journal_ids(self) -> list[str]:
        """The ids of every transcript journal of this store (on the server, or files here)."""
        if self.store is not None:
            from chatcli.store.pg_journal import journal_names

            return journal_names(self.store)
        from chatcli.store.journal import ID_RE

        try:
            names = [journal_named(entry.name) for entry in os.scandir(self.transcripts_dir)]
        except FileNotFoundError:
            return []
        return sorted(name for name in names if name is not None and ID_RE.fullmatch(name))

    def journal(self, transcript_id: str) -> Journal:
        if self.store is not None:  # beside the sessions on the server
            from chatcli.store.pg_journal import PgJournal

            return PgJournal(self.store, transcript_id, self.key)
        from chatcli.store.journal import Journal

        return Journal(self.transcripts_dir, transcript_id, self.key)

    # The small stores are files here, or rows on the sessions' server, shared as the sessions are.
    def recall(self) -> RecallStore:
        from chatcli.store.recall import RecallStore

        return RecallStore(self._place(self.recall_dir, "recall"), self.key)

    def memory(self) -> MemoryStore:
        from chatcli.store.memory import MemoryStore

        return MemoryStore(self._place(self.memory_dir, "memory"), self.key)

    def contexts(self) -> ContextStore:
        from chatcli.store.contexts import ContextStore

        return ContextStore(self._place(self.contexts_dir, "contexts"), self.key)

    def costs(self) -> CostStore:
        from chatcli.store.costs import CostStore

        return CostStore(self._place(self.costs_dir, "costs"))

    def search_index(self, wait: float = 30) -> SearchIndex:
        """The search index: with a key, the sealed one (keyed hashes of words, the text sealed:
        store.search.Terms), and a plaintext one left from before the key is removed. `wait`:
        how long to wait for another process writing it."""
        from chatcli.store.search import SearchIndex, discard_index

        if self.store is not None:  # on the sessions' server, shared by every machine (store.pg_search)
            from chatcli.store.pg_search import PgSearchIndex

            return PgSearchIndex(self.store, self._terms(), wait)
        plain, sealed = self.index_paths
        if self.key:
            discard_index(plain)
            return SearchIndex(sealed, self._terms(), wait)
        return SearchIndex(plain, wait=wait)

    def _terms(self):
        """The sealed index's words and seals (store.search.Terms), or None without a key."""
        if not self.key:
            return None
        from chatcli.store.search import Terms
        from chatcli.store.seal import sealer_for

        return Terms(*sealer_for(self.key).index_keys())

    def forget_journals(self, transcript_ids: list[str]) -> None:
        """Drop removed journals' text from both search indexes (and the server's, with a server
        store): nothing of them stays behind."""
        from chatcli.store.search import discard_index, forget_journal_text

        if self.store is not None and transcript_ids:
            from chatcli.core.errors import ChatcliError
            from chatcli.store.pg_search import PgSearchIndex

            try:
                PgSearchIndex(self.store, self._terms()).forget_journals(transcript_ids)
            except ChatcliError:
                pass  # the server is not there: its journals were not removed either
        plain, sealed = self.index_paths
        forget_journal_text(plain, transcript_ids)
        if not self.key:
            if transcript_ids:  # its rows are removed only with its key (store.search): rebuilt with it
                try:
                    discard_index(sealed)
                except OSError:
                    pass  # what it keeps of them is sealed: keyed hashes and text only the key opens
            return
        forget_journal_text(sealed, transcript_ids, self._terms())

    def check_key(self) -> None:
        """Refuse a key the store was not sealed with, and no key for a store that is sealed,
        before anything is read or written (store.seal.check_store_key). Raises SealError."""
        from chatcli.store.seal import check_store_key

        if self.store is not None:  # the sessions' server first: it is what several machines share
            from chatcli.store.pg import Database
            from chatcli.store.pg_sessions import check_server_key
            from chatcli.store.session_file import StoreUnavailable

            key, store = self.key, self.store
            try:
                check_server_key(store, key)
            except StoreUnavailable:  # not there now: checked before anything is read or written there
                Database.of(store).check_first(lambda: check_server_key(store, key))
        check_store_key(self.key_check_path, self.key, self.newest_files)

    def newest_files(self) -> Iterator[tuple[str, str, Path]]:
        """The newest few files of each store whose files are sealed, as (the kind they are sealed
        as, the name bound into them, path): sessions first, then journals, recall entries, memory
        notes, contexts. Lazy, a directory at a time: what tells a key without its key check needs
        only the first sealed one, and a start must not read the whole store."""
        for kind, root, named in (("session", self.sessions_dir, session_named),
                                  ("journal", self.transcripts_dir, journal_named),
                                  ("recall", self.recall_dir, entry_named),
                                  ("memory", self.memory_dir, entry_named),
                                  ("context", self.contexts_dir, entry_named)):
            for name, path in _newest(root, named):
                yield kind, name, path


_NEWEST = 4  # files of a directory looked at for a sealed one


def _newest(root: Path, named: Callable[[str], str | None]) -> list[tuple[str, Path]]:
    """(name, path) of the newest few files of a store's directory, newest first: files sealed
    under the key in use are among them, plaintext ones from before any key seldom are."""
    import heapq

    found = []
    try:
        with os.scandir(root) as entries:
            for entry in entries:
                name = named(entry.name)
                if name is None or entry.name.startswith("."):
                    continue
                try:
                    if entry.is_file(follow_symlinks=False):
                        found.append((entry.stat(follow_symlinks=False).st_mtime_ns, entry.name, name))
                except OSError:  # removed meanwhile
                    continue
    except OSError:  # none yet, or not ours to read
        return []
    return [(name, root / filename) for _, filename, name in heapq.nlargest(_NEWEST, found)]


__all__ = ["LOG_BACKUPS", "Home", "appends_path", "appends_text", "catalog_path", "entry_named", "entry_path",
           "go_entry_named", "go_entry_path", "index_text", "journal_named", "journal_path", "journal_text",
           "journals_path", "key_check_text",
           "latest_path", "lock_path", "lock_text", "locked_session", "log_named", "rendered_path", "rendered_text",
           "session_named", "session_path", "session_text", "sessions_dir_text"]
