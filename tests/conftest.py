"""Shared fixtures: a private CHATCLI_HOME and HOME per test, the real `chatcli` executable, fake servers."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fakes import FakeModelServer, FakeProvider
from go_format import SessionWrites, check_sessions, keys_of

# pytester runs the Go-format check itself on planted tests (tests/test_go_format.py).
pytest_plugins = ("pytester",)

CHATCLI = shutil.which("chatcli", path=str(Path(sys.executable).parent)) or "chatcli"
# Variables of the outer environment that would change what chatcli does.
_SCRUB = ("OPENAI_", "ANTHROPIC_", "OLLAMA_", "LLM_", "CHATCLI_", "HISTORY_", "NO_COLOR", "HTTP_PROXY",
          "HTTPS_PROXY", "http_proxy", "https_proxy")


# The real local model computes on one core per test (CHATCLI_LOCAL_THREADS below); its tests
# go to two of the parallel workers, in turn, so that at most two models run at once on a
# 2-core machine and the terminals and servers of the other tests are not starved.
LOCAL_MODEL_WORKERS = 2


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers", "foreign_sessions(*names): the test plants session files Go ChatCLI cannot read on purpose, and "
                   "chatcli keeps what it cannot interpret when it writes them again; the Go-format check leaves out "
                   "the sessions named (all of the test's when none is)")


def pytest_collection_modifyitems(items) -> None:
    local = [item for item in items if item.nodeid.startswith("tests/test_local_model.py::")]
    for index, item in enumerate(local):
        item.add_marker(pytest.mark.xdist_group(f"local-model-{index % LOCAL_MODEL_WORKERS}"))


_session_writes: SessionWrites | None = None


def session_writes() -> SessionWrites:
    """The one audit hook of this process (a hook cannot be removed: it is installed once, and
    listens only while a test runs)."""
    global _session_writes
    if _session_writes is None:
        import chatcli

        _session_writes = SessionWrites(Path(__file__).parent, Path(chatcli.__file__).parent)
        sys.addaudithook(_session_writes)
    return _session_writes


@pytest.fixture(autouse=True)
def go_readable_sessions(request):
    """Every session file chatcli leaves in a test's CHATCLI_HOME is one Go ChatCLI v1.188 reads
    (it shares ~/.chatcli/sessions with chatcli, and its decoder refuses a whole file for one field
    of another type): checked against tests/go_session.schema.json once the test and its other
    fixtures are done (this fixture is set up first, so torn down last).

    Left out: what the test planted itself and chatcli did not write again (see
    go_format.SessionWrites), sealed files none of the test's keys opens, files that are no JSON,
    symbolic links, and the sessions a `foreign_sessions` mark names."""
    marker = request.node.get_closest_marker("foreign_sessions")
    if "home" not in request.fixturenames or (marker is not None and not marker.args):
        yield
        return
    writes = session_writes()
    writes.start()
    try:
        yield
    finally:
        writes.stop()
    from chatcli.config.paths import chatcli_home_text

    values = request.node.funcargs
    if "home" not in values:  # a fixture's setup failed or skipped: nothing of the test ran
        return
    environments = [value for value in values.values() if isinstance(value, dict) and "CHATCLI_HOME" in value]
    environments += writes.environments
    homes = {os.path.realpath(values["home"] / ".chatcli")}
    homes.update(os.path.realpath(chatcli_home_text(env)) for env in environments)
    inside = os.path.realpath(values["tmp_path"]) + os.sep  # a test's own homes; never the user's
    foreign = set(marker.args) if marker is not None else set()
    keys = keys_of(environments)
    lines = []
    for chatcli_home in sorted(home for home in homes if home.startswith(inside)):
        lines += check_sessions(Path(chatcli_home) / "sessions", keys,
                                lambda name, path, raw: name in foreign or writes.as_planted(path, raw))
    if lines:
        pytest.fail("session files not in Go ChatCLI v1.188's format (tests/go_session.schema.json):\n  "
                    + "\n  ".join(lines), pytrace=False)


@pytest.fixture
def appends_at_any_size(monkeypatch) -> None:
    """Turns appended in place to session files of any size, in this process: a small plaintext
    session is otherwise written whole at every turn (store.sessions.WHOLE_BELOW), and tests of
    the append itself use small sessions."""
    monkeypatch.setattr("chatcli.store.sessions.WHOLE_BELOW", 0)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """The user's home for this test; CHATCLI_HOME is <home>/.chatcli."""
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


@pytest.fixture
def env(home: Path, tmp_path: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUB)}
    clean.update(
        HOME=str(home),
        CHATCLI_HOME=str(home / ".chatcli"),
        PROMPT_TOOLKIT_NO_CPR="1",
        TERM="xterm-256color",
        LANG="C.UTF-8",
        COLUMNS="100",
        LINES="40",
        # The tests run in parallel workers: a local model on one core leaves the others to them.
        CHATCLI_LOCAL_THREADS="1",
        # The local model answers the same conversation the same way in every run (a new seed
        # for every answer otherwise): the tests that need a long answer to interrupt get one.
        CHATCLI_LOCAL_SEED="1",
    )
    return clean


@pytest.fixture(scope="session")
def pg_server():
    """A real PostgreSQL server for this worker (tests/pg_server.py), started when a test first
    asks for one and stopped when the worker ends."""
    from pg_server import Server

    server = Server().start()
    yield server
    server.stop()


@pytest.fixture
def pg_dsn(pg_server, request) -> str:
    """A PostgreSQL address for this test alone: a schema of its own on the worker's server,
    chosen by the address's search_path (as a user would share one database between stores)."""
    import re

    import psycopg

    schema = "t_" + re.sub(r"\W", "_", request.node.name.lower())[:40] + "_" + os.urandom(3).hex()
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    return f"{pg_server.dsn}?options=-csearch_path%3D{schema}"


@pytest.fixture(params=["files", "postgresql"])
def any_store_env(request, env) -> dict[str, str]:
    """`env`, with its sessions in files under CHATCLI_HOME, then on a PostgreSQL server."""
    if request.param == "postgresql":
        env = dict(env, CHATCLI_STORE=request.getfixturevalue("pg_dsn"))
    return env


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A working directory outside any git repository."""
    path = tmp_path / "work"
    path.mkdir()
    return path


@pytest.fixture
def openai_server():
    with FakeModelServer("openai") as server:
        yield server


@pytest.fixture
def anthropic_server():
    with FakeModelServer("anthropic") as server:
        yield server


@pytest.fixture(params=["openai", "anthropic"])
def tool_server(request, env):
    """A fake server of each provider that calls tools, with `env` pointed at it (model 'm',
    plain text): the test runs once per wire format."""
    with FakeModelServer(request.param) as server:
        prefix = request.param.upper()
        env.update({"LLM_PROVIDER": request.param, f"{prefix}_API_KEY": "x", f"{prefix}_BASE_URL": server.base_url,
                    f"{prefix}_MODEL": "m", "NO_COLOR": "1"})
        yield server


@pytest.fixture
def openai_env(env, openai_server) -> dict[str, str]:
    env.update(LLM_PROVIDER="openai", OPENAI_API_KEY="x", OPENAI_BASE_URL=openai_server.base_url, OPENAI_MODEL="m")
    return env


@pytest.fixture
def repl_env(openai_env) -> dict[str, str]:
    """The environment of a REPL talking to the fake OpenAI-compatible server, in plain text."""
    openai_env["NO_COLOR"] = "1"
    return openai_env


@pytest.fixture
def fake_model() -> FakeProvider:
    """The model, in process (engine tests): see FakeProvider."""
    return FakeProvider()


@pytest.fixture
def settings(env):
    """Settings of a conversation whose model is `fake_model` (the provider named is never called)."""
    from chatcli.config.settings import Settings

    return Settings.load({**env, "LLM_PROVIDER": "openai", "OPENAI_API_KEY": "x", "OPENAI_MODEL": "m"})


@pytest.fixture
def make_conversation(env, fake_model):
    """A Conversation in this process on the test's CHATCLI_HOME, answered by `fake_model`;
    keyword arguments are environment variables (CHATCLI_SESSION_WRITETHROUGH="off", …)."""
    from chatcli.config.settings import Settings
    from chatcli.engine.conversation import Conversation

    def make(journal: bool = True, **variables: str) -> Conversation:
        settings = Settings.load({**env, "LLM_PROVIDER": "openai", "OPENAI_API_KEY": "x", "OPENAI_MODEL": "m",
                                  **variables})
        return Conversation(settings, registry=fake_model.registry(), journal=journal)

    return make


@pytest.fixture
def sessions_dir(home: Path) -> Path:
    return home / ".chatcli" / "sessions"


def wait_until(condition, timeout: float = 15.0) -> bool:
    """Whether `condition()` came true within `timeout` seconds (asked every 50 ms): what another
    process does (a server dropping a dead one's connection, an announcement) takes a moment."""
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def run_chatcli(*args: str, env: dict[str, str], input: str | None = None, cwd: Path | None = None,
                timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [CHATCLI, *args],
        env=env,
        input=input if input is not None else "",
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
    )


def exported_contents(path: Path) -> list[str]:
    """The texts of a JSONL export (one turn per line), in order: what came before the prompt,
    the prompt, then each step's text and its calls' results."""
    import json

    contents = []
    for line in path.read_text().splitlines():
        turn = json.loads(line)
        contents += [*turn.get("system", []), *(s["content"] for s in turn.get("summaries", []))]
        if turn["user"] is not None:
            contents.append(turn["user"])
        for step in turn["steps"]:
            contents.append(step["text"])
            contents += [call["result"] for call in step["tool_calls"] if call["result"] is not None]
    return contents


def bound(env, name: str):
    """A conversation in this process with journals on, bound to session `name`."""
    from chatcli.config.settings import Settings
    from chatcli.engine import sessions
    from chatcli.engine.conversation import Conversation

    conv = Conversation(Settings.load(env), journal=True)
    sessions.start(conv, name=name)
    return conv


def turn(conv, question: str, answer: str = "ok") -> None:
    """One turn as the REPL takes it (checkpoint, the two messages, journal sync, write-through)."""
    from chatcli.core.messages import Message

    conv.checkpoint(question)
    conv.history += [Message("user", question), Message("assistant", answer)]
    conv.sync_transcript()
    assert conv.binding.write_through() == [] and conv.binding.unsynced == 0

