"""The recall store (SPEC §8.1): compacted originals kept by content, one file per entry.

The key is the first 16 hex digits of the SHA-256 of the entry's messages, so the same messages
always get the same key and are stored once; a summary carries `<<ccr:KEY>>` markers and
`/recall KEY` (or the model, through the same function) brings the originals back. Entries
expire by the retention rules (`CHATCLI_CCR_TTL`, `CHATCLI_CCR_MAX_SIZE`, see /storage);
storing an entry again refreshes its time.

Go ChatCLI shares the directory: it keeps its originals as `<key>.ccr`, the raw text it compacted
(key = the first 16 hex of the text's SHA-256), and its summaries carry the same marker. Those
are read too, as text (they are not messages), and never written: they are Go's files (but for
those `chatcli import chatcli` copies in from another home).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from chatcli.core.errors import ChatcliError, UsageError
from chatcli.core.messages import Message
from chatcli.store import home
from chatcli.store.places import Files, place_of
from chatcli.store.seal import SealError, dump_json, load_json
from chatcli.store.session_file import SessionError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from chatcli.store.pg_places import ServerFiles

KEY_RE = re.compile(r"[0-9a-f]{16}")
MARKER_RE = re.compile(r"<<ccr:([0-9a-f]{16})>>")
VERSION = 1


class RecallError(ChatcliError):
    pass


def marker(key: str) -> str:
    return f"<<ccr:{key}>>"


def parse_key(text: str) -> str:
    """A key as the user types it: `0123456789abcdef` or `<<ccr:0123456789abcdef>>`."""
    text = text.strip()
    found = MARKER_RE.fullmatch(text)
    key = found.group(1) if found else text.lower()
    if not KEY_RE.fullmatch(key):
        raise UsageError(f"'{text}' is not a recall key (16 hexadecimal digits, or <<ccr:KEY>>)")
    return key


@dataclass(frozen=True)
class Entry:
    """One recall entry: chatcli's hold `messages` (and where they came from); Go ChatCLI's hold
    `text`, as Go stored it, and whether that text still hashes to the key it is filed under."""

    key: str
    messages: list[Message] | None = None
    origin: dict = field(default_factory=dict)
    text: str | None = None
    intact: bool = True

    def originals(self) -> list[Message]:
        """The messages; RecallError for Go's text, which cannot be turned back into the messages
        it was made from."""
        if self.messages is None:
            raise RecallError(f"recall entry {self.key} is Go ChatCLI's text, not messages: /recall {self.key} "
                              "shows it")
        return self.messages


class RecallStore:
    """With a master key the entries are sealed, and their keys are keyed hashes (HMAC) of the
    content, so neither the file nor its name tells anything about what it holds. The files are
    in a directory, or on the sessions' server (`place`: store.places)."""

    def __init__(self, place: Path | Files | ServerFiles, key: bytes | None = None) -> None:
        self.place = place_of(place)
        self.key = key

    def key_of(self, messages: Sequence[Message]) -> tuple[str, str]:
        """(the key `messages` are stored under, their JSON): their content's hash, or with a
        master key a keyed hash of it."""
        body = json.dumps([m.to_dict() for m in messages], ensure_ascii=False, sort_keys=True,
                          separators=(",", ":"))
        if self.key is None:
            return hashlib.sha256(body.encode("utf-8")).hexdigest()[:16], body
        return hmac.new(self.key, b"chatcli recall key\0" + body.encode("utf-8"), hashlib.sha256).hexdigest()[:16], body

    def put(self, messages: Sequence[Message], origin: dict | None = None) -> str:
        """Store `messages` (once: the key is their content's) and return the key."""
        key, body = self.key_of(messages)
        filename = home.entry_file(key)
        try:
            if self.place.exists(filename):
                self.place.touch(filename)  # stored again: it is recent again
                return key
            document = {"version": VERSION, "key": key, "origin": origin or {}, "messages": json.loads(body)}
            self.place.write(filename, dump_json(document, self.key, "recall", key))
        except OSError as exc:
            raise RecallError(f"recall store: cannot write {self.place.where(filename)}: {exc.strerror or exc}") from None
        except SessionError as exc:  # on a server that cannot take it now
            raise RecallError(f"recall store: {exc}") from None
        return key

    def adopt(self, filename: str, raw: bytes, dry_run: bool = False) -> str:
        """Take in another home's recall entry file (`chatcli import chatcli`): "copied", "had"
        (one of that name is here already, left as it is), "would be copied" (`dry_run`: nothing
        written) or why it was not copied. A chatcli
        entry is sealed under this store's key when it has one; Go ChatCLI's text only goes to a
        plaintext store (it has no sealed form)."""
        key = home.go_entry_named(filename) or home.entry_named(filename)
        if not key or not KEY_RE.fullmatch(key):
            return "not a recall entry"
        go = home.go_entry_named(filename) is not None
        target = home.go_entry_file(key) if go else home.entry_file(key)
        if self.place.exists(target):
            return "had"
        if dry_run:
            return "would be copied"
        if go:
            if self.key is not None:
                return "Go ChatCLI text, which this sealed home does not keep in plaintext"
            payload = raw
        else:
            try:
                document = load_json(raw, None, "recall", key, f"recall entry {key}")
                [Message.from_dict(item) for item in document["messages"]]
            except (SealError, ValueError, KeyError, TypeError):
                return "sealed with its home's key, or damaged"
            payload = dump_json(document, self.key, "recall", key)
        try:
            self.place.write(target, payload)
        except OSError as exc:
            return f"cannot write {self.place.where(target)}: {exc.strerror or exc}"
        return "copied"

    def get(self, key: str) -> tuple[list[Message], dict]:
        """The messages of entry `key` and where they came from. Raises RecallError (unknown,
        expired, damaged, or Go ChatCLI's text, which is not messages)."""
        entry = self.read(key)
        return entry.originals(), entry.origin

    def read(self, key: str) -> Entry:
        """Entry `key`: chatcli's (`<key>.json`) when there is one, else Go ChatCLI's (`<key>.ccr`).
        Raises UsageError for a malformed key (before any path is made), RecallError otherwise."""
        key = parse_key(key)
        filename = home.entry_file(key)
        try:
            document = load_json(self.place.read(filename), self.key, "recall", key, f"recall entry {key}")
            messages = [Message.from_dict(item) for item in document["messages"]]
            origin = document.get("origin") if isinstance(document.get("origin"), dict) else {}
        except FileNotFoundError:
            return self._read_go(key)
        except SessionError as exc:
            raise RecallError(f"recall store: {exc}") from None
        except OSError as exc:
            raise RecallError(f"recall store: cannot read {self.place.where(filename)}: {exc.strerror or exc}") from None
        except SealError as exc:
            raise RecallError(str(exc)) from None
        except (ValueError, KeyError, TypeError):
            raise RecallError(f"recall entry {key} is damaged; the file was left untouched") from None
        return Entry(key, messages, origin)

    def _read_go(self, key: str) -> Entry:
        """Go ChatCLI's entry, shown as it is. It is plaintext even when chatcli seals its own:
        Go writes it in its own format, which chatcli's key has no part in. Only a regular file
        in the directory: a symbolic link could show any file, and a FIFO would block."""
        filename = home.go_entry_file(key)
        try:
            raw = self.place.read(filename, regular=True)
        except FileNotFoundError:
            raise RecallError(f"no recall entry {key} (it may have expired: see /storage)") from None
        except OSError as exc:
            raise RecallError(f"recall store: cannot read {self.place.where(filename)}: {exc.strerror or exc}") from None
        intact = hashlib.sha256(raw).hexdigest()[:16] == key
        return Entry(key, text=raw.decode("utf-8", errors="replace"), intact=intact)


__all__ = ["MARKER_RE", "Entry", "RecallError", "RecallStore", "marker", "parse_key"]
