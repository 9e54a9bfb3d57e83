"""Global memory (`/memory`): notes the user asked chatcli to remember, in no session,
offered to the model in every conversation. One file per note (`memory/<id>.json`, 0600,
written atomically, sealed with the master key when there is one; on the sessions' server, one
row each, with a server store), so two surfaces saving at
once never lose each other's note, and forgetting one removes exactly that file. Never pruned:
a note goes only when the user forgets it.
"""

from __future__ import annotations

import datetime
import os
import re
from dataclasses import dataclass
from pathlib import Path

from chatcli.core.errors import ChatcliError, UsageError
from chatcli.store.atomic import os_cause
from chatcli.store.places import Files, place_of
from chatcli.store.seal import SealError, dump_json, load_json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from chatcli.store.pg_places import ServerFiles

ID_RE = re.compile(r"[0-9a-f]{8}")
SUFFIX = ".json"
VERSION = 1
MAX_NOTE = 4000  # characters of one note


class MemoryError(ChatcliError):
    pass


@dataclass(frozen=True)
class Note:
    id: str
    text: str
    created: str  # ISO 8601, UTC
    origin: str = ""  # the session it was saved from, if any


class MemoryStore:
    """The notes' files are in a directory, or on the sessions' server (`place`: store.places)."""

    def __init__(self, place: Path | Files | ServerFiles, key: bytes | None = None) -> None:
        self.place = place_of(place)
        self.key = key

    def save(self, text: str, origin: str = "") -> Note:
        text = text.strip()
        if not text:
            raise UsageError("usage: /memory save <what to remember>")
        if len(text) > MAX_NOTE:
            raise UsageError(f"a note is at most {MAX_NOTE:,} characters ({len(text):,} given)")
        for _ in range(20):
            note = Note(os.urandom(4).hex(), text, datetime.datetime.now(datetime.timezone.utc).isoformat(
                timespec="microseconds"), origin)  # to the microsecond: notes of one second keep their order
            if not self.place.exists(note.id + SUFFIX):
                break
        payload = dump_json({"version": VERSION, "id": note.id, "text": note.text, "created": note.created,
                             "origin": note.origin}, self.key, "memory", note.id)
        try:
            self.place.write(note.id + SUFFIX, payload)
        except OSError as exc:
            raise MemoryError(f"memory: cannot write {self.place.where(note.id + SUFFIX)}: {os_cause(exc)}") from None
        return note

    def notes(self) -> tuple[list[Note], list[str]]:
        """Every note, oldest first, and one line for each file that could not be read (left as
        it is: a note sealed with another key, a damaged file)."""
        try:
            names = sorted(self.place.filenames())
        except OSError as exc:
            return [], [f"memory: cannot list {self.place.where('')}: {os_cause(exc)}"]
        notes, problems = [], []
        for name in names:
            note_id = name.removesuffix(SUFFIX)
            if not name.endswith(SUFFIX) or not ID_RE.fullmatch(note_id):
                continue
            try:
                notes.append(self._read(note_id))
            except MemoryError as exc:
                problems.append(str(exc))
        notes.sort(key=lambda note: (note.created, note.id))
        return notes, problems

    def _read(self, note_id: str) -> Note:
        filename = note_id + SUFFIX
        try:
            document = load_json(self.place.read(filename), self.key, "memory", note_id, f"memory note {note_id}")
            return Note(note_id, str(document["text"]), str(document.get("created", "")),
                        str(document.get("origin") or ""))
        except OSError as exc:
            raise MemoryError(f"memory: cannot read {self.place.where(filename)}: {os_cause(exc)}") from None
        except SealError as exc:
            raise MemoryError(str(exc)) from None
        except (ValueError, KeyError, TypeError):
            raise MemoryError(f"memory note {note_id} is damaged; the file was left untouched") from None

    def find(self, ref: str) -> Note:
        """A note by its id, or by its number in the list (1 is the oldest)."""
        ref = ref.strip().strip("[]").lower()
        notes, _problems = self.notes()
        if ref.isdigit() and 1 <= int(ref) <= len(notes) and not ID_RE.fullmatch(ref):
            return notes[int(ref) - 1]
        for note in notes:
            if note.id == ref:
                return note
        raise UsageError(f"no memory note '{ref}' (/memory list shows their numbers and ids)")

    def forget(self, ref: str) -> Note:
        note = self.find(ref)
        try:
            self.place.remove(note.id + SUFFIX)  # False: forgotten meanwhile by another surface
        except OSError as exc:
            raise MemoryError(f"memory: cannot remove {self.place.where(note.id + SUFFIX)}: {os_cause(exc)}") from None
        return note

    def stamp(self) -> tuple[int, int] | None:
        """What changes whenever a note is saved or forgotten (the directory's mtime and size)."""
        return self.place.stamp()


__all__ = ["MAX_NOTE", "MemoryError", "MemoryStore", "Note"]
