"""Go ChatCLI's session format in the tests: the check of the session files a test leaves
against go_session.schema.json, and the record of which of them the test wrote itself."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import sys
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path

SCHEMA_PATH = Path(__file__).with_name("go_session.schema.json")
HISTORIES = ("chat_history", "agent_history", "coder_history", "shared_memory")
KEY_VARIABLES = ("CHATCLI_ENCRYPTION_KEY", "CHATCLI_NEW_ENCRYPTION_KEY")
PROBLEMS_SHOWN = 5  # per file: the first few say what is wrong; a thousand lines would not say more


# -- the schema -----------------------------------------------------------------------------------
@functools.cache
def schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())


def validator():
    """The schema's validator (jsonschema, draft 2020-12) with Go's idea of an integer: use it, not a
    stock Draft202012Validator, to ask whether Go ChatCLI reads a document."""
    return _validators()[0]


@functools.cache
def _validators():
    """(the document's validator, one message's validator). JSON Schema counts 2.0 as an integer;
    Go's int refuses it (and 1e3), so `integer` is redefined as a number parsed without fraction
    or exponent: the parsers give those as int, everything else as float."""
    from jsonschema import Draft202012Validator, validators

    checker = Draft202012Validator.TYPE_CHECKER.redefine("integer", lambda _, value: value.__class__ is int)
    go = validators.extend(Draft202012Validator, type_checker=checker)
    root = schema()
    message = {"$schema": root["$schema"], "$defs": root["$defs"], "$ref": "#/$defs/Message"}
    return go(root), go(message)


# What the fast path below accepts without asking the schema. It must accept only what the schema
# accepts (tests/test_go_format.py holds it to that): it saves validating every message of a long
# history with jsonschema: ~75 µs a message there, ~0.4 µs here.
_MESSAGE_FIELDS = {"role", "content", "meta", "tool_calls", "tool_call_id", "system_parts", "images", "is_error",
                   "error_code"}
_META_FIELDS = {"is_summary", "summary_of", "mode", "preserve_verbatim", "agent_feedback", "skill_names",
                "skill_collapsed"}
_CALL_FIELDS = {"id", "type", "name", "arguments", "raw"}
_META_TEXT = {"mode", "skill_names"}
_META_FLAGS = {"is_summary", "preserve_verbatim", "agent_feedback", "skill_collapsed"}
_INT64 = (-(2 ** 63), 2 ** 63 - 1)


def _foreign(key: str, fields: set[str]) -> bool:
    """Go ignores the key: it names none of the fields, even in another case (Go matches keys
    case-insensitively; casefold errs only towards a match, which sends the message to the schema)."""
    return key.casefold() not in fields


def _plain_meta(meta: dict) -> bool:
    for key, value in meta.items():
        kind = value.__class__
        if key in _META_TEXT:
            if kind is not str:
                return False
        elif key in _META_FLAGS:
            if kind is not bool:
                return False
        elif key == "summary_of":
            if kind is not int or not _INT64[0] <= value <= _INT64[1]:
                return False
        elif not _foreign(key, _META_FIELDS):
            return False
    return True


def _plain_call(call: object) -> bool:
    if call.__class__ is not dict or call.get("arguments").__class__ is not dict:
        return False
    for key in ("id", "type", "name"):
        if call.get(key).__class__ is not str:
            return False
    for key, value in call.items():
        if key == "raw":
            if value.__class__ is not str:
                return False
        elif key not in _CALL_FIELDS and not _foreign(key, _CALL_FIELDS):
            return False
    return True


def plain_message(message: object) -> bool:
    """A message in the shapes chatcli writes, with every field of the type Go reads."""
    if message.__class__ is not dict or message.get("role").__class__ is not str \
            or message.get("content").__class__ is not str:
        return False
    for key, value in message.items():
        if key == "role" or key == "content":
            continue
        if key == "meta":
            if value.__class__ is not dict or not _plain_meta(value):
                return False
        elif key == "tool_calls":
            if value.__class__ is not list or not all(map(_plain_call, value)):
                return False
        elif key == "tool_call_id" or key == "error_code":
            if value.__class__ is not str:
                return False
        elif key == "is_error":
            if value.__class__ is not bool:
                return False
        elif not _foreign(key, _MESSAGE_FIELDS):
            return False  # images, system_parts, or a field in another case: the schema says
    return True


def problems(document: object) -> list[str]:
    """What Go ChatCLI's decoder would refuse in a parsed session document, one line each
    ("chat_history[3].tool_calls[0].arguments is a string; Go ChatCLI reads map[string]any (an
    object)"); [] when it reads it."""
    whole, one = _validators()
    found = []
    if document.__class__ is dict:
        head, lists = dict(document), []
        for key in HISTORIES:
            if document.get(key).__class__ is list:
                head[key] = []
                lists.append((key, document[key]))
        found += [(tuple(error.absolute_path), error) for error in whole.iter_errors(head)]
        for key, messages in lists:
            for index, message in enumerate(messages):
                if not plain_message(message):
                    found += [((key, index, *error.absolute_path), error) for error in one.iter_errors(message)]
    else:
        found += [(tuple(error.absolute_path), error) for error in whole.iter_errors(document)]
    typed = {path for path, error in found if error.validator == "type"}
    lines = []
    for path, error in sorted(found, key=lambda item: [(part.__class__ is str, part) for part in item[0]]):
        if error.validator == "type" or path not in typed:  # "a string" says all; "below 2" adds nothing
            lines += [line for line in _describe(path, error) if line not in lines]
    return lines


def _describe(path: tuple, error) -> list[str]:
    where, go = _where(path), error.schema.get("x-go-type", "")
    if error.validator == "required":
        fields = error.schema.get("properties", {})
        return [f'{where} has no "{name}"; Go ChatCLI always writes it, as {_go_type(fields.get(name, {}))}, and '
                "reads its absence as empty" for name in error.validator_value if name not in error.instance]
    value = error.instance
    if error.validator == "pattern":
        return [f"{where} is a string that is not padded base64; Go ChatCLI reads {go}"]
    if error.validator in ("type", "minimum", "maximum"):
        return [f"{where} is {_what(value)}; Go ChatCLI reads {go}"]
    return [f"{where}: {error.message}; Go ChatCLI reads {go}"]


def _go_type(subschema: dict) -> str:
    ref = subschema.get("$ref", "")
    if ref.startswith("#/$defs/"):
        subschema = schema()["$defs"][ref[len("#/$defs/"):]]
    return subschema.get("x-go-type", "?")


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _where(path: Iterable) -> str:
    text = ""
    for part in path:
        if part.__class__ is int:
            text += f"[{part}]"
        elif _NAME.fullmatch(part):
            text += f".{part}" if text else part
        else:
            text += f"[{json.dumps(part, ensure_ascii=False)}]"
    return text or "the document"


def _what(value: object) -> str:
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return f"a number ({value!r})"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


# -- the files a test leaves ------------------------------------------------------------------------
def keys_of(environments: Iterable[Mapping]) -> list[bytes]:
    """The master keys named in these environments, each once."""
    from chatcli.config.paths import encryption_key
    from chatcli.core.errors import ConfigError

    keys = []
    for env in environments:
        for variable in KEY_VARIABLES:
            try:
                key = encryption_key(env, variable)
            except ConfigError:
                continue  # a test of a malformed key: nothing was sealed with it
            if key is not None and key not in keys:
                keys.append(key)
    return keys


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


def check_sessions(sessions: Path, keys: list[bytes], exempt=lambda name, path, data: False) -> list[str]:
    """One line per problem of each session file in `sessions` that Go ChatCLI would refuse.

    Files chatcli could never have written as they are, and so cannot be its writing, are left
    out: anything but a regular file (a symbolic link is not followed), a sealed file none of
    `keys` opens (a wrong-key test), and a file that is not JSON (malformed on purpose, or an
    append a crash cut short). `exempt(name, path, raw bytes)` leaves out others (what the test
    planted)."""
    import orjson

    from chatcli.store.home import session_named
    from chatcli.store.seal import SealError, is_sealed, sealer_for
    from chatcli.store.session_file import read_regular

    try:
        entries = sorted(os.scandir(sessions), key=lambda entry: entry.name)
    except OSError:  # no sessions directory, or not a directory
        return []
    lines = []
    for entry in entries:
        name = session_named(entry.name)
        if name is None or not entry.is_file(follow_symlinks=False):
            continue
        try:
            raw, _ = read_regular(Path(entry.path))
        except OSError:
            continue
        if exempt(name, entry.path, raw):
            continue
        if is_sealed(raw):
            for key in keys:
                try:
                    raw = sealer_for(key).open_session(raw, name, f"session '{name}'")[0]
                    break
                except SealError:
                    continue
            else:
                continue
        try:
            document = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        found = problems(document)
        lines += [f"session {entry.name}: {line}" for line in found[:PROBLEMS_SHOWN]]
        if len(found) > PROBLEMS_SHOWN:
            lines.append(f"session {entry.name}: … and {len(found) - PROBLEMS_SHOWN} more")
    return lines


# -- what the test process wrote ----------------------------------------------------------------------
class SessionWrites:
    """Which session files the test process wrote itself, seen through an audit hook (sys.addaudithook):
    a file a test plants (malformed, a newer version, another program's shape) is not chatcli's
    writing, and chatcli never overwrites a file it cannot read, so it is left as planted. Such a
    file is checked again only once chatcli has changed it since: rewritten in this process (a
    rename by chatcli's code), or found changed after chatcli had its turn (its digest is taken
    when chatcli next opens a session file in this process or a process is started). So a file
    planted while a chatcli process already runs, and rewritten by it, still counts as planted.

    Who wrote is the nearest frame of the tests' or chatcli's own code: the tests' helpers and fakes
    plant, chatcli's store writes. Other processes are chatcli (the tests start no other writer of
    session files outside a private mount). The hook also collects the CHATCLI_HOME and keys of
    the environments processes are started with (a test often runs chatcli with a copy of `env`).
    """

    _EVENTS = frozenset({"open", "os.rename", "os.link", "os.symlink", "os.truncate", "os.remove",
                         "subprocess.Popen", "os.posix_spawn", "os.fork", "os.forkpty", "os.system"})

    def __init__(self, tests_dir: Path, chatcli_dir: Path) -> None:
        self._tests = str(tests_dir) + os.sep
        self._chatcli = str(chatcli_dir) + os.sep
        self._inside = threading.local()
        self.active = False
        self.planted: dict[str, bytes | None] = {}  # real path → its digest once chatcli could act, else None
        self.environments: list[Mapping] = []

    def start(self) -> None:
        self.planted, self.environments, self.active = {}, [], True

    def stop(self) -> None:
        self.active = False

    def as_planted(self, path: str, raw: bytes) -> bool:
        """The file at `path` (holding `raw`) is as the test process wrote it."""
        real = _real(path)
        if real not in self.planted:
            return False
        digest = self.planted[real]
        return digest is None or digest == _digest(raw)

    # -- the hook ------------------------------------------------------------------------------------
    def __call__(self, event: str, args: tuple) -> None:
        if event not in self._EVENTS or not self.active or getattr(self._inside, "busy", False):
            return
        self._inside.busy = True  # our own reads raise events too
        try:
            self._see(event, args)
        finally:
            self._inside.busy = False

    def _see(self, event: str, args: tuple) -> None:
        if event == "open":
            path, _, flags = args
            if not isinstance(path, (str, bytes, os.PathLike)) or not _in_sessions(path):
                return
            self._touched(path, writing=bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_TRUNC)))
        elif event in ("os.rename", "os.link"):
            source, target = args[0], args[1]
            if isinstance(source, (str, bytes, os.PathLike)) and _is_session(source):
                self.planted.pop(_real(source), None)
            if isinstance(target, (str, bytes, os.PathLike)) and _in_sessions(target):
                self._touched(target, writing=True)
        elif event in ("os.symlink", "os.truncate"):
            path = args[1] if event == "os.symlink" else args[0]
            if isinstance(path, (str, bytes, os.PathLike)) and _in_sessions(path):
                self._touched(path, writing=True)
        elif event == "os.remove":
            if isinstance(args[0], (str, bytes, os.PathLike)) and _is_session(args[0]):
                self.planted.pop(_real(args[0]), None)
        else:  # a process starts: chatcli's turn
            env = args[3] if event == "subprocess.Popen" else args[2] if event == "os.posix_spawn" else None
            if isinstance(env, Mapping):
                self.environments.append(dict(env))
            self._settle()

    def _touched(self, path, writing: bool) -> None:
        if self._by_chatcli():
            self._settle()
            if writing and _is_session(path):
                self.planted.pop(_real(path), None)
        elif writing and _is_session(path):
            self.planted[_real(path)] = None

    def _by_chatcli(self) -> bool:
        frame = sys._getframe(1)
        while frame is not None:
            filename = frame.f_code.co_filename
            if filename.startswith(self._chatcli):
                return True
            if filename.startswith(self._tests) and filename != __file__:
                return False
            frame = frame.f_back
        return False

    def _settle(self) -> None:
        """chatcli may act now: what the test wrote is complete, so take its digest."""
        for path, digest in list(self.planted.items()):
            if digest is None:
                try:
                    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                except OSError:
                    self.planted[path] = b"(not a file)"
                    continue
                try:
                    with open(fd, "rb", closefd=False) as handle:
                        self.planted[path] = _digest(handle.read())
                finally:
                    os.close(fd)


def _is_session(path) -> bool:
    text = os.fsdecode(path)
    name = os.path.basename(text)
    return name.endswith(".json") and not name.startswith(".") and _in_sessions(text)


def _in_sessions(path) -> bool:
    text = os.fsdecode(path)
    # Every module imported opens a file: most paths are dismissed by the first test.
    return "sessions" in text and os.path.basename(os.path.dirname(os.path.abspath(text))) == "sessions"


def _real(path) -> str:
    """The path with its directory resolved (the file itself may be a link, never followed)."""
    text = os.path.abspath(os.fsdecode(path))
    return os.path.join(os.path.realpath(os.path.dirname(text)), os.path.basename(text))


__all__ = ["SCHEMA_PATH", "SessionWrites", "check_sessions", "keys_of", "plain_message", "problems", "schema",
           "validator"]
