"""The session listing as text: one formatter for /session list and `chatcli session list`."""

from __future__ import annotations

import time

TYPE_CHECKING = False  # `session list`'s fast path imports this module: nothing it does not need
if TYPE_CHECKING:
    from collections.abc import Sequence

    from chatcli.store.sessions import SessionInfo


ROW = " %s %-*s  %10s  %s  %s"
WHEN = "%Y-%m-%d %H:%M"  # 16 characters


def rendered_key(private: bool) -> str:
    """What a saved rendering of the listing depends on besides the sessions: whether it shows
    contents (encryption off) and the local time zone its times are in."""
    return ("private:" if private else "plain:") + ",".join(
        map(str, (time.timezone, time.altzone, time.daylight, *time.tzname)))


def format_listing(infos: Sequence[SessionInfo], active: str | None) -> str:
    from chatcli.core.retention import human_size

    if not infos:
        return "No saved sessions."
    width = max(len(info.name) for info in infos)
    lines = [f"Sessions ({len(infos)}), newest first:"]
    minutes: dict[int, str] = {}  # formatting a time is the costly part of 10,000 rows
    for name, messages, mtime, size, title, problem, _transcript in infos:
        minute = int(mtime) // 60
        when = minutes.get(minute)
        if when is None:
            when = minutes[minute] = time.strftime(WHEN, time.localtime(minute * 60))
        if messages is None and not problem:  # encryption on: the listing knows sizes, not contents
            count, title = human_size(size), ""
        elif messages is None:
            count, title = "unreadable", problem
        else:
            count = _count(messages)
        lines.append(ROW % ("*" if name == active else " ", width, name, count, when, title))
    if any(info.messages is None and not info.problem for info in infos):
        lines.append("(Encryption is on: the listing shows sizes, not titles or message counts.)")
    return "\n".join(lines)


def saved_listing(root: str, key: str) -> str | None:
    """The listing of the sessions directory `root` as last rendered under `key`, while every
    session file is as it was then; None when it must be formatted again."""
    from chatcli.store import listing_cache

    return listing_cache.read_rendered(root, key)


def _count(messages: int) -> str:
    return "%d msgs" % messages if messages != 1 else "1 msg"
