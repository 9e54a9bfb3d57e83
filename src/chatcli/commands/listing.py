"""The session listing as text: one formatter for /session list and `chatcli session list`."""

from __future__ import annotations

import time
from collections.abc import Sequence

from chatcli.core.retention import human_size
from chatcli.store.sessions import SessionInfo


def format_listing(infos: Sequence[SessionInfo], active: str | None) -> str:
    if not infos:
        return "No saved sessions."
    width = max(len(info.name) for info in infos)
    lines = [f"Sessions ({len(infos)}), newest first:"]
    minutes: dict[int, str] = {}  # formatting a time is the costly part of 10,000 rows
    row = " %s %-*s  %10s  %s  %s"
    for name, messages, mtime, size, title, problem, _transcript in infos:
        minute = int(mtime) // 60
        when = minutes.get(minute)
        if when is None:
            when = minutes[minute] = time.strftime("%Y-%m-%d %H:%M", time.localtime(minute * 60))
        if messages is None and not problem:  # encryption on: the listing knows sizes, not contents
            count, title = human_size(size), ""
        elif messages is None:
            count, title = "unreadable", problem
        else:
            count = "%d msgs" % messages if messages != 1 else "1 msg"
        lines.append(row % ("*" if name == active else " ", width, name, count, when, title))
    if any(info.messages is None and not info.problem for info in infos):
        lines.append("(Encryption is on: the listing shows sizes, not titles or message counts.)")
    return "\n".join(lines)

