"""Retention rules (SPEC §10) as pure functions: which machine sessions go, and why.

Only sessions chatcli made itself (`autosave-…`, `mcp-…`) have a lifecycle; a session the
user named is never selected by any rule here. The store layer gathers names and times,
these functions decide, and the store removes exactly what was decided.
"""

from __future__ import annotations

from collections.abc import Iterable

from chatcli.core.names import GATEWAY_PREFIX, RESERVED_PREFIXES

DAY = 86_400.0

# Why a file would be removed. TTL, the count backstop and lost temporary files apply at start-up
# too; the rest only on demand.
TTL = "TTL"
BACKSTOP = "count backstop"
SIZE_CAP = "size cap"
ORPHAN = "orphan"
BURST = "test burst"
LOST_TEMP = "lost temporary file"
REASONS = (TTL, BACKSTOP, SIZE_CAP, ORPHAN, BURST, LOST_TEMP)

# A test burst: BURST_COUNT or more machine sessions of at most BURST_MESSAGES messages
# each, all made within BURST_WINDOW seconds of each other (scripted runs, not people).
# The chat gateway's delivery records are kept this long: past it no channel redelivers a message
# (WhatsApp retries a webhook for up to 7 days, Telegram keeps an unread update 24 hours, Slack
# retries within minutes, a webhook request is refused after its replay window), so `storage
# prune` may drop them.
DELIVERY_KEEP = 7 * DAY
BURST_COUNT = 4
BURST_MESSAGES = 2
BURST_WINDOW = 60.0


def parse_days(text: str) -> float:
    """'90d', '30d', '90', '0.5d' → days (0 means never). Raises ValueError on anything else."""
    raw = text.strip().lower()
    number = raw[:-1] if raw.endswith("d") else raw
    value = float(number)  # ValueError for '', 'abc', '3w'
    if not value >= 0 or value == float("inf"):  # also refuses nan
        raise ValueError(text)
    return value


def describe_days(days: float) -> str:
    if days == 0:
        return "never"
    whole = int(days)
    shown = str(whole) if whole == days else f"{days:g}"
    return f"{shown} day" if shown == "1" else f"{shown} days"


def describe_age(seconds: float) -> str:
    """'just now', '5 minutes ago', '3 hours ago', '104 days ago'."""
    for unit, size in (("day", DAY), ("hour", 3600.0), ("minute", 60.0)):
        if seconds >= size:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count != 1 else ''} ago"
    return "just now"


def machine_prefix(name: str) -> str | None:
    """'autosave-' or 'mcp-' for a session chatcli made (any letter case), else None."""
    lowered = name.lower()
    for prefix in RESERVED_PREFIXES:
        if lowered.startswith(prefix):
            return prefix
    return None


def expired(mtime: float, now: float, ttl_days: float) -> bool:
    return ttl_days > 0 and now - mtime > ttl_days * DAY


def machine_sessions(
    rows: Iterable[tuple[str, float, int | None]],
    *,
    now: float,
    ttl_days: float,
    keep: int,
    on_demand: bool,
) -> dict[str, str]:
    """{name: reason} for the machine sessions the rules remove.

    `rows` are (name, mtime, message count or None when unknown). At start-up
    (`on_demand=False`) only the TTL and the count backstop apply: per prefix, the newest
    `keep` sessions that survive the TTL stay (`keep=0`, like a TTL of 0, turns it off), the
    gateway's threads (mcp-gw-) counted apart from the other mcp- mirrors. On demand, test
    bursts go as well (never a gateway thread).
    User-named sessions are ignored whatever their age.
    """
    removals: dict[str, str] = {}
    by_prefix: dict[str, list[tuple[float, str]]] = {}
    small: list[tuple[float, str]] = []
    for name, mtime, messages in rows:
        prefix = machine_prefix(name)
        if prefix is None:
            continue
        if expired(mtime, now, ttl_days):
            removals[name] = TTL
            continue
        # The chat gateway's threads count apart from the other servers' mirrors, and are never
        # a burst: a sender's quick `/session new`s are a person's, not a script's.
        chat = name.lower().startswith(GATEWAY_PREFIX)
        by_prefix.setdefault(GATEWAY_PREFIX if chat else prefix, []).append((mtime, name))
        if messages is not None and messages <= BURST_MESSAGES and not chat:
            small.append((mtime, name))
    for entries in by_prefix.values() if keep > 0 else ():  # 0 turns the backstop off
        entries.sort(reverse=True)  # newest first; equal times by name, for a stable answer
        for _mtime, name in entries[keep:]:
            removals[name] = BACKSTOP
    if on_demand:
        for name in bursts(small):
            removals.setdefault(name, BURST)
    return removals


def bursts(entries: list[tuple[float, str]]) -> list[str]:
    """Names in any run of BURST_COUNT or more (mtime, name) entries spanning at most BURST_WINDOW."""
    entries = sorted(entries)
    marked: set[int] = set()
    end = 0
    for start in range(len(entries)):
        end = max(end, start)
        while end + 1 < len(entries) and entries[end + 1][0] - entries[start][0] <= BURST_WINDOW:
            end += 1
        if end - start + 1 >= BURST_COUNT:
            marked.update(range(start, end + 1))
    return [entries[i][1] for i in sorted(marked)]


def over_cap(entries: Iterable[tuple[float, int, str]], cap: int) -> list[str]:
    """The oldest of (mtime, size, key) entries to drop so that what stays fits in `cap` bytes."""
    ordered = sorted(entries, reverse=True)  # newest first
    total = 0
    dropped: list[str] = []
    for _mtime, size, key in ordered:
        total += size
        if total > cap:
            dropped.append(key)
    return dropped


def human_size(size: float) -> str:
    """1536 → '1.5 KB', 104857600 → '100 MB'."""
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            break
        size /= 1024
    shown = f"{size:.0f}" if unit == "B" else f"{size:.1f}".removesuffix(".0")
    return f"{shown} {unit}"


__all__ = ["human_size", "DELIVERY_KEEP",
    "BACKSTOP", "BURST", "DAY", "LOST_TEMP", "ORPHAN", "REASONS", "SIZE_CAP", "TTL",
    "bursts", "describe_age", "describe_days", "expired", "machine_prefix", "machine_sessions", "over_cap",
    "parse_days",
]
