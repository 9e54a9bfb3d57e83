"""The recall store (SPEC §8.1): compacted originals kept by content, one file per entry.

The key is the first 16 hex digits of the SHA-256 of the entry's messages, so the same messages
always get the same key and are stored once; a summary carries `<<ccr:KEY>>` markers and
`/recall KEY` (or the model, through the same function) brings the originals back. Entries
expire by the retention rules (`CHATCLI_CCR_TTL`, `CHATCLI_CCR_MAX_SIZE`, see /storage);
storing an entry again refreshes its time.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path

from chatcli.core.errors import ChatcliError, UsageError
from chatcli.core.messages import Message
from chatcli.store import home
from chatcli.store.atomic import atomic_write
from chatcli.store.seal import SealError, dump_json, load_json

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


class RecallStore:
    """With a master key the entries are sealed, and their keys are keyed hashes (HMAC) of the
    content, so neither the file nor its name tells anything about what it holds."""

    def __init__(self, root: Path, key: bytes | None = None) -> None:
        self.root = root
        self.key = key

    def path(self, key: str) -> Path:
        return home.entry_path(self.root, parse_key(key))

    def put(self, messages: Sequence[Message], origin: dict | None = None) -> str:
        """Store `messages` (once: the key is their content's) and return the key."""
        body = json.dumps([m.to_dict() for m in messages], ensure_ascii=False, sort_keys=True,
                          separators=(",", ":"))
        if self.key is None:
            key = hashlib.sha256(body.encode("utf-8")).hexdigest()[:16]
        else:
            key = hmac.new(self.key, b"chatcli recall key\0" + body.encode("utf-8"), hashlib.sha256).hexdigest()[:16]
        path = home.entry_path(self.root, key)
        try:
            if path.exists():
                os.utime(path)  # stored again: it is recent again
                return key
            document = {"version": VERSION, "key": key, "origin": origin or {}, "messages": json.loads(body)}
            atomic_write(path, dump_json(document, self.key, "recall", key))
        except OSError as exc:
            raise RecallError(f"recall store: cannot write {path}: {exc.strerror or exc}") from None
        return key

    def get(self, key: str) -> tuple[list[Message], dict]:
        path = self.path(key)
        try:
            document = load_json(path.read_bytes(), self.key, "recall", parse_key(key), f"recall entry {parse_key(key)}")
            messages = [Message.from_dict(item) for item in document["messages"]]
            origin = document.get("origin") if isinstance(document.get("origin"), dict) else {}
        except FileNotFoundError:
            raise RecallError(f"no recall entry {parse_key(key)} (it may have expired: see /storage)") from None
        except OSError as exc:
            raise RecallError(f"recall store: cannot read {path}: {exc.strerror or exc}") from None
        except SealError as exc:
            raise RecallError(str(exc)) from None
        except (ValueError, KeyError, TypeError):
            raise RecallError(f"recall entry {parse_key(key)} is damaged; the file was left untouched") from None
        return messages, origin


__all__ = ["MARKER_RE", "RecallError", "RecallStore", "marker", "parse_key"]
