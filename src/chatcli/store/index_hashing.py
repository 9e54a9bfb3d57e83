"""A sealed search index's text hashed and sealed by a helper process while SQLite indexes it.

Building a sealed index costs what building the plaintext one costs (SQLite's) plus hashing
every word and sealing the text in Python (store.search.Terms): about half as much again, in
the same thread, since SQLite needs the interpreter's lock back after every row it indexes (a
thread of ours hashing meanwhile makes each row wait; measured: no gain). A helper process,
`python -m chatcli.store.index_hashing`, does that part on another core: the search process
sends it each chunk of messages as it reads them and indexes what comes back (`hashed_chunk`,
the one implementation both sides run), a chunk or two behind.

The helper gets the index's two derived keys through its standard input, a pipe only the two
processes hold, and nothing of them is written anywhere; for a first index of many sessions it
also reads the sessions itself (SessionStore.index_rows), and then gets the store's key the same
way: the search process then only indexes what comes back. Frames on both pipes
are an 8-byte length and a pickle; the helper trusts its parent and the parent its own child.
Anything going wrong with the helper (it cannot start, dies, answers nonsense) costs only speed:
the parent hashes what is left itself (store.search._Hashing).
"""

from __future__ import annotations

import os
import pickle
import struct
import sys

_LENGTH = struct.Struct("<Q")
READY = b"ready"
FRAME_MAX = 1 << 30  # a chunk of 1,000 messages hashed is far below this


class HelperError(Exception):
    pass


def frame(value: object) -> bytes:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(data)) + data


def write_bytes(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def write_frame(fd: int, value: object) -> None:
    write_bytes(fd, frame(value))


def read_frame(fd: int) -> object:
    """The next frame's value; EOFError at a clean end, HelperError for a frame cut short."""
    head = _read_exactly(fd, _LENGTH.size, at_start=True)
    size = _LENGTH.unpack(head)[0]
    if size > FRAME_MAX:  # not a frame of ours (something else printed on the pipe): never waited for
        raise HelperError("the index helper's answer is not one")
    return pickle.loads(_read_exactly(fd, size))


def _read_exactly(fd: int, size: int, at_start: bool = False) -> bytes:
    parts, left = [], size
    while left:
        part = os.read(fd, min(left, 1 << 20))
        if not part:
            if at_start and left == size:
                raise EOFError
            raise HelperError("the index helper's answer was cut short")
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def main() -> int:
    """The helper: its keys first, then requests, each answered in order: ("chunk", source,
    number, rows) → (rows, seals); ("session", name, number) → ("session", (inode, size,
    count) or None when it cannot be read, how many chunks follow), then each chunk's (rows,
    seals): the session read whole from the sessions directory it was given, with its key."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    from chatcli.store.search import INSERT_CHUNK, Terms, hashed_chunk

    stdin, stdout = sys.stdin.fileno(), sys.stdout.fileno()
    try:
        hash_key, text_key, whole_from = read_frame(stdin)
        terms = Terms(hash_key, AESGCM(text_key), text_key)
        store = None
        if whole_from is not None:
            from pathlib import Path

            from chatcli.store.sessions import SessionStore

            store = SessionStore(Path(whole_from[0]), whole_from[1])
        write_frame(stdout, READY)
        while True:
            request = read_frame(stdin)
            if request[0] == "chunk":
                _, source, number, chunk = request
                write_frame(stdout, hashed_chunk(terms, source, number, chunk))
                continue
            _, name, number = request
            got = store.index_rows(name) if store is not None else None
            if got is None:
                write_frame(stdout, ("session", None, 0))
                continue
            rows, inode, size, count, _journal = got
            chunks = [rows[at:at + INSERT_CHUNK] for at in range(0, len(rows), INSERT_CHUNK)]
            # The answer begins once its first chunk is made: the search process, seeing it
            # begin, takes it whole without waiting for the hashing.
            header = frame(("session", (inode, size, count), len(chunks)))
            write_bytes(stdout, header + (frame(hashed_chunk(terms, name, number, chunks[0])) if chunks else b""))
            for chunk in chunks[1:]:
                write_frame(stdout, hashed_chunk(terms, name, number, chunk))
    except (EOFError, BrokenPipeError, KeyboardInterrupt):
        return 0


if __name__ == "__main__":
    # Ended without freeing what it built (every word's hash, the sessions it read): the search
    # process waits for this end, and it has nothing to flush (its answers are written raw).
    os._exit(main())
