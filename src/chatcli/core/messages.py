"""The message value shared by every layer, and its JSON form (SPEC §3)."""

from __future__ import annotations

TYPE_CHECKING = False  # typing itself is not imported at run time: start-up cost
if TYPE_CHECKING:
    from typing import Any

ROLES = ("user", "assistant", "system", "tool")

# Keys this class models; every other key of a message dict is carried in `extra`
# untouched, so fields written by other tools (images, is_error, …) are never dropped.
_KNOWN = ("role", "content", "meta", "tool_calls", "tool_call_id")


class Message:
    """One message. A plain slotted class rather than a dataclass: a 100,000-message session
    builds 100,000 of these on load, and `meta`/`extra` dicts are only made when touched."""

    __slots__ = ("role", "content", "_meta", "tool_calls", "tool_call_id", "_extra")

    def __init__(
        self,
        role: str,
        content: str = "",
        meta: dict[str, Any] | None = None,
        tool_calls: list[dict[str, Any]] | None = None,
        tool_call_id: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        self.role = role
        self.content = content
        self._meta = meta
        # Held (and so written) in the stored shape, whatever shape the caller had them in.
        self.tool_calls = stored_calls(tool_calls) if tool_calls else tool_calls
        self.tool_call_id = tool_call_id
        self._extra = extra

    @property
    def meta(self) -> dict[str, Any]:
        if self._meta is None:
            self._meta = {}
        return self._meta

    @meta.setter
    def meta(self, value: dict[str, Any]) -> None:
        self._meta = value

    @property
    def is_summary(self) -> bool:
        """Made by compaction (SPEC §3 meta.is_summary); reads without creating a meta dict."""
        return bool(self._meta and self._meta.get("is_summary"))

    @property
    def extra(self) -> dict[str, Any]:
        if self._extra is None:
            self._extra = {}
        return self._extra

    @extra.setter
    def extra(self, value: dict[str, Any]) -> None:
        self._extra = value

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Message":
        """Build from a parsed JSON object; the object's own dicts are kept, not copied."""
        if data.__class__ is not dict:
            raise ValueError("a message must be an object with a string 'role'")
        role = data.get("role")
        if role.__class__ is not str:
            raise ValueError("a message must be an object with a string 'role'")
        content = data.get("content")
        if content.__class__ is str:
            # The common cases, {"role", "content"} and {"role", "content", "meta"}: the size says
            # no other key is there, because these are.
            size = len(data)
            if size == 2:
                return cls(role, content)
            if size == 3:
                meta = data.get("meta")
                if meta.__class__ is dict:
                    return cls(role, content, meta)
        elif "content" not in data:
            content = ""
        tool_calls, tool_call_id = data.get("tool_calls"), data.get("tool_call_id")
        if (tool_calls is not None or (tool_call_id is not None and tool_call_id.__class__ is not str)
                or (content is not None and content.__class__ is not str)) \
                and field_problem(data):  # the checks, only where a field is not the plain shape
            raise ValueError(field_problem(data))
        extra = {k: v for k, v in data.items() if k not in _KNOWN}
        if content.__class__ is not str:
            # Multi-part content (a list of parts) or null: keep the original to write back,
            # and use its text for display and requests.
            if content is not None:
                extra["content"] = content
            content = _text_of(content)
        meta = data.get("meta")
        if meta is not None and meta.__class__ is not dict:
            extra["meta"] = meta  # not ours to interpret; written back as it was
            meta = None
        return cls(role, content, meta, tool_calls, tool_call_id, extra or None)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form; fields kept from the original (including a multi-part content) win."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self._meta:
            out["meta"] = dict(self._meta)
        if self.tool_calls is not None:
            out["tool_calls"] = self.tool_calls
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self._extra:
            out.update(self._extra)
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Message):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    __hash__ = None  # mutable value

    def __repr__(self) -> str:
        return f"Message({self.to_dict()!r})"


class History(list):
    """The live history: a list that counts every change other than appending (`version`), so
    the transcript journal can tell "only grew" from "rewritten" without comparing it all.
    Messages are values: code that changes one replaces it in the list, which counts."""

    __slots__ = ("version",)

    def __init__(self, iterable=()) -> None:
        super().__init__(iterable)
        self.version = 0

    def _changed(name):  # noqa: N805 - builds the counting wrappers below
        method = getattr(list, name)

        def changed(self, *args):
            self.version += 1
            return method(self, *args)

        changed.__name__ = name
        return changed

    for _name in ("__setitem__", "__delitem__", "__imul__", "insert", "pop", "remove", "clear", "sort",
                  "reverse"):
        locals()[_name] = _changed(_name)
    del _name, _changed


def well_formed(text: str) -> str:
    """`text` with any lone UTF-16 surrogate (a JSON `"\\ud800"`, a byte of a command line that
    is not UTF-8) replaced by U+FFFD: such a character cannot be written as UTF-8, so a session
    holding one could not be written at all. Text that is already well formed is returned as it is."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def shared_prefix(left: list[Message], right: list[Message]) -> int:
    """How many leading messages two histories have in common."""
    count = 0
    for a, b in zip(left, right, strict=False):  # stops at the shorter one
        if a is not b and (a.role != b.role or a.content != b.content or a != b):
            break
        count += 1
    return count


def call_function(call: dict) -> dict:
    """The part of a stored tool call that names the function and holds its arguments: the
    call itself in the v2 shape ({id, type, name, arguments}), its `function` in the Chat
    Completions shape that older files and other tools write."""
    function = call.get("function")
    return function if isinstance(function, dict) else call


# Tool calls are stored in Go ChatCLI's shape (its models.ToolCall): {"id", "type", "name",
# "arguments": an object, "raw": text}, so a session chatcli writes stays readable by the seed's
# program, whose decoder refuses the whole file when `arguments` is a string. What the model
# wrote that is not a JSON object (broken JSON, a bare list) is kept verbatim in `raw`, with
# `arguments` an empty object. Files may also hold chatcli's earlier shape (`arguments` as JSON
# text) or the Chat Completions shape ({"function": {"name", "arguments"}}); every reader below
# accepts all three, and `stored_call` turns any of them into Go's. Providers convert on the wire.


def parse_arguments(text: str) -> dict | None:
    """The object a tool call's argument text holds, or None when it holds no JSON object (text
    with NaN or Infinity holds none: JSON has no such numbers, and they would be written back as
    null, changing what the model wrote)."""
    if not text.strip():
        return {}
    import json

    try:
        value = json.loads(text, parse_constant=refuse_json_constant)
    except ValueError:
        return None
    return value if value.__class__ is dict and not holds_infinite_number(value) else None


def refuse_json_constant(name: str) -> None:
    """A `parse_constant` for the json module: NaN and Infinity are not JSON (ValueError)."""
    raise ValueError(f"{name} is not JSON")


def holds_infinite_number(value: Any) -> bool:
    """Whether a parsed value holds a float too large for a double (1e400 parses as infinity)."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = item.__class__
        if kind is dict:
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
        elif kind is float and (item == _INFINITY or item == -_INFINITY):
            return True
    return False


_INFINITY = float("inf")


def new_call(call_id: str, name: str, arguments: str) -> dict:
    """A tool call as the model made it (its argument text), in the stored shape."""
    parsed = parse_arguments(arguments)
    call = {"id": call_id, "type": "function", "name": name, "arguments": parsed if parsed is not None else {}}
    if parsed is None:
        call["raw"] = arguments
    return call


def stored_call(call: dict) -> dict:
    """Any readable shape of a tool call in the stored (Go) shape; the call itself when it is
    already so, other fields it carries (a `result`, say) kept."""
    function = call.get("function")
    arguments = call.get("arguments")
    if not isinstance(function, dict) and (arguments.__class__ is dict or (arguments is None and "raw" in call)):
        return call
    source = function if isinstance(function, dict) else call
    out = {key: value for key, value in call.items() if key != "function"}
    out["type"] = call.get("type") or "function"
    out["name"] = source.get("name") if source.get("name") is not None else ""
    out.setdefault("id", "")
    arguments = source.get("arguments")
    if arguments.__class__ is dict:
        out["arguments"] = arguments
    else:
        text = arguments if isinstance(arguments, str) else ("" if arguments is None else _json_text(arguments))
        parsed = parse_arguments(text)
        out["arguments"] = parsed if parsed is not None else {}
        if parsed is None:
            out["raw"] = text
    return out


def stored_calls(calls: list[dict]) -> list[dict]:
    """`stored_call` over a message's calls: the same list when every call is in the stored shape
    already (so a reader can tell a file that needs rewriting), a new one otherwise."""
    out = None
    for index, call in enumerate(calls):
        changed = stored_call(call)
        if changed is not call:
            if out is None:
                out = list(calls)
            out[index] = changed
    return calls if out is None else out


def call_name(call: dict) -> str:
    """The function a stored tool call names, whatever its shape."""
    return str(call_function(call).get("name") or "")


def call_arguments(call: dict) -> dict:
    """A tool call's arguments as an object (what Anthropic's `tool_use.input` carries); {} when
    the model wrote something that is not a JSON object."""
    arguments = call_function(call).get("arguments")
    if arguments.__class__ is dict:
        return arguments
    if isinstance(arguments, str):
        return parse_arguments(arguments) or {}
    return {}


def call_arguments_text(call: dict) -> str:
    """A tool call's arguments as JSON text (what the Chat Completions wire carries): what the
    model wrote when it was not an object (`raw`), else the object written out."""
    function = call_function(call)
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        return arguments or "{}"
    raw = call.get("raw")
    if isinstance(raw, str) and raw and not arguments:
        return raw
    return _json_text(arguments if arguments is not None else {})


def _json_text(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)


def call_chars(message: Message) -> int:
    """The characters a message sends beyond its text: its tool calls' names and arguments (a
    write_file call carries a whole file)."""
    total = 0
    for call in message.tool_calls or ():
        if call.__class__ is dict:
            function = call_function(call)
            total += len(str(function.get("name") or "")) + len(call_arguments_text(call))
    return total


def field_problem(data: dict[str, Any]) -> str | None:
    """What is wrong with the fields of a message dict that chatcli acts on, or None. A file saying
    `"tool_calls": 5` is refused when read, not turned into a failure of every later turn."""
    content, tool_calls, tool_call_id = data.get("content"), data.get("tool_calls"), data.get("tool_call_id")
    if tool_calls is not None:
        if tool_calls.__class__ is not list:
            return f"'tool_calls' must be a list of objects, not {_shape(tool_calls)}"
        for index, call in enumerate(tool_calls):
            if call.__class__ is not dict:
                return f"'tool_calls' must be a list of objects, not {_shape(tool_calls)}"
            if (call.get("name").__class__ is str and call.get("arguments").__class__ is dict
                    and call.get("id").__class__ is str and "raw" not in call and "function" not in call):
                continue  # the stored shape, as chatcli writes it: one look at each field
            problem = _call_problem(call)
            if problem:
                return f"tool_calls[{index}]{problem}"
    if tool_call_id is not None and tool_call_id.__class__ is not str:
        return f"'tool_call_id' must be a string, not {_shape(tool_call_id)}"
    if content is not None and content.__class__ is not str and content.__class__ is not list:
        return f"'content' must be a string or a list of parts, not {_shape(content)}"
    return None


def _call_problem(call: dict[str, Any]) -> str | None:
    """What is wrong with one tool call's shape, or None: the id must be text (or absent), and the
    function named as Go ChatCLI and chatcli store it (a string `name`) or as Chat Completions does
    (a `function` object with a string `name`). A call of any other shape is sent as one that an
    OpenAI-compatible API refuses (HTTP 400) at every later turn, so the file is refused instead."""
    name, arguments = call.get("name"), call.get("arguments")
    if "id" in call and call["id"].__class__ is not str:
        return f": 'id' must be a string, not {_shape(call['id'])}"
    function = call.get("function")
    if function.__class__ is dict:
        if function.get("name").__class__ is not str:
            return f": 'function' must have a string 'name', not {_shape(function.get('name'))}"
        inner = function.get("arguments")
        if "arguments" in function and inner.__class__ is not str and inner.__class__ is not dict:
            return f": the function's 'arguments' must be a string or an object, not {_shape(inner)}"
        return None
    if name.__class__ is not str:
        return " must name its function: a string 'name', or a 'function' object with a string 'name'"
    if arguments is not None and arguments.__class__ is not dict and arguments.__class__ is not str:
        return f": 'arguments' must be an object, a string or null, not {_shape(arguments)}"
    if "raw" in call and call["raw"].__class__ is not str:
        return f": 'raw' must be a string, not {_shape(call['raw'])}"
    return None


_NOTHING = object()


def _shape(value: Any) -> str:
    """How a JSON value of the wrong type is named in an error: 'a number (5)'."""
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list",
             dict: "an object"}
    if value.__class__ is list:
        odd = next((item for item in value if item.__class__ is not dict), _NOTHING)
        return "a list" if odd is _NOTHING else f"a list holding {names.get(odd.__class__, 'null')}"
    shown = repr(value) if value.__class__ in (bool, int, float) else ""
    return names.get(value.__class__, "null") + (f" ({shown[:20]})" if shown else "")


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, list):
        parts = [part.get("text", "") if isinstance(part, dict) else part for part in content]
        return "\n".join(str(part) for part in parts if part)
    return str(content)


_BIG = float(2 ** 63)


def holds_inexact_number(value: Any) -> bool:
    """Whether a parsed JSON value holds a float that may be an integer too big for 64 bits that
    a fast parser (orjson) turned into a float: such a document is parsed again exactly, so a
    field chatcli does not know comes back as the very number it was (SPEC §4). A loop, not
    recursion: a value nested a thousand deep is walked like any other."""
    stack = [value]
    pop, extend = stack.pop, stack.extend
    while stack:
        item = pop()
        kind = item.__class__
        if kind is dict:
            extend(item.values())
        elif kind is list:
            extend(item)
        elif kind is float and (item >= _BIG or item <= -_BIG) and item.is_integer():
            return True
    return False


def dict_holds_inexact_number(message: dict[str, Any]) -> bool:
    """`holds_inexact_number` over a message dict, its text fields skipped without a walk."""
    for value in message.values():
        kind = value.__class__
        if kind is not str and kind is not int and value is not None and holds_inexact_number(value):
            return True
    return False


def message_holds_inexact_number(message: Message) -> bool:
    """`holds_inexact_number` over what a message keeps besides its text (meta, tool calls, extra
    fields): the common message ({role, content}) costs two attribute reads."""
    meta, extra, calls = message._meta, message._extra, message.tool_calls
    return bool((meta and dict_holds_inexact_number(meta)) or (extra and dict_holds_inexact_number(extra))
                or (calls and any(call.__class__ is not dict or dict_holds_inexact_number(call) for call in calls)))
