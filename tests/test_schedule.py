"""/schedule: slash commands on a cron schedule while the REPL (or the gateway) runs;
jobs persisted in schedule.json, listed in /storage, and a due run made once whoever notices it."""

from __future__ import annotations

import datetime
import json
import re
import time
from pathlib import Path

import pytest
from repl_driver import Repl, plain

from chatcli.core.cron import parse
from chatcli.core.errors import UsageError
from chatcli.engine import schedule
from chatcli.engine.schedule import Scheduler


def cost_burst(home: Path) -> Path:
    """Four cost snapshots of one request each, made within a minute: what a prune removes."""
    costs = home / "costs"
    costs.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"t": time.time(), "s": "", "p": "openai", "m": "m", "in": 5, "out": 2, "est": False,
                       "usd": None}) + "\n"
    for n in range(4):
        (costs / f"{n:012x}.jsonl").write_text(line)
    return costs


def test_a_scheduled_prune_runs_in_the_repl_and_says_so(repl_env, workdir):
    home = Path(repl_env["CHATCLI_HOME"])
    costs = cost_burst(home)
    repl = Repl(repl_env, "m", cwd=workdir)
    try:
        said = plain(repl.send("/schedule * * * * * /storage prune costs --apply"))
        assert re.search(r"Scheduled job 1: /storage prune costs --apply at '\* \* \* \* \*' \(next \d{4}-", said), said
        assert "cannot be scheduled" in plain(repl.send("/schedule @daily /session new"))
        assert "unknown store 'bogus'" in plain(repl.send("/schedule @daily /storage prune bogus"))
        assert "is out of range" in plain(repl.send("/schedule 61 * * * * /storage"))
    finally:
        repl.close()
    # As if the job had been made two minutes ago: a REPL that starts finds it due.
    path = home / "schedule.json"
    document = json.loads(path.read_text())
    document["jobs"][0]["created"] -= 120
    path.write_text(json.dumps(document))
    repl = Repl(repl_env, "m", cwd=workdir)
    try:
        # One line above the prompt, never the whole output: /schedule keeps the result.
        repl.child.expect(r"\[schedule 1: /storage prune costs --apply\] Removing 4 files .*\(\+\d+ more lines: "
                          r"/schedule shows its last result\)", timeout=30)
        repl.child.expect(r"m(?:\x1b\[[0-9;]*m)*>", timeout=10)  # and the prompt is back
        assert list(costs.iterdir()) == []
        listed = plain(repl.send("/schedule"))
        assert re.search(r"1\. '\* \* \* \* \*'  /storage prune costs --apply  \(next .*; last ran .*: Removing 4 "
                         r"files", listed), listed
        report = plain(repl.send("/storage"))
        assert re.search(r"^  scheduler +1 .*1\. '\* \* \* \* \*' /storage prune costs --apply", report, re.M), report
        assert "Removed scheduled job 1" in plain(repl.send("/schedule remove 1"))
    finally:
        repl.close()


def test_a_due_run_is_made_once_however_many_notice_it(settings):
    ran = []
    first = Scheduler(settings, lambda command: (ran.append(command) or "done", False), lambda _line: None)
    second = Scheduler(settings, lambda command: (ran.append(command) or "done", False), lambda _line: None)
    schedule.add(settings, "@hourly /storage")
    now = time.time() + 3 * 3600  # three runs missed while nothing ran: made once
    assert len(first.tick(now)) == 1 and second.tick(now) == [] and first.tick(now) == []
    assert ran == ["/storage"]
    assert len(second.tick(now + 3600)) == 1  # the next hour, whoever looks first


def test_cron_expressions():
    thursday = datetime.datetime(2026, 12, 3, 23, 40)
    assert parse("0 3 * * *").next_after(thursday) == datetime.datetime(2026, 12, 4, 3, 0)
    assert parse("*/15 9-17 * * 1-5").next_after(datetime.datetime(2026, 12, 5, 8, 0)) == \
        datetime.datetime(2026, 12, 7, 9, 0)  # Saturday → Monday
    assert parse("@weekly").next_after(thursday) == datetime.datetime(2026, 12, 6, 0, 0)  # Sunday
    assert parse("0 0 1,15 * 7").next_after(thursday) == datetime.datetime(2026, 12, 6, 0, 0)  # day 1, 15 or Sunday
    for bad, why in (("0 0 30 2 *", "never comes"), ("61 * * * *", "out of range"), ("* * *", "five fields"),
                     ("a * * * *", "not a number")):
        with pytest.raises(UsageError, match=why):
            parse(bad)


def test_a_scheduled_context_save_keeps_the_directory_it_was_scheduled_in(settings, tmp_path):
    project = tmp_path / "proj-a"
    project.mkdir()
    (project / "design.md").write_text("the design\n")
    said = schedule.add(settings, "@hourly /context save proj .", cwd=project)
    assert f"/context save proj {project}" in said
    with pytest.raises(UsageError, match="absolute paths"):
        schedule.check_command("/context save proj .")  # as a run reads schedule.json: relative is refused
    elsewhere = tmp_path / "other-b"
    elsewhere.mkdir()
    (elsewhere / "private.txt").write_text("not for the model\n")
    ran = []
    runner = Scheduler(settings, lambda command: (ran.append(command) or "saved", False), lambda _line: None)
    runner.tick(time.time() + 3 * 3600)
    assert ran == [f"/context save proj {project}"]
