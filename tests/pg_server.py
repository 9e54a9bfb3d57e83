"""A real PostgreSQL server for the tests and benchmarks: Debian's `postgresql` package (make test
installs it once per machine), a new cluster made by `initdb` in a temporary directory and served
by `pg_ctl` on a free loopback port, stopped and removed at the end.

`initdb` and `postgres` refuse to run as root (CI runs as root): there, both run as the `postgres`
user the package creates, in a directory it owns. The cluster trusts connections from loopback
(no password: it lives as long as the test run, on 127.0.0.1 and a socket in its own directory).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


def bin_dir() -> Path:
    """The newest installed server's programs (PG_BIN overrides)."""
    if os.environ.get("PG_BIN"):
        return Path(os.environ["PG_BIN"])
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda path: int(path.split("/")[4]))
    if not found:
        raise RuntimeError("PostgreSQL's server is not installed: make test installs Debian's postgresql package")
    return Path(found[-1]).parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """One cluster: `start()`, `dsn`, `stop()` (idempotent)."""

    def __init__(self, durable: bool = False) -> None:
        self.durable = durable  # fsync on (benchmarks compare like with like); off for the tests
        self.root = Path(tempfile.mkdtemp(prefix="chatcli-pg-"))
        self.data = self.root / "data"
        self.port = 0
        self.running = False

    def _as_owner(self, command: list[str]) -> list[str]:
        return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command

    def start(self) -> Server:
        tools = bin_dir()
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        subprocess.run(self._as_owner([str(tools / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "chatcli",
                                       "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"]),
                       check=True, capture_output=True)
        self.port = _free_port()
        self._pg_ctl("start")
        self.running = True
        return self

    def _pg_ctl(self, action: str) -> None:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c max_connections=200"
        if not self.durable:
            options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        extra = ["-o", options, "-l", str(self.root / "log"), "-t", "60"] if action == "start" else ["-m", "fast"]
        subprocess.run(self._as_owner([str(bin_dir() / "pg_ctl"), "-D", str(self.data), *extra, "-w", action]),
                       check=True, capture_output=True)

    @property
    def dsn(self) -> str:
        return f"postgresql://chatcli@127.0.0.1:{self.port}/postgres"

    def restart(self, pause: float = 0.0) -> None:
        """Stop the server (fast: sessions are cut), wait `pause` seconds, start it again."""
        self._pg_ctl("stop")
        time.sleep(pause)
        self._pg_ctl("start")

    def stop(self) -> None:
        if self.running:
            self.running = False
            subprocess.run(self._as_owner([str(bin_dir() / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
                                           "-w", "stop"]), capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)
