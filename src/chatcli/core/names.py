"""Session names (SPEC §4 "Names"): what is allowed, and which prefixes belong to chatcli itself."""

from __future__ import annotations

import re
from collections.abc import Callable

TYPE_CHECKING = False  # typing itself is not imported at run time: start-up cost
if TYPE_CHECKING:
    import datetime

from chatcli.core.errors import UsageError

NAME_RE = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9._-]{0,127}")
AUTOSAVE_PREFIX = "autosave-"  # what a REPL keeps when it ends unbound
RESERVED_PREFIXES = (AUTOSAVE_PREFIX, "mcp-")
MIRROR_PREFIX = "mcp-"  # the rolling mirrors of the MCP server's and the ACP agent's live conversations
GATEWAY_PREFIX = MIRROR_PREFIX + "gw-"  # the chat gateway's: mcp-gw-<thread>, one per principal's thread
ALLOWED = (
    "1 to 128 characters: letters, digits, '-', '_' and '.' (no spaces), starting with a letter or digit, "
    "with no '..'"
)


def is_valid_name(name: str) -> bool:
    """Whether `name` may name a session file: what validate_name accepts, for callers that skip
    the others rather than refuse them."""
    return isinstance(name, str) and NAME_RE.fullmatch(name) is not None and ".." not in name


def validate_name(name: str) -> str:
    """Return `name` if it may name a session file, else raise a UsageError saying what is allowed."""
    if not is_valid_name(name):
        shown = name if isinstance(name, str) and len(name) <= 60 else f"{str(name)[:57]}..."
        raise UsageError(f"invalid session name {shown!r}: use {ALLOWED}")
    return name


def is_machine_name(name: str) -> bool:
    """Sessions chatcli creates itself (autosaves, MCP mirrors), in any letter case."""
    return name.lower().startswith(RESERVED_PREFIXES)


def validate_user_target(name: str) -> str:
    """A name the user may save, attach or fork to: valid and not reserved for chatcli."""
    validate_name(name)
    if is_machine_name(name):
        raise UsageError(
            f"'{name}' uses a prefix chatcli keeps for its own sessions ({', '.join(RESERVED_PREFIXES)}); "
            "choose another name"
        )
    return name


def autosave_name(now: datetime.datetime, taken: Callable[[str], bool]) -> str:
    """`autosave-YYYYMMDD-HHMMSS` in local time; `-2`, `-3`… keep two in the same second apart."""
    base = "autosave-" + now.strftime("%Y%m%d-%H%M%S")
    name, counter = base, 1
    while taken(name):
        counter += 1
        name = f"{base}-{counter}"
    return name


def is_trivial(history: list) -> bool:
    """Fewer than 2 non-system messages: not worth keeping automatically."""
    return sum(1 for message in history if message.role != "system") < 2
