"""store.places.Files on the sessions' PostgreSQL server: a place's files are rows of
`chatcli_files` (its kind — recall, memory, contexts, costs, schedule — and the file's name),
shared by every machine on the store. Each operation is one statement, so one transaction: a
write replaces a file whole, an append adds its line to the end, and nothing is half-done. A
sealed store's files arrive sealed, as they would be written to disk (the server sees no text).

Times are the server's (every machine's files compare alike, whatever their clocks say).
`locked` is an advisory lock held in a transaction on this thread's connection, and what the
store reads and writes meanwhile runs in that transaction: it commits together, or not at all.
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator

from chatcli.store.pg import NOW, PLACE_LOCKS, Database


class ServerFiles:
    def __init__(self, dsn: str, kind: str) -> None:
        self.database = Database.of(dsn)
        self.kind = kind

    def where(self, filename: str) -> str:
        return f"{self.kind}/{filename} on {self.database.where}"

    def _missing(self, filename: str) -> FileNotFoundError:
        return FileNotFoundError(errno.ENOENT, "not on the server", self.where(filename))

    def read(self, filename: str, regular: bool = False) -> bytes:  # noqa: ARG002 - rows are never links
        with self.database.connection() as conn:
            row = conn.execute("SELECT body FROM chatcli_files WHERE kind = %s AND name = %s",
                               (self.kind, filename)).fetchone()
        if row is None:
            raise self._missing(filename)
        return bytes(row[0])

    def write(self, filename: str, payload: bytes) -> None:
        self._put(filename, payload, "EXCLUDED.body", "EXCLUDED.generation")  # a new file: a new generation

    def append(self, filename: str, line: bytes) -> None:
        self._put(filename, line, "chatcli_files.body || EXCLUDED.body", "chatcli_files.generation")

    def _put(self, filename: str, body: bytes, kept: str, generation: str) -> None:
        """`body` as the file (made when there is none), or what `kept` and `generation` make of
        the file there and it: one statement."""
        with self.database.connection() as conn:
            conn.execute("INSERT INTO chatcli_files (kind, name, body, changed_ns, generation)"
                         f" VALUES (%s, %s, %s, {NOW}, nextval('chatcli_generations')) ON CONFLICT (kind, name) DO UPDATE"
                         f" SET body = {kept}, changed_ns = EXCLUDED.changed_ns, generation = {generation}",
                         (self.kind, filename, body))

    def exists(self, filename: str) -> bool:
        with self.database.connection() as conn:
            return conn.execute("SELECT 1 FROM chatcli_files WHERE kind = %s AND name = %s",
                                (self.kind, filename)).fetchone() is not None

    def touch(self, filename: str) -> None:
        with self.database.connection() as conn:
            if conn.execute(f"UPDATE chatcli_files SET changed_ns = {NOW} WHERE kind = %s AND name = %s",
                            (self.kind, filename)).rowcount == 0:
                raise self._missing(filename)

    def remove(self, filename: str) -> bool:
        with self.database.connection() as conn:
            return conn.execute("DELETE FROM chatcli_files WHERE kind = %s AND name = %s",
                                (self.kind, filename)).rowcount > 0

    def filenames(self) -> list[str]:
        with self.database.connection() as conn:
            return [row[0] for row in conn.execute("SELECT name FROM chatcli_files WHERE kind = %s", (self.kind,))]

    def stamp(self, filename: str | None = None) -> tuple | None:
        with self.database.connection() as conn:
            if filename is None:  # a save adds a generation, a removal takes one away
                row = conn.execute("SELECT count(*), coalesce(sum(generation), 0) FROM chatcli_files WHERE kind = %s",
                                   (self.kind,)).fetchone()
                return None if row[0] == 0 else (int(row[0]), int(row[1]))
            row = conn.execute("SELECT changed_ns, length(body), generation FROM chatcli_files"
                               " WHERE kind = %s AND name = %s", (self.kind, filename)).fetchone()
        return None if row is None else tuple(row)

    def sizes(self) -> list[tuple[str, int, int, int]]:
        """(name, when it last changed in ns, its size, its generation) of every file: what
        retention plans with."""
        with self.database.connection() as conn:
            return [tuple(row) for row in conn.execute(
                "SELECT name, changed_ns, length(body), generation FROM chatcli_files WHERE kind = %s", (self.kind,))]

    def remove_if_unchanged(self, filename: str, changed_ns: int, generation: int) -> bool:
        """Removed only while it is as a plan saw it (not written nor touched since)."""
        with self.database.connection() as conn:
            return conn.execute("DELETE FROM chatcli_files WHERE kind = %s AND name = %s AND changed_ns = %s"
                                " AND generation = %s", (self.kind, filename, changed_ns, generation)).rowcount > 0

    @contextlib.contextmanager
    def locked(self, lock_name: str) -> Iterator[None]:
        with self.database.held() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(current_schema() || '/' || %s || '/' || %s))",
                         (PLACE_LOCKS, self.kind, lock_name))
            yield


__all__ = ["ServerFiles"]
