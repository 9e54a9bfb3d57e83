"""What a new user meets on a fresh machine: the README's set-up leaves `chatcli` runnable by name."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def make_link(link_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-s", "link", f"LINK_DIR={link_dir}"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)


def test_make_run_puts_chatcli_on_the_path_once_and_it_works_by_name_in_a_new_shell(tmp_path):
    link_dir = tmp_path / "home" / ".local" / "bin"
    first = make_link(link_dir)
    assert first.returncode == 0, first.stderr
    assert f"linked {link_dir / 'chatcli'} -> {ROOT / '.venv' / 'bin' / 'chatcli'}" in first.stdout
    assert "is not on your PATH" in first.stdout  # the test's directory is not: said, with the line to add
    again = make_link(link_dir).stdout
    assert "linked" not in again  # linked once
    assert "is not on your PATH" in again  # the hint, until the directory is on the PATH
    on_path = subprocess.run(["make", "-s", "link", f"LINK_DIR={link_dir}"], cwd=ROOT, capture_output=True,
                             text=True, timeout=60, env={**os.environ, "PATH": f"{link_dir}:{os.environ['PATH']}"})
    assert on_path.stdout == ""  # then nothing more to say
    shell = {"HOME": str(tmp_path / "home"), "PATH": f"{link_dir}:/usr/bin:/bin",
             "CHATCLI_HOME": str(tmp_path / "home" / ".chatcli")}
    for command in ("chatcli --version", "chatcli session list"):  # as chatcli's own lines print them
        ran = subprocess.run(["bash", "-c", command], env=shell, cwd=tmp_path, capture_output=True, text=True,
                             timeout=60)
        assert ran.returncode == 0, (command, ran.stderr)


def test_a_chatcli_already_on_the_path_that_is_not_this_checkout_s_is_left_alone(tmp_path):
    link_dir = tmp_path / "bin"
    link_dir.mkdir()
    (link_dir / "chatcli").write_text("#!/bin/sh\necho another chatcli\n")
    result = make_link(link_dir)
    assert result.returncode == 0 and "exists and is not this checkout's chatcli; left as it is" in result.stdout
    assert (link_dir / "chatcli").read_text() == "#!/bin/sh\necho another chatcli\n"
    assert not os.path.islink(link_dir / "chatcli")
