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


def _is_when(text: str) -> bool:
    """`text` is a time as WHEN writes it (YYYY-MM-DD HH:MM)."""
    return (len(text) == 16 and text[4] == text[7] == "-" and text[10] == " " and text[13] == ":"
            and (text[:4] + text[5:7] + text[8:10] + text[11:13] + text[14:]).isdigit())


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
    """The listing of the sessions directory `root` as last rendered under `key`, brought up to
    date with the turns appended since (and saved so), while it holds; None when it must be
    formatted again."""
    from chatcli.store import listing_cache

    saved = listing_cache.read_rendered(root, key)
    if saved is None:
        return None
    text, appended = saved
    if appended:  # turns appended in place since: their rows, updated
        text = updated_listing(text.removesuffix("\n"), appended)
        if text is None:
            return None
        text += "\n"
        listing_cache.save_rendered(root, key, text)  # the next listing starts from here
    return text


def _count(messages: int) -> str:
    return "%d msgs" % messages if messages != 1 else "1 msg"


def updated_listing(text: str, appended: Sequence[tuple[str, int, int, int | None]]) -> str | None:
    """A plain listing (`format_listing`, no session marked) brought up to date with turns
    appended in place since it was made: their sessions' rows move to the top with their new
    count and time. No other row changes (an append changes nothing else), so 10,000 rows are
    not formatted again. None when a row is not found as expected (format it again)."""
    if not appended:
        return text
    lines = text.split("\n")
    latest: dict[str, tuple[int, int | None]] = {}
    for name, mtime_ns, _size, messages in appended:
        if not isinstance(name, str) or not isinstance(mtime_ns, int) or not isinstance(messages, int):
            return None
        latest[name] = (mtime_ns, messages)
    names = [line[3:].split(" ", 1)[0] for line in lines[1:]]
    width = max(map(len, names), default=0)
    titles: dict[str, str] = {}
    kept = [lines[0]]
    for name, line in zip(names, lines[1:]):
        if name in latest:
            when = line[3 + width + 14: 3 + width + 30]
            if line[3 + width: 3 + width + 2] != "  " or not _is_when(when):
                return None  # not the layout expected (a name with a space made the width wrong)
            titles[name] = line[3 + width + 32:]
        else:
            kept.append(line)
    if titles.keys() != latest.keys():
        return None
    fresh = [ROW % (" ", width, name, _count(messages), time.strftime(WHEN, time.localtime(mtime_ns // 10**9)),
                    titles[name])
             for name, (mtime_ns, messages) in sorted(latest.items(), key=lambda item: item[1][0], reverse=True)]
    return "\n".join([kept[0], *fresh, *kept[1:]])

