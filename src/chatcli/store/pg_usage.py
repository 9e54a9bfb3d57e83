"""What a store on a PostgreSQL server holds, per store as /storage lists them: how many of each
(a session, a journal, a note, a recall entry: each what would be one file) and their bytes (the
documents' and files' own sizes; the hub's and the search index's, the tables' on the server's
disk). One transaction, a handful of aggregate queries: nothing is read whole."""

from __future__ import annotations

from chatcli.store.pg import Database

_KINDS = {"recall": "recall", "memory": "memory", "contexts": "contexts", "costs": "costs", "schedule": "schedule"}


def server_usage(dsn: str) -> tuple[str, dict[str, tuple[int, int]]]:
    """(where the server is, as shown; {store: (count, bytes)})."""
    database = Database.of(dsn)
    found: dict[str, tuple[int, int]] = {}
    with database.connection() as conn, conn.transaction():
        found["sessions"] = tuple(conn.execute("SELECT count(*), coalesce(sum(size), 0) FROM chatcli_sessions").fetchone())
        found["transcripts"] = tuple(conn.execute(
            "SELECT (SELECT count(*) FROM chatcli_journals),"
            " (SELECT coalesce(sum(length(part)), 0) FROM chatcli_journal_parts)").fetchone())
        for kind, count, size in conn.execute("SELECT kind, count(*), coalesce(sum(length(body)), 0)"
                                              " FROM chatcli_files GROUP BY kind"):
            if kind in _KINDS:
                found[_KINDS[kind]] = (count, size)
        found["hub"] = tuple(conn.execute(
            "SELECT (SELECT count(*) FROM chatcli_hub_principals), pg_total_relation_size('chatcli_hub_principals')"
            " + pg_total_relation_size('chatcli_hub_delivered')").fetchone())
        found["index"] = tuple(conn.execute(
            "SELECT (SELECT count(*) FROM chatcli_search_sources), pg_total_relation_size('chatcli_search_sources')"
            " + pg_total_relation_size('chatcli_search_session_entries')"
            " + pg_total_relation_size('chatcli_search_journal_entries')").fetchone())
    return database.where, {store: (int(count), int(size)) for store, (count, size) in found.items()}


__all__ = ["server_usage"]
