"""Encryption at rest (SPEC §9): sealing session files, journal lines and recall entries.

With CHATCLI_ENCRYPTION_KEY set (base64 of 32 bytes), every file chatcli writes with
conversation text in it is sealed with AES-256-GCM. The envelope is self-describing:

  file   MAGIC, version (1 byte), salt (16), nonce (12), ciphertext with its 16-byte tag
  line   "chatcli-sealed:" + base64 of: version, salt, nonce, ciphertext with tag

The key of each file comes from the master key by HKDF-SHA256 with the file's own random salt
(a journal: one salt per writing process, kept in every line it writes), so a derived key
opens one file and nothing else. The additional authenticated data binds each blob to what it
is: the kind of file and its name (a session's name, a journal's transcript id, a recall key),
and for a journal line its byte offset, so a file copied over another, a line moved within a
journal or spliced from another, and a flipped byte all fail to open, with an error that says
so. Plaintext files and lines still read (migration: they are sealed on the next write).

`cryptography` is imported only when a key is set.
"""

from __future__ import annotations

import base64
import binascii
import os

from chatcli.core.errors import ChatcliError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from pathlib import Path

MAGIC = b"chatcli-sealed\n"
LINE_PREFIX = b"chatcli-sealed:"
VERSION = 1
APPENDABLE = 2  # a sealed session file to which turns are appended (Sealer.open_session)
SALT = 16
NONCE = 12
TAG = 16
KEY_BYTES = 32  # the master key's length (config.paths.encryption_key checks it)
SESSION_HEADER = len(MAGIC) + 1 + SALT + 8 + NONCE


class SealError(ChatcliError):
    """A sealed file or line that cannot be opened: no key, a wrong key, or altered bytes."""


def is_sealed(data: bytes) -> bool:
    return data.startswith(MAGIC)


def dump_json(document: object, key: bytes | None, kind: str, name: str) -> bytes:
    """A JSON document as its file holds it: sealed with the master key when there is one."""
    import json

    payload = json.dumps(document, ensure_ascii=False).encode("utf-8")
    return payload if key is None else sealer_for(key).seal(payload, kind, name)


def load_json(raw: bytes, key: bytes | None, kind: str, name: str, what: str) -> object:
    """The document a file holds, sealed or not. SealError when it is sealed and there is no
    key (or another one); ValueError when it is not JSON."""
    import json

    if is_sealed(raw):
        if key is None:
            raise SealError(f"{what} is encrypted: set CHATCLI_ENCRYPTION_KEY to read it")
        raw = sealer_for(key).open(raw, kind, name, what)
    return json.loads(raw)


class Sealer:
    """Seals and opens with one master key. Derived keys are cached by salt and kind."""

    def __init__(self, master: bytes) -> None:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        from cryptography.hazmat.primitives.kdf.hkdf import HKDF

        self._master = master
        self._hkdf, self._sha256, self._aesgcm = HKDF, hashes.SHA256, AESGCM
        self._keys: dict[tuple[bytes, bytes], object] = {}
        self._line_salt: dict[str, bytes] = {}  # the salt this process seals each journal's lines with

    def _cipher(self, salt: bytes, kind: bytes):
        """The AES-GCM cipher of a salt. Cached for journals only (one salt per writing process,
        met on every line); a whole file has its own salt, met once."""
        cipher = self._keys.get((salt, kind))
        if cipher is None:
            key = self._hkdf(algorithm=self._sha256(), length=KEY_BYTES, salt=salt,
                             info=b"chatcli/" + kind).derive(self._master)
            cipher = self._aesgcm(key)
            if kind in (b"journal", b"session"):  # a session's salt is met at every appended turn
                if len(self._keys) >= 4096:
                    self._keys.clear()
                self._keys[(salt, kind)] = cipher
        return cipher

    def index_keys(self) -> tuple[bytes, object, bytes]:
        """The search index's keys (store.search.Terms): one for the keyed hashes of words, an
        AES-GCM cipher for the messages' text, and that cipher's key (for the helper process
        that hashes and seals a big index's text: store.index_hashing). Derived, so the master
        key opens the index and nothing else does; fixed for a master key, so the index outlives
        the process."""
        derive = lambda info: self._hkdf(algorithm=self._sha256(), length=KEY_BYTES, salt=b"chatcli/index",  # noqa: E731
                                         info=info).derive(self._master)
        text_key = derive(b"chatcli/index/text")
        return derive(b"chatcli/index/terms"), self._aesgcm(text_key), text_key

    # -- whole files (sessions, recall entries) ------------------------------------------
    def seal(self, plaintext: bytes, kind: str, name: str) -> bytes:
        salt, nonce = os.urandom(SALT), os.urandom(NONCE)
        sealed = self._cipher(salt, kind.encode()).encrypt(nonce, plaintext, _aad(kind, name))
        if kind == "session":  # the appendable envelope (see append_session)
            return MAGIC + bytes([APPENDABLE]) + salt + len(sealed).to_bytes(8, "big") + nonce + sealed
        return MAGIC + bytes([VERSION]) + salt + nonce + sealed

    def open(self, data: bytes, kind: str, name: str, what: str) -> bytes:
        """The plaintext of a sealed file; `what` names it in errors ("session 'x'")."""
        body = data[len(MAGIC):]
        if kind == "session" and body[:1] == bytes([APPENDABLE]):
            return self.open_session(data, name, what)[0]
        if not body or body[0] != VERSION:
            raise SealError(f"{what} is sealed in a format this version does not know (version "
                            f"{body[0] if body else '?'}); the file was left untouched")
        salt, nonce, sealed = body[1:1 + SALT], body[1 + SALT:1 + SALT + NONCE], body[1 + SALT + NONCE:]
        if len(sealed) < TAG:
            raise SealError(f"{what} is sealed but truncated; the file was left untouched")
        return self._open(salt, nonce, sealed, kind, _aad(kind, name), what)

    # -- sessions: a sealed snapshot, then sealed turns appended ----------------------------
    # MAGIC, 2, salt (16), the snapshot's sealed length (8 bytes, big-endian), nonce (12), the
    # sealed snapshot (the v2 document, history last); then one record per turn appended:
    # length (4), nonce (12), the sealed messages (JSON objects joined by commas), bound to the
    # session's name and the record's byte offset. Reading splices them into the history.
    def open_session(self, data: bytes, name: str, what: str) -> tuple[bytes, bool, str]:
        """(the document, whether turns can be appended to the file as it is, what was left out
        of it: "" nothing, "cut" or "damaged"). Records are read in order; the last one may fail
        to open and be left out: "cut" when its length runs past the end of the file (an append
        a crash cut short, or a flipped bit in that length), "damaged" when its bytes fail
        authentication (its length, if that was what changed, then leaves bytes that are not
        whole records). Its messages are in the journal (engine.binding takes them back), and
        the next write rewrites the file whole. A record that fails to open with whole records
        after it is an alteration: the file is refused."""
        body = data[len(MAGIC):]
        if body[:1] != bytes([APPENDABLE]):
            return self.open(data, "session", name, what), False, ""
        head = len(MAGIC) + 1 + SALT + 8 + NONCE
        salt = data[len(MAGIC) + 1: len(MAGIC) + 1 + SALT]
        length = int.from_bytes(data[len(MAGIC) + 1 + SALT: len(MAGIC) + 1 + SALT + 8], "big")
        if len(data) < head + length or length < TAG:
            raise SealError(f"{what} is sealed but truncated; the file was left untouched")
        document = self._open(salt, data[head - NONCE: head], data[head: head + length], "session",
                              _aad("session", name), what)
        turns, offset, left_out = [], head + length, ""
        cipher = self._cipher(salt, b"session")
        while offset < len(data):
            opened, end = self._open_record(cipher, data, offset, name)
            if opened is None:
                if end < len(data) and _records_reach_the_end(data, end):
                    raise SealError(f"{what} cannot be opened with CHATCLI_ENCRYPTION_KEY: a turn appended to it "
                                    "was altered; the file was left untouched")
                left_out = "cut" if end > len(data) else "damaged"
                break
            turns.append(opened)
            offset = end
        if turns:
            if not document.endswith(b"]}"):
                raise SealError(f"{what} is sealed in a shape this version does not know; the file was left untouched")
            comma = b"" if document.endswith(b"[]}") else b","
            document = document[:-2] + comma + b",".join(turns) + b"]}"
        return document, not left_out, left_out

    @staticmethod
    def _open_record(cipher, data: bytes, offset: int, name: str) -> tuple[bytes | None, int]:
        """The plaintext of the turn record at `offset` (None when it fails to open), and where
        the record ends by its length."""
        size = int.from_bytes(data[offset: offset + 4], "big")
        end = offset + 4 + NONCE + size
        if end > len(data) or size < TAG:
            return None, end
        try:
            return cipher.decrypt(data[offset + 4: offset + 4 + NONCE], data[offset + 4 + NONCE: end],
                                  _turn_aad(name, offset)), end
        except Exception:  # noqa: BLE001 - InvalidTag: damaged, or not a record at all
            return None, end

    def append_record(self, header: bytes, name: str, offset: int, plaintext: bytes) -> bytes:
        """The record of one appended turn for the session whose file starts with `header` (its
        first bytes, the salt among them), landing at byte `offset`."""
        salt = header[len(MAGIC) + 1: len(MAGIC) + 1 + SALT]
        nonce = os.urandom(NONCE)
        sealed = self._cipher(salt, b"session").encrypt(nonce, plaintext, _turn_aad(name, offset))
        return len(sealed).to_bytes(4, "big") + nonce + sealed

    def _open(self, salt: bytes, nonce: bytes, sealed: bytes, kind: str, aad: bytes, what: str) -> bytes:
        from cryptography.exceptions import InvalidTag

        try:
            return self._cipher(salt, kind.encode()).decrypt(nonce, sealed, aad)
        except InvalidTag:
            raise SealError(f"{what} cannot be opened with CHATCLI_ENCRYPTION_KEY: a different key sealed it, "
                            "or it was altered or copied from elsewhere; the file was left untouched") from None

    # -- journal lines ---------------------------------------------------------------------
    def seal_line(self, plaintext: bytes, transcript_id: str, offset: int) -> bytes:
        """One sealed journal line (without its newline) for the given byte offset."""
        salt = self._line_salt.get(transcript_id)
        if salt is None:
            salt = self._line_salt[transcript_id] = os.urandom(SALT)
        nonce = os.urandom(NONCE)
        sealed = self._cipher(salt, b"journal").encrypt(nonce, plaintext, _line_aad(transcript_id, offset))
        return LINE_PREFIX + base64.b64encode(bytes([VERSION]) + salt + nonce + sealed)

    def open_line(self, line: bytes, transcript_id: str, offset: int) -> bytes:
        try:
            body = base64.b64decode(line[len(LINE_PREFIX):], validate=True)
        except (binascii.Error, ValueError):
            raise SealError(f"transcript journal {transcript_id}: a sealed line at byte {offset} is damaged") from None
        if len(body) < 1 + SALT + NONCE + TAG or body[0] != VERSION:
            raise SealError(f"transcript journal {transcript_id}: a sealed line at byte {offset} is damaged "
                            "or of an unknown version")
        salt, nonce, sealed = body[1:1 + SALT], body[1 + SALT:1 + SALT + NONCE], body[1 + SALT + NONCE:]
        return self._open(salt, nonce, sealed, "journal", _line_aad(transcript_id, offset),
                          f"transcript journal {transcript_id} (the line at byte {offset})")


def _aad(kind: str, name: str) -> bytes:
    return f"chatcli/{VERSION}/{kind}/{name}".encode()


def _turn_aad(name: str, offset: int) -> bytes:
    return f"chatcli/{APPENDABLE}/session/{name}/{offset}".encode()


def session_layout(header: bytes) -> int | None:
    """The length of a sealed session file's snapshot part (header included), from its first
    SESSION_HEADER bytes, when it is in the appendable envelope; else None."""
    if len(header) < SESSION_HEADER or not header.startswith(MAGIC) or header[len(MAGIC)] != APPENDABLE:
        return None
    return SESSION_HEADER + int.from_bytes(header[len(MAGIC) + 1 + SALT: len(MAGIC) + 1 + SALT + 8], "big")


def _records_reach_the_end(data: bytes, offset: int) -> bool:
    """Whether what follows `offset` is whole turn records by their lengths, ending with the
    file: then the record before it was altered in place (its length is right), not a last
    record whose length was damaged (what follows it is then the rest of its own bytes)."""
    while offset + 4 + NONCE + TAG <= len(data):
        size = int.from_bytes(data[offset: offset + 4], "big")
        if size < TAG:
            return False
        offset += 4 + NONCE + size
    return offset == len(data)


def _line_aad(transcript_id: str, offset: int) -> bytes:
    return f"chatcli/{VERSION}/journal/{transcript_id}/{offset}".encode()


CHECK_TEXT = b"chatcli: this store is sealed with this key"


def check_store_key(path: Path, key: bytes | None,
                    sealed_files: Callable[[], Iterable[tuple[str, str, Path]]] = tuple) -> None:
    """Refuse a key the store was not sealed with, and no key for a store that is sealed, before
    anything is read or written; the first start with a key leaves the check file at `path`
    (store.home names it), sealed bound to its file name as a session is to its name. Without
    a check file, `sealed_files` gives the store's newest files as (kind, name, path), and the
    key must open one of those that are sealed before the check is written. Raises SealError."""
    from chatcli.store.atomic import atomic_write

    home = path.parent
    wrong_key = SealError(f"CHATCLI_ENCRYPTION_KEY is not the key this store ({home}) is sealed with; nothing was "
                          "read or written (chatcli storage rekey changes the key)")
    if key is None:
        if path.exists():
            raise SealError(f"the store {home} is encrypted: set CHATCLI_ENCRYPTION_KEY to its key (nothing was read "
                            "or written)")
        return
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        # The first start with a key, or a check file lost: a check written now under a key the
        # files already sealed do not open would seal the store under two keys for good.
        if _opens_sealed(sealer_for(key), sealed_files()) is False:
            raise wrong_key from None
        try:
            atomic_write(path, sealer_for(key).seal(CHECK_TEXT, "check", path.name))
        except OSError:
            # A read-only or full home: nothing can be written there this run, so nothing can be
            # sealed with the wrong key either; the check file is left by the first start that
            # can write (the front ends say once that nothing is saved).
            pass
        return
    except OSError as exc:
        from chatcli.store.atomic import os_cause

        raise SealError(f"cannot read the store's key check {path}: {os_cause(exc)} (nothing was read or "
                        "written)") from None
    if not is_sealed(data):
        raise SealError(f"{path} is not a sealed check file; move it away to start again")
    try:
        sealer_for(key).open(data, "check", path.name, "the store's key check")
    except SealError:
        raise wrong_key from None


_TRIES = 3  # sealed files (or journal lines) a key must fail to open before it is refused


def _opens_sealed(sealer: Sealer, files: Iterable[tuple[str, str, Path]]) -> bool | None:
    """Whether the key opens one of the first sealed files among `files`; None when none of them
    is sealed. A few tries, not one: a crash may have cut the last line of a journal short."""
    failed = 0
    for kind, name, path in files:
        try:
            opened = _open_journal(sealer, name, path) if kind == "journal" else _open_file(sealer, kind, name, path)
        except OSError:  # gone meanwhile, or not ours to read: it proves nothing either way
            continue
        if opened is None:
            continue
        if opened:
            return True
        failed += 1
        if failed == _TRIES:
            break
    return False if failed else None


def _open_file(sealer: Sealer, kind: str, name: str, path: Path) -> bool | None:
    """Whether the key opens a whole sealed file (None: it is plaintext). Of a session in the
    appendable envelope, only its snapshot is read and opened, not the turns after it."""
    with open(path, "rb") as handle:
        data = handle.read(SESSION_HEADER)
        if not is_sealed(data):
            return None
        snapshot = session_layout(data) if kind == "session" else None
        data += handle.read() if snapshot is None else handle.read(snapshot - len(data))
    try:
        sealer.open(data, kind, name, path.name)
        return True
    except SealError:
        return False


def _open_journal(sealer: Sealer, transcript_id: str, path: Path) -> bool | None:
    """Whether the key opens one of a journal's first whole sealed lines (None: it has none)."""
    failed, offset = 0, 0
    with open(path, "rb") as handle:
        for line in handle:
            if line.startswith(LINE_PREFIX) and line.endswith(b"\n"):
                try:
                    sealer.open_line(line[:-1], transcript_id, offset)
                    return True
                except SealError:
                    failed += 1
                    if failed == _TRIES:
                        break
            offset += len(line)
    return False if failed else None


_SEALERS: dict[bytes, Sealer] = {}


def sealer_for(key: bytes | None) -> Sealer | None:
    """The Sealer of a master key (one per key per process: derived keys are cached in it)."""
    if key is None:
        return None
    sealer = _SEALERS.get(key)
    if sealer is None:
        sealer = _SEALERS[key] = Sealer(key)
    return sealer


__all__ = ["LINE_PREFIX", "MAGIC", "SESSION_HEADER", "SealError", "Sealer", "check_store_key",
           "is_sealed", "sealer_for", "session_layout"]
