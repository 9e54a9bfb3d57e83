"""`chatcli session search WORDS` without encryption, importing no more than it needs: the
search index's hits when the index is up to date with every session file (store.search.
search_current), grouped and shown by the one formatter (core.search_hits), each hit numbered by
its file's position when the index recorded that this is its journal's numbering too and the
journal has not changed since. Anything else (a key, a session changed since it was indexed, a
journal to read, a setting to take into account) returns None, and the whole search
(engine.records, through cli/session_cli.py) runs: it brings the index up to date and records
what this path needs."""

from __future__ import annotations

import os
import sys

from chatcli.config.paths import chatcli_home_text
from chatcli.core.search_hits import format_session_hits, grouped
from chatcli.store.home import index_text, journal_text, key_check_text, sessions_dir_text
from chatcli.store.listing_cache import scan
from chatcli.store.search import search_current, session_stamp

SESSIONS, PER_SESSION = 10, 3  # what `chatcli session search` shows (records.search_sessions' defaults)


def run(words: list[str]) -> int | None:
    env = os.environ
    if env.get("CHATCLI_ENCRYPTION_KEY") is not None or env.get("CHATCLI_SESSION_TRANSCRIPT") is not None \
            or env.get("CHATCLI_STORE"):
        return None  # a key to check, journals off, or sessions on a server: the whole search
    home = chatcli_home_text(env)
    if os.path.exists(key_check_text(home)):
        return None  # a sealed store without a key: the whole search says so
    if not any(char.isalnum() or char == "_" for word in words for char in word):
        return None  # nothing to search for: the whole search says so
    try:
        names, stats = scan(sessions_dir_text(home))
    except OSError:
        return None
    found = search_current(index_text(home), " ".join(words), SESSIONS, PER_SESSION)
    if found is None:
        return None
    hits, numbered, stamps = found
    if stamps != {name: session_stamp(st.st_mtime_ns, st.st_size) for name, st in zip(names, stats)}:
        return None  # a session changed since it was indexed
    mtimes = {name: st.st_mtime_ns / 1e9 for name, st in zip(names, stats)}
    groups = grouped(hits, mtimes, SESSIONS, PER_SESSION)
    if not all(_numbered_by_file(home, numbered.get(group.name)) for group in groups):
        return None
    sys.stdout.write(format_session_hits(groups) + "\n")
    return 0


def _numbered_by_file(home: str, numbered: str | None) -> bool:
    """Whether a session's hits are numbered by their positions in its file, as the index
    recorded (store.search.search_current): with no journal, or one with the stamp it had then."""
    if numbered == "-":
        return True
    parts = (numbered or "").split(" ")
    if len(parts) != 4:
        return False
    try:
        st = os.stat(journal_text(home, parts[0]))
    except OSError:
        return False
    return [str(st.st_mtime_ns), str(st.st_size), str(st.st_ino)] == parts[1:]
