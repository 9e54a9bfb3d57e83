"""/storage and /storage prune (SPEC §10): written once; `chatcli storage` prints the same text."""

from __future__ import annotations

from typing import TYPE_CHECKING

from chatcli.commands.mistyped import unknown_action
from chatcli.commands.registry import CommandRegistry, Result
from chatcli.core import retention
from chatcli.core.errors import UsageError
from chatcli.core.terminal import printable
from chatcli.store.home import LOG_BACKUPS
from chatcli.store.storage import (
    DELIVERY_KEEP,
    LABELS,
    NEVER_PRUNED,
    STORES,
    Applied,
    Plan,
    Removal,
    Storage,
    human_size,
    store_key,
)

if TYPE_CHECKING:
    from chatcli.config.settings import Settings
    from chatcli.engine.conversation import Conversation

USAGE = "/storage · /storage prune [store] [--apply]"
ACTIONS = ("report", "prune")
# The REPL shows this many files per reason; `chatcli storage prune` shows every one.
SHOWN_PER_REASON = 20


def storage(settings: Settings, words: list[str], *, limit: int | None = SHOWN_PER_REASON) -> Result:
    """`/storage …` for these arguments (an error result when a planned file could not be
    removed); UsageError for arguments it does not take."""
    parsed = parse(words)
    if parsed is None:
        return Result(report(Storage(settings)))
    only, apply = parsed
    return prune(Storage(settings), only=only, apply=apply, limit=limit)


def parse(words: list[str]) -> tuple[str | None, bool] | None:
    """`/storage …`'s arguments: None for the report, (the store or None, --apply) for a prune;
    UsageError for arguments it does not take (said before anything runs, as /schedule does)."""
    if not words or words == ["report"]:
        return None
    if words[0].lower() not in ACTIONS:
        raise unknown_action("storage", words[0].lower(), ACTIONS)
    if words[0].lower() != "prune":
        raise UsageError(f"usage: {USAGE}")
    rest = [word for word in words[1:] if word != "--apply"]
    if len(rest) > 1 or any(word.startswith("-") for word in rest):
        raise UsageError(f"usage: {USAGE}")
    only = None
    if rest:
        only = store_key(rest[0])
        if only is None:
            raise UsageError(f"unknown store '{rest[0]}' (choose from: {', '.join(STORES)})")
    return only, "--apply" in words


def report(storage: Storage) -> str:
    plan = storage.plan()
    planned = {key: [0, 0] for key in STORES}
    for removal in plan.removals:
        planned[removal.store][0] += 1
        planned[removal.store][1] += removal.size
    rows = [("store", "files", "size", "would remove now", "rule")]
    for usage in storage.usage():
        count, size = planned[usage.store]
        if usage.store in NEVER_PRUNED:
            now = "never pruned"
        elif usage.store == "hub":
            now = ", ".join(_hub_amounts(plan)) or "nothing"
        else:
            now = f"{_files(count)}, {human_size(size)}" if count else "nothing"
        rows.append((LABELS[usage.store], str(usage.files), human_size(usage.size), now, rule(storage, usage.store)))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = [f"Storage under {storage.home}" + (f" and at {storage.sessions.location}" if storage.layout.store else "")
             + ":"]
    for label, files, size, now, governs in rows:
        lines.append(f"  {label:<{widths[0]}}  {files:>{widths[1]}}  {size:>{widths[2]}}  "
                     f"{now:<{widths[3]}}  {governs}")
    lines += [f"Note: {note}" for note in plan.notes]
    lines.append("/storage prune (chatcli storage prune) lists what would be removed and why; --apply removes it.")
    return "\n".join(lines)


def rule(storage: Storage, store: str) -> str:
    """The rule that governs `store`, with the values in force."""
    settings = storage.settings
    ttl = retention.describe_days(settings.session_ttl_days)
    if store == "sessions":
        expiry = f"expire after {ttl}" if settings.session_ttl_days else "never expire (TTL 0)"
        keep = f"newest {settings.autosave_keep} per prefix kept" if settings.autosave_keep else "no count limit"
        return (f"autosave-/mcp- {expiry}, {keep}; on demand: test bursts, orphan locks; "
                "named sessions never removed")
    if store == "transcripts":
        expiry = f"removed after {ttl}" if settings.session_ttl_days else "kept (TTL 0)"
        return f"kept while a session refers to one; otherwise {expiry}; on demand: orphans"
    if store == "recall":
        text = (f"on demand only: entries expire after {retention.describe_days(settings.ccr_ttl_days)}, "
                f"capped at {human_size(settings.ccr_max_size)}")
        if not settings.session_transcript:  # the recall store is then not the only copy (SPEC §8.1)
            text += ("; the journal is off, so each compaction summary also keeps its originals in its "
                     "session, for as long as the session lives")
        go = storage.go_recall_entries()
        if go.files:
            text += (f"; Go ChatCLI's .ccr entries ({go.files}, {human_size(go.size)}) are counted but never "
                     "pruned here: Go prunes them by its own rules")
        return text
    if store == "schedule":
        try:
            jobs = storage.layout.schedule().jobs()
        except Exception as exc:  # noqa: BLE001 - the report says it and goes on
            return f"the /schedule jobs: {exc}"
        listed = "; ".join(f"{job.id}. '{job.cron}' {job.command}" for job in jobs) or "none"
        return f"the /schedule jobs (never pruned; /schedule remove): {listed}"
    if store == "costs":
        return ("one per session lineage (forks share it); on demand only: test bursts "
                f"({retention.BURST_COUNT}+ made within a minute, at most {retention.BURST_MESSAGES} requests each)")
    if store == "contexts":
        return "your /context snapshots, attached by sessions: never pruned; /context delete drops one"
    if store == "memory":
        return "your notes (/memory), offered in every conversation: never pruned; /memory forget drops one"
    if store == "history":
        return f"the oldest prompts are dropped past {human_size(settings.history_max_size)} as you type"
    if store == "index":
        return "caches, rebuilt when missing"
    if store == "logs":
        logs = ", ".join(f"{printable(log.name)} ({_files(log.files)}, {human_size(log.size)})"
                         for log in storage.logs()) or "none yet"
        return (f"the servers' logs, each rotated past {human_size(settings.log_max_size)} keeping {LOG_BACKUPS} "
                f"older copies (<log>.1 the newest), never pruned: {logs}")
    if store == "hub":
        unseen = f"unbound senders not seen for {ttl} (their mirror gone), " if settings.session_ttl_days else ""
        return (f"the gateway's senders, bindings and threads; on demand only: {unseen}delivery records older "
                f"than {retention.describe_days(DELIVERY_KEEP / retention.DAY)}; bound senders kept")
    return "removed at start-up and on demand once their writer is gone (or after an hour)"


def prune(storage: Storage, *, only: str | None, apply: bool, limit: int | None) -> Result:
    """List the plan grouped by reason; with `apply`, remove exactly the files listed."""
    plan = storage.plan(only=only, record=apply)  # a dry run writes nothing, not even a cache
    where = f" from {LABELS[only]}" if only else ""
    if not plan:
        if only in NEVER_PRUNED:
            be = "are" if LABELS[only].endswith("s") else "is"
            return Result(f"Nothing to remove: the {LABELS[only]} {be} never pruned ({rule(storage, only)}).")
        examined = "everything examined" if plan.notes else "everything"
        return Result("\n".join([f"Nothing to remove{where}: {examined} is within its store's rules.",
                                 *(f"Note: {note}" for note in plan.notes)]))
    verb = "Removing" if apply else "Would remove"
    amounts = [f"{_files(len(plan.removals))} ({human_size(plan.size())})"] if plan.removals else []
    lines = [f"{verb} {' and '.join(amounts + _hub_amounts(plan))}{where}:"]
    lines += _groups(storage, plan, limit)
    lines += _hub_groups(storage, plan, limit)
    lines += [f"Note: {note}" for note in plan.notes]
    if not apply:
        target = f" {only}" if only else ""
        full = "" if limit is None or all(len(group) <= limit for group in plan.by_reason().values()) else \
            f" (chatcli storage prune{target} lists every one)"
        lines.append(f"Nothing was removed{full}. /storage prune{target} --apply (or chatcli storage prune "
                     f"--apply{target}) removes what the rules select at that moment, listing each file as above.")
        return Result("\n".join(lines))
    applied = storage.apply(plan)
    lines += _outcome(storage, plan, applied, limit)
    if applied.failed:  # said first, so that a surface showing it as an error reads right
        lines.insert(0, f"could not remove {len(applied.failed)} of {_files(len(plan.removals))} "
                        "(each is named below)")
    elif applied.hub_failed:
        lines.insert(0, f"could not prune the conversation hub: {applied.hub_failed}")
    return Result("\n".join(lines), error=bool(applied.failed or applied.hub_failed))


def _groups(storage: Storage, plan: Plan, limit: int | None) -> list[str]:
    lines = []
    for reason, removals in plan.by_reason().items():
        size = human_size(sum(removal.size for removal in removals))
        lines.append(f"  {reason} — {_why(storage, reason)}: {_files(len(removals))}, {size}")
        shown = removals if limit is None else removals[:limit]
        lines += [f"    {_describe(storage, removal)}" for removal in shown]
        if len(shown) < len(removals):
            lines.append(f"    … and {len(removals) - len(shown)} more (chatcli storage prune lists them all)")
    return lines


def _hub_amounts(plan: Plan) -> list[str]:
    amounts = []
    if plan.hub.stale:
        amounts.append(_count(len(plan.hub.stale), "gateway sender"))
    if plan.hub.deliveries:
        amounts.append(_count(plan.hub.deliveries, "delivery record"))
    return amounts


def _hub_groups(storage: Storage, plan: Plan, limit: int | None) -> list[str]:
    """The hub's rows, as _groups lists files: why, how many, and each sender."""
    lines = []
    if plan.hub.stale:
        ttl = retention.describe_days(storage.settings.session_ttl_days)
        lines.append(f"  stale gateway sender — unbound, not seen for {ttl}, its thread's mirror gone: "
                     f"{_count(len(plan.hub.stale), 'sender')} in {plan.hub.where}")
        shown = plan.hub.stale if limit is None else plan.hub.stale[:limit]
        lines += [f"    {_principal(storage, principal)}" for principal in shown]
        if len(shown) < len(plan.hub.stale):
            lines.append(f"    … and {len(plan.hub.stale) - len(shown)} more (chatcli storage prune lists them all)")
    if plan.hub.deliveries:
        keep = retention.describe_days(DELIVERY_KEEP / retention.DAY)
        lines.append(f"  old delivery records — messages answered over {keep} ago, which no channel redelivers: "
                     f"{_count(plan.hub.deliveries, 'record')} in {plan.hub.where}")
    return lines


def _principal(storage: Storage, principal) -> str:
    name = f" ({printable(principal.display)})" if principal.display else ""
    refused = f", refused {_count(principal.refused, 'message')}" if principal.refused else ""
    seen = retention.describe_age(storage.now - principal.last_seen)
    return f"{printable(principal.channel)}:{printable(principal.sender)}{name}  (last seen {seen}{refused})"


def _outcome(storage: Storage, plan: Plan, applied: Applied, limit: int | None) -> list[str]:
    lines = [f"Removed {_files(len(applied.removed))} "
             f"({human_size(sum(removal.size for removal in applied.removed))})."] if plan.removals else []
    if applied.forgotten or applied.deliveries:
        done = [_count(n, what) for n, what in ((len(applied.forgotten), "gateway sender"),
                                                (applied.deliveries, "delivery record")) if n]
        lines.append(f"Forgot {' and '.join(done)} in {plan.hub.where}.")
    shown = applied.hub_kept if limit is None else applied.hub_kept[:limit]
    lines += [f"Kept {_principal(storage, principal)}: {why}." for principal, why in shown]
    if applied.gone:
        lines.append(f"{_files(len(applied.gone))} had already been removed meanwhile (another prune or the "
                     "start-up sweep).")
    for verb, items in (("Kept", applied.kept), ("Could not remove", applied.failed)):
        shown = items if limit is None else items[:limit]
        lines += [f"{verb} {_shown_path(storage, removal)}: {why}." for removal, why in shown]
        if len(shown) < len(items):
            lines.append(f"… and {len(items) - len(shown)} more ({verb.lower()}).")
    return lines


def _why(storage: Storage, reason: str) -> str:
    settings = storage.settings
    if reason == retention.TTL:
        return (f"not modified within the TTL (machine sessions and unreferenced journals: "
                f"{retention.describe_days(settings.session_ttl_days)}, recall entries: "
                f"{retention.describe_days(settings.ccr_ttl_days)})")
    if reason == retention.BACKSTOP:
        return f"beyond the newest {settings.autosave_keep} machine sessions of their prefix"
    if reason == retention.ORPHAN:
        return "a journal no session refers to, or the lock file of a session that is gone"
    if reason == retention.SIZE_CAP:
        return f"oldest recall entries beyond {human_size(settings.ccr_max_size)}"
    if reason == retention.BURST:
        return (f"{retention.BURST_COUNT}+ machine sessions of at most {retention.BURST_MESSAGES} messages, or cost "
                f"snapshots of at most {retention.BURST_MESSAGES} requests, made within one minute (scripted runs)")
    return "left by an interrupted atomic write whose writer is gone"


def _describe(storage: Storage, removal: Removal) -> str:
    age = retention.describe_age(storage.now - removal.mtime_ns / 1e9)
    age = age.replace(" ago", " old") if age.endswith(" ago") else "under a minute old"
    going = f", goes with session '{removal.owners[0]}'" if removal.owners else ""
    return f"{_shown_path(storage, removal)}  ({age}, {human_size(removal.size)}{going})"


def _shown_path(storage: Storage, removal: Removal) -> str:
    try:
        return str(removal.path.relative_to(storage.home))
    except ValueError:
        return str(removal.path)


def _files(count: int) -> str:
    return _count(count, "file")


def _count(count: int, thing: str) -> str:
    return f"{count} {thing}" if count == 1 else f"{count} {thing}s"


def register(registry: CommandRegistry) -> None:
    def complete(_conv: Conversation, prefix: str) -> list[str]:
        words = prefix.split(" ")
        if len(words) == 1:
            return [word for word in ("prune",) if word.startswith(words[0].lower())]
        if words[0].lower() == "prune" and len(words) == 2:
            return [f"prune {word}" for word in (*STORES, "--apply") if word.startswith(words[1].lower())]
        return []

    @registry.command("storage", "/storage [prune [store] [--apply]]",
                      "what chatcli keeps on disk; prune what the retention rules remove", complete=complete)
    def storage_command(conv: Conversation, args: str) -> Result:
        return storage(conv.settings, args.split())
