"""The model's tools on the user's saved sessions (engine/tools.py lists them with the others):
`session_search` finds earlier conversations, `session_read` reads one from a position on, with
the positions the search's hits show. Both read through the conversation's store (a sealed one
with its key), never show a session the conversation may not see (Conversation.hidden: such a
name is answered as one that does not exist), and answer within CHATCLI_AGENT_OUTPUT_LIMIT.

Each takes the call's arguments and the conversation and returns (what the model is given, the
one line the user is told); what it cannot do is a ChatcliError whose text goes to the model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chatcli.core import agent as rules
from chatcli.core.errors import UsageError
from chatcli.core.names import validate_name
from chatcli.providers.base import Tool

if TYPE_CHECKING:
    from chatcli.core.messages import Message
    from chatcli.engine.conversation import Conversation

READ_COUNT = 10  # messages session_read returns when the model does not say
MAX_READ = 50  # messages one session_read returns at most

SEARCH = Tool("session_search", "Search the user's saved chatcli sessions (ranked, best first) for earlier "
              "conversations; returns session names and matching lines, each with its #position (session_read "
              "reads the messages there).",
              {"type": "object", "properties": {"query": {"type": "string", "description": "words to look for"}},
               "required": ["query"]})
READ = Tool("session_read", "Read messages of one of the user's saved chatcli sessions, from a #position on "
            "(the names and positions session_search shows).",
            {"type": "object", "properties": {
                "name": {"type": "string", "description": "the session's name, as session_search shows it"},
                "position": {"type": "integer", "description": "the first message to read (from 1), as "
                             "session_search numbers them"},
                "count": {"type": "integer", "description": f"how many messages ({READ_COUNT} by default, at most "
                          f"{MAX_READ})"}},
             "required": ["name", "position"]})


def search(args: dict, conv: Conversation) -> tuple[str, str]:
    query = args.get("query")
    if not isinstance(query, str) or not query.strip():
        raise UsageError("give a 'query' (words to look for)")
    from chatcli.engine import records  # the index and its store: only when the model searches

    groups = records.search_sessions(conv.settings, conv.store, query, sessions=5, hidden=conv.hidden)
    return records.format_session_hits(groups), (f"searched the saved sessions for {query!r}: {len(groups)} "
                                                 f"{'session' if len(groups) == 1 else 'sessions'}")


def read(args: dict, conv: Conversation) -> tuple[str, str]:
    """Messages `position` … of session `name`, as /session transcript show prints them, cut at a
    message boundary to fit the output limit (a single longer message: its start and end)."""
    name = args.get("name")
    if not isinstance(name, str) or not name.strip():
        raise UsageError("give a 'name' (a session name, as session_search shows it)")
    name = name.strip()
    first, count = _whole(args, "position", 1), min(_whole(args, "count", READ_COUNT), MAX_READ)
    from chatcli.engine import records

    history = _saved_history(conv, name)
    total = len(history)
    if first > total:
        raise UsageError(f"session '{name}' has {total:,} {'message' if total == 1 else 'messages'}; position "
                         f"{first:,} is past its end")
    blocks = records.show_blocks(records.Record(f"session '{name}'", None, history), first, count)
    wanted_last = first + len(blocks) - 1
    limit = conv.settings.agent_output_limit

    def head(last: int) -> str:
        shown = f"message #{first}" if last == first else f"messages #{first}–#{last}"
        return f"Session '{name}': {shown} of {total:,}\n\n"

    def tail(last: int, whole: bool, more: bool) -> str:  # said only when something was cut
        said = [] if whole else [f"#{last} alone is longer: its start and end are shown"]
        if more:
            said.append(f"call session_read with position {last + 1} for the rest")
        return f"\n\n[cut to fit {limit:,} characters (CHATCLI_AGENT_OUTPUT_LIMIT): {'; '.join(said)}]"

    room = max(limit - len(head(wanted_last)) - len(tail(wanted_last, False, True)), 120)
    kept, used = [], 0
    for block in blocks:
        if used + len(block) > room:
            break
        kept.append(block)
        used += len(block) + 2
    whole = bool(kept)
    if not whole:  # one message longer than the room: its start and its end
        kept = [rules.cap(blocks[0], room - 40)]
    last = first + len(kept) - 1
    cut = last < wanted_last or not whole
    text = head(last) + "\n\n".join(kept) + (tail(last, whole, last < wanted_last) if cut else "")
    shown = f"#{first}" if last == first else f"#{first}–#{last}"
    return text, f"read session '{name}' ({shown} of {total:,}{', cut to fit the output limit' if cut else ''})"


def _saved_history(conv: Conversation, name: str) -> list[Message]:
    """Session `name`'s messages as its file holds them (the positions session_search's index
    gives them). A session this conversation may not see is answered as one that is not there."""
    from chatcli.store.session_file import SessionNotFound

    validate_name(name)  # an invalid name is said so, whoever may see what
    unknown = UsageError(f"no session named '{name}' (session_search shows the names)")
    if conv.hidden is not None and conv.hidden(name):
        raise unknown
    try:
        data, _stamp = conv.store.load(name)
    except SessionNotFound:
        raise unknown from None
    return data.history


def _whole(args: dict, key: str, default: int) -> int:
    value = args.get(key)
    if value is None:
        return default
    if isinstance(value, str) and value.strip().isdigit():  # "12": a model's string for a number
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value) \
            or not 1 <= value < 2 ** 31:
        raise UsageError(f"{key} is a whole number from 1")
    return int(value)


__all__ = ["MAX_READ", "READ", "READ_COUNT", "SEARCH", "read", "search"]
