"""A session search's hits as the user sees them: grouped by session, ranked, and shown as text.

One implementation for every way a search is answered: the whole search (engine.records) and
`chatcli session search`'s fast path (cli/quick_search.py), which imports this module and
little else.
"""

from __future__ import annotations

import time
from collections import namedtuple

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

SessionHits = namedtuple("SessionHits", "name mtime score hits")


def grouped(hits: Iterable, mtimes: dict[str, float], sessions: int, per_session: int,
            hidden: Callable[[str], bool] | None = None) -> list[SessionHits]:
    """The index's hits (best first: source, pos, role, snippet, score) as the best `sessions`
    sessions, each with its best `per_session` hits; equal scores go to the session changed last
    (`mtimes`: {name: seconds}). `hidden`: sessions the searcher may not see."""
    groups: dict[str, SessionHits] = {}
    for hit in hits:
        if hidden is not None and hidden(hit.source):
            continue
        group = groups.get(hit.source)
        if group is None:
            group = groups[hit.source] = SessionHits(hit.source, mtimes.get(hit.source, 0.0), hit.score, [])
        if len(group.hits) < per_session:
            group.hits.append((hit.pos, hit.role, hit.snippet))
    return sorted(groups.values(), key=lambda g: (round(g.score, 6), -g.mtime))[:sessions]


def elided(snippet: str) -> str:
    """A hit's snippet between ellipses: the index marks where it cut the text with one already,
    and a mark is not doubled."""
    text = snippet.strip()
    return ("" if text.startswith("…") else "…") + text + ("" if text.endswith("…") else "…")


def format_session_hits(groups: list[SessionHits]) -> str:
    """The ranked hits of a session search, as /session search, `chatcli session search` and the
    model's session_search tool show them."""
    if not groups:
        return "No saved session matches."
    lines = []
    for group in groups:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(group.mtime)) if group.mtime else ""
        lines.append(f"{group.name}  ({when})")
        lines += [f"  #{pos} {role} {elided(snippet)}" for pos, role, snippet in group.hits]
    return "\n".join(lines)


__all__ = ["SessionHits", "elided", "format_session_hits", "grouped"]
