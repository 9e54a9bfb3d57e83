"""The servers' logs under CHATCLI_HOME/logs: size-capped and rotated, 0600, never written through
a planted link, shared safely by two processes, never a traceback when they cannot be written;
and `chatcli storage` lists them."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_chatcli
from test_gateway import WEBHOOK, Daemon, say

from chatcli.config.settings import DEFAULT_LOG_MAX_SIZE, Settings
from chatcli.store.home import LOG_BACKUPS

CAP = 4096
# A process that logs as the servers do (upkeep.log_to_file), one batch of records per line it reads.
LOGGER = r"""
import logging, os, sys
os.umask(0)  # the log must be 0600 whatever the umask
from chatcli.config.settings import Settings
from chatcli.engine import upkeep
upkeep.log_to_file(Settings.load(), sys.argv[1], "chatcli.test")
log = logging.getLogger("chatcli.test")
for line in sys.stdin:
    tag, count = line.split()
    for number in range(int(count)):
        log.info("%s %04d %s", tag, number, "x" * 40)
    print("logged", flush=True)
"""


class Logger:
    """A process writing `logs/<name>` through upkeep.log_to_file."""

    def __init__(self, env: dict[str, str], name: str = "gateway.log") -> None:
        self.process = subprocess.Popen([sys.executable, "-c", LOGGER, name], env=env, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def log(self, tag: str, count: int = 1) -> None:
        self.process.stdin.write(f"{tag} {count}\n")
        self.process.stdin.flush()
        assert self.process.stdout.readline() == "logged\n", self.process.stderr.read()

    def close(self) -> str:
        """Its stderr, once it has ended well."""
        self.process.stdin.close()
        assert self.process.wait(20) == 0
        return self.process.stderr.read()


@pytest.fixture
def logs(env) -> Path:
    env["CHATCLI_LOG_MAX_SIZE"] = str(CAP)
    return Path(env["CHATCLI_HOME"]) / "logs"


def files(logs: Path) -> dict[str, os.stat_result]:
    return {path.name: path.lstat() for path in sorted(logs.iterdir())}


def records(logs: Path, tag: str) -> list[str]:
    """The numbers of the records `tag` logged, over the log and its copies."""
    found = []
    for path in logs.glob("gateway.log*"):
        found += re.findall(rf"chatcli\.test: {tag} (\d+) ", path.read_text())
    return sorted(found)


def test_a_flood_of_refused_requests_keeps_gateway_log_within_its_cap(openai_env, openai_server, logs):
    openai_env.update(CHATCLI_GATEWAY_ALLOW="webhook:alice", CHATCLI_GATEWAY_WEBHOOK_SECRET="a shared secret")
    daemon = Daemon(openai_env, *WEBHOOK)
    try:
        for number in range(400):  # about 40 KB of "refused a request" lines, ten times the cap
            status, _answer = daemon.post({"sender": "alice", "text": "hi", "id": f"x-{number}"}, secret="wrong")
            assert status == 401
        assert say(daemon, "still here") == (200, {"reply": "You said: still here"})
    finally:
        daemon.stop()
    assert daemon.process.stderr.read() == ""
    found = files(logs)
    assert sorted(found) == ["gateway.log", *(f"gateway.log.{n}" for n in range(1, LOG_BACKUPS + 1))]
    for name, st in found.items():
        assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600, name
        assert st.st_size <= CAP, name
    assert all(found[f"gateway.log.{n}"].st_size > CAP - 200 for n in range(1, LOG_BACKUPS + 1))  # full copies
    assert "refused a request: the signature does not match" in (logs / "gateway.log").read_text().splitlines()[-1]


def test_rotated_logs_are_private_and_their_number_is_capped(env, logs):
    logger = Logger(env)
    logger.log("A", 300)  # about 30 KB
    assert logger.close() == ""
    found = files(logs)
    assert sorted(found) == ["gateway.log", *(f"gateway.log.{n}" for n in range(1, LOG_BACKUPS + 1))]
    assert {name: oct(stat.S_IMODE(st.st_mode)) for name, st in found.items()} == {name: "0o600" for name in found}
    assert max(st.st_size for st in found.values()) <= CAP
    assert records(logs, "A")[-1] == "0299"  # the newest record is kept


def test_two_processes_sharing_a_log_rotate_it_once_and_lose_no_record(env, logs):
    first, second = Logger(env), Logger(env)
    second.log("B", 1)
    first.log("A", 60)  # past the cap: the first rotates the log under the second
    second.log("B", 1)  # written to the new log, not to the copy it had open
    assert sorted(files(logs)) == ["gateway.log", "gateway.log.1"]
    assert "chatcli.test: B 0000 " in (logs / "gateway.log").read_text()
    for _round in range(10):  # turn about, each rotating under the other
        first.log("A", 3)
        second.log("B", 3)
    assert first.close() == "" and second.close() == ""
    assert len(records(logs, "A")) == 60 + 30 and len(records(logs, "B")) == 2 + 30  # none lost, none twice
    found = files(logs)
    assert len(found) <= 1 + LOG_BACKUPS and max(st.st_size for st in found.values()) <= CAP


def test_a_link_planted_at_the_log_is_not_followed_and_logging_resumes_once_it_is_gone(env, logs, tmp_path):
    target = tmp_path / "elsewhere.txt"
    target.write_text("not chatcli's\n")
    logs.mkdir(parents=True)
    (logs / "gateway.log").symlink_to(target)
    logger = Logger(env)
    logger.log("A", 2)  # the server goes on
    (logs / "gateway.log").unlink()
    logger.log("B", 1)
    stderr = logger.close()
    assert target.read_text() == "not chatcli's\n"
    assert "Traceback" not in stderr and len(stderr.splitlines()) == 1, stderr
    assert stderr.startswith("chatcli: warning: cannot write the log ") and "symbolic link" in stderr
    log = logs / "gateway.log"
    assert not log.is_symlink() and stat.S_IMODE(log.stat().st_mode) == 0o600
    assert records(logs, "B") == ["0000"]


def test_a_link_planted_at_a_rotated_copy_is_replaced_not_written_through(env, logs, tmp_path):
    target = tmp_path / "elsewhere.txt"
    target.write_text("not chatcli's\n")
    logs.mkdir(parents=True)
    (logs / "gateway.log.1").symlink_to(target)
    logger = Logger(env)
    logger.log("A", 60)
    assert logger.close() == ""
    assert target.read_text() == "not chatcli's\n"
    copy = (logs / "gateway.log.1").lstat()
    assert stat.S_ISREG(copy.st_mode) and stat.S_IMODE(copy.st_mode) == 0o600


def test_a_log_that_cannot_be_written_is_one_line_on_stderr_and_resumes_when_it_can(env, logs):
    logger = Logger(env)
    logger.log("A", 1)
    (logs / "gateway.log").rename(logs / "moved.log")
    (logs / "gateway.log").mkdir()  # nothing can be written at the log's name now
    logger.log("B", 3)
    (logs / "gateway.log").rmdir()
    logger.log("C", 1)
    stderr = logger.close()
    assert stderr.startswith("chatcli: warning: cannot write the log ") and len(stderr.splitlines()) == 1, stderr
    assert "Traceback" not in stderr and "Logging error" not in stderr
    assert re.findall(r"chatcli\.test: (\w) ", (logs / "gateway.log").read_text()) == ["C"]
    assert stat.S_IMODE((logs / "gateway.log").stat().st_mode) == 0o600


def test_chatcli_storage_lists_the_logs_with_their_sizes_and_never_prunes_them(env, workdir, logs):
    logs.mkdir(parents=True)
    (logs / "gateway.log").write_bytes(b"x" * 3000)
    (logs / "gateway.log.1").write_bytes(b"x" * 5000)
    (logs / "mcp-server.log").write_bytes(b"x" * 100)
    result = run_chatcli("storage", env=env, cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert re.search(r"^  logs +3 +7\.9 KB +never pruned +the servers' logs, each rotated past 4 KB keeping "
                     rf"{LOG_BACKUPS} older copies .*: gateway\.log \(2 files, 7\.8 KB\), "
                     r"mcp-server\.log \(1 file, 100 B\)$", result.stdout, re.M), result.stdout
    pruned = run_chatcli("storage", "prune", "--apply", "logs", env=env, cwd=workdir)
    assert pruned.returncode == 0 and pruned.stdout.startswith("Nothing to remove: the logs are never pruned")
    assert sorted(files(logs)) == ["gateway.log", "gateway.log.1", "mcp-server.log"]


def test_the_log_cap_is_read_once_from_chatcli_log_max_size(env):
    assert Settings.load({**env, "CHATCLI_LOG_MAX_SIZE": "2MB"}).log_max_size == 2 * 1024 * 1024
    bad = Settings.load({**env, "CHATCLI_LOG_MAX_SIZE": "lots"})
    assert bad.log_max_size == DEFAULT_LOG_MAX_SIZE == 1024 * 1024
    assert bad.warnings == ("CHATCLI_LOG_MAX_SIZE='lots' is not a size like 1MB; using 1MB",)


def test_logging_handlers_are_imported_only_where_a_log_is_opened(env):
    probe = ("import sys, chatcli.engine.upkeep, chatcli.commands.storage, chatcli.cli.storage_cli, "
             "chatcli.repl.app; print('logging.handlers' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    assert result.stdout == "False\n", result.stderr
