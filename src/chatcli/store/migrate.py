"""`chatcli storage migrate --to …`: every session of one store, every transcript journal, the
recall entries, memory notes, contexts, cost snapshots and the schedule, and the gateway hub's
senders and answered messages, copied to another (the files under CHATCLI_HOME, a PostgreSQL
server), files byte for byte, the source left as it is.

Each session is read under its lock in the source, copied under its lock in the target, and
read back: the copy counts only when its bytes hash as the source's did and it decodes to as many
messages. A session already in the target with the same bytes was copied by an earlier run: an
interrupted migration is finished by running it again. One there with other bytes is another
session of that name: it is left as it is and named, never overwritten. Sealed sessions move
sealed (both stores use the same key: the target's key check is passed first), so nothing is
opened on the way but to count its messages.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field

from chatcli.store.seal import is_sealed
from chatcli.store.session_file import SessionError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from chatcli.store.home import Home
    from chatcli.store.sessions import SessionStore


@dataclass
class Migrated:
    copied: int = 0
    already: int = 0  # in the target with the same bytes
    messages: int = 0  # in the sessions copied
    conflicts: list[str] = field(default_factory=list)  # names the target holds other sessions under
    failed: list[str] = field(default_factory=list)  # one line each
    journals: int = 0  # copied
    journals_already: int = 0
    senders: int = 0  # the gateway hub's principals added to the target's hub
    files: int = 0  # the small stores' files copied (recall, memory, contexts, costs, the schedule)
    files_already: int = 0
    files_skipped: int = 0  # Go ChatCLI's recall text, which a sealed target does not keep in plaintext
    # The journals the sessions copied (or there already) name, and those only sessions left
    # behind (conflicts, failures) name: those are not copied (nothing in the target names them).
    named: set[str] = field(default_factory=set)
    left: set[str] = field(default_factory=set)
    journals_left: int = 0


def digest(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def migrate(source: Home, target: Home, progress: Callable[[int, int], None] = lambda _d, _t: None) -> Migrated:
    """The sessions of `source`'s store, then its journals, copied to `target`'s."""
    from chatcli.store.journal import JournalError

    done = Migrated()
    sessions, there = source.sessions(), target.sessions()
    names = [info.name for info in sessions.list()]
    names.reverse()  # oldest first: the latest written is the latest in the target too
    journals = source.journal_ids()
    total = len(names) + len(journals)
    for count, name in enumerate(names, 1):
        progress(count, total)
        try:
            _move(sessions, there, name, done)
        except SessionError as exc:
            done.failed.append(str(exc))
            _leave_journal(sessions, name, done)
    for count, transcript_id in enumerate(journals, len(names) + 1):
        progress(count, total)
        if transcript_id in done.left and transcript_id not in done.named:
            done.journals_left += 1
            continue
        try:
            _move_journal(source.journal(transcript_id), target.journal(transcript_id), done)
        except JournalError as exc:
            done.failed.append(str(exc))
    _move_small_stores(source, target, done)
    _move_hub(source, target, done)
    return done


# The small stores, and what their files are sealed as (store.seal's kinds; None: never sealed).
_SMALL = (("recall", "recall"), ("memory", "memory"), ("contexts", "context"), ("costs", None))


def _move_small_stores(source: Home, target: Home, done: Migrated) -> None:
    """The recall entries, memory notes, contexts, cost snapshots and the schedule, file by file,
    as the sessions are: skipped when the target has the same bytes, named when it has others."""
    for store, sealed_as in _SMALL:
        there, into = getattr(source, store)().place, getattr(target, store)().place
        try:
            names = sorted(there.filenames())
        except SessionError as exc:
            done.failed.append(f"{store}: {exc}")
            continue
        except OSError as exc:
            done.failed.append(f"{store}: cannot list {there.where('')}: {exc.strerror or exc}")
            continue
        for filename in names:
            if not filename.startswith("."):
                _move_file(there, into, filename, sealed_as, target.key, done)
    schedule, into = source.schedule(), target.schedule()
    if schedule.place.exists(schedule.filename):  # written whole, atomically: read as one
        _move_file(schedule.place, into.place, schedule.filename, None, target.key, done)


def _move_file(there, into, filename: str, sealed_as: str | None, key: bytes | None, done: Migrated) -> None:
    """One file, byte for byte; a plaintext one from before the key was set is sealed on the way
    (the target never receives its words)."""
    from chatcli.store import home
    from chatcli.store.seal import SealError, dump_json, load_json

    try:
        raw = there.read(filename, regular=True)
        document = None
        if sealed_as is not None and key is not None and not is_sealed(raw):
            name = home.entry_named(filename)
            if name is None:  # Go ChatCLI's text (its own format, no sealed form): not onto a sealed store
                done.files_skipped += 1
                return
            document = load_json(raw, None, sealed_as, name, filename)
            raw = dump_json(document, key, sealed_as, name)  # a new nonce each time: compared opened
        if into.exists(filename):
            held = into.read(filename)
            if digest(held) == digest(raw) or (document is not None and is_sealed(held) and load_json(
                    held, key, sealed_as, home.entry_named(filename), filename) == document):
                done.files_already += 1
            else:
                done.failed.append(f"{into.where(filename)}: the target holds another file of that name; left as it "
                                   "is in both")
            return
        into.write(filename, raw)
        if digest(into.read(filename)) != digest(raw):
            done.failed.append(f"{into.where(filename)}: the copy does not read back as the original")
            return
        done.files += 1
    except (OSError, SealError, ValueError, SessionError) as exc:
        done.failed.append(f"{there.where(filename)}: {getattr(exc, 'strerror', None) or exc}")


def _move_hub(source: Home, target: Home, done: Migrated) -> None:
    """The gateway's hub: its senders (their bindings, threads and refusals) and the messages it
    answered, added to the target's hub where it holds none of them; a sender the target knows
    is kept as the target has it. Checked by reading each sender back."""
    from chatcli.store.hub import HubError

    if source.store is None and not source.hub_path.exists():
        return  # no gateway ran here
    hub, into = source.hub(readonly=True), target.hub()
    try:
        principals, delivered = hub.snapshot()
        if not principals and not delivered:
            return
        done.senders = into.merge(principals, delivered)
        if any(into.get(p.channel, p.sender) is None for p in principals):
            done.failed.append("the gateway's hub: a sender copied does not read back")
    except HubError as exc:
        done.failed.append(f"the gateway's hub: {exc}")
    finally:
        hub.close()
        into.close()


def _move_journal(journal, into, done: Migrated) -> None:
    """A journal copied whole (appends to it wait for its lock meanwhile: none is half-copied);
    one the target has with the same bytes was copied before, one with others is named."""
    from chatcli.store.journal import JournalError

    with journal.appending(journal.size()):
        raw = journal.read_bytes()
    if into.exists():
        if digest(into.read_bytes()) == digest(raw):
            done.journals_already += 1
            return
        raise JournalError(f"transcript journal {journal.id}: the target holds another journal of that id; left as "
                           "it is in both")
    into.put_raw(raw)
    if digest(into.read_bytes()) != digest(raw):
        raise JournalError(f"transcript journal {journal.id}: the copy does not read back as the original")
    done.journals += 1


def _leave_journal(source: SessionStore, name: str, done: Migrated) -> None:
    """Session `name` stays behind: its journal too, unless a session copied names it."""
    try:
        data, _stamp = source.load(name)
    except SessionError:
        return  # unreadable: which journal it names is not known, and that journal is copied
    if data.transcript_id:
        done.left.add(data.transcript_id)


def _move(source: SessionStore, target: SessionStore, name: str, done: Migrated) -> None:
    with source.lock(name):
        found = source.raw(name)
    if found is None:
        return  # deleted meanwhile
    raw, stamp = found
    there = target.raw(name)
    if there is not None:
        if digest(there[0]) == digest(raw):
            done.already += 1
            done.named.add(source.decode(name, raw).transcript_id or "")  # there: its journal goes too
        else:  # another session, or this one changed since it was copied: named, never overwritten
            done.conflicts.append(name)
            _leave_journal(source, name, done)
        return
    data = source.decode(name, raw)  # SessionError for one it cannot read: named, and left in the source
    # A plaintext file in a store with a key (written before the key was set: the file store seals
    # it at its next write) is sealed on the way: the target never receives its words.
    seal = target.private and not is_sealed(raw)
    with target.lock(name):
        if target.stamp(name) is not None:  # made meanwhile by someone else
            done.conflicts.append(name)
            done.left.add(data.transcript_id or "")
            return
        if seal:
            target.write(name, data, latest=False)
            target.date(name, stamp.mtime_ns / 1e9)
        else:
            target.put_raw(name, raw, stamp.mtime_ns, data)
    back = target.raw(name)
    same = back is not None and (seal or digest(back[0]) == digest(raw))
    if not same or len(target.decode(name, back[0]).history) != len(data.history):
        raise SessionError(f"session '{name}': the copy does not read back as the original (left in both stores)")
    done.copied += 1
    done.messages += len(data.history)
    done.named.add(data.transcript_id or "")  # copied: its journal goes too, whoever else names it
