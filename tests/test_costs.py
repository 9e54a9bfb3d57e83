"""Cost tracking: tokens and an estimated cost per turn and per session, through the
real REPL and the real HTTP path to the fake model (which reports its token counts); a fork
keeps the cost reference; `session show` says it; /storage lists the snapshots and prunes
bursts of them on demand only."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from conftest import run_chatcli
from repl_driver import Repl, plain

from chatcli.core.costs import usage
from chatcli.engine import sessions
from chatcli.store.storage import Storage


def test_cost_per_turn_and_per_session_and_a_fork_keeps_the_reference(repl_env, workdir, sessions_dir):
    repl_env["CHATCLI_PRICES"] = "m=1000000/2000000"  # $1 a token in, $2 out: the sums are easy to read
    repl = Repl(repl_env, "m", cwd=workdir, args=("--session", "proj"))
    try:
        repl.send("first question")
        repl.send("second question")
        said = plain(repl.send("/cost"))
        # The fake server reports 5 tokens in and 2 out (its answer's two pieces) per request.
        assert "Last turn: 1 request, 5 tokens in, 2 out, ≈ $9.00." in said, said
        assert "This session (proj): 2 requests, 10 tokens in, 4 out, ≈ $18.00." in said
        repl.send("/session fork proj-b")
        repl.send("in the fork")
        said = plain(repl.send("/cost"))
        assert "This session (proj-b): 1 request, 5 tokens in, 2 out, ≈ $9.00." in said
        assert re.search(r"With its forks and earlier names \(cost reference [0-9a-f]{12}\): 3 requests, 15 tokens "
                         r"in, 6 out, ≈ \$27\.00\.", said), said
    finally:
        repl.close()
    parent = json.loads((sessions_dir / "proj.json").read_text())
    fork = json.loads((sessions_dir / "proj-b.json").read_text())
    assert parent["cost_ref"] == fork["cost_ref"]
    shown = run_chatcli("session", "show", "proj", env=repl_env, cwd=workdir).stdout
    assert "cost: 2 requests, 10 tokens in, 4 out, ≈ $18.00; its cost reference" in shown, shown
    assert "3 requests, 15 tokens in, 6 out, ≈ $27.00" in shown


def test_unreported_tokens_are_estimated_and_said_so_and_unknown_prices_are_not_guessed():
    used = usage("openai", "some-new-model", None, None, 4000, 400)
    assert (used.input_tokens, used.output_tokens, used.estimated, used.cost) == (1000, 100, True, None)
    assert usage("local", "SmolLM2", None, 7, 40, 0).cost == 0.0
    assert usage("anthropic", "claude-sonnet-4-5", 1_000_000, 0, 0, 0).cost == 3.0


def test_cost_snapshot_bursts_are_pruned_on_demand_only(env, workdir, settings):
    costs = Path(env["CHATCLI_HOME"]) / "costs"
    costs.mkdir(parents=True)
    line = json.dumps({"t": time.time(), "s": "", "p": "openai", "m": "m", "in": 5, "out": 2, "est": False,
                       "usd": None}) + "\n"
    for n in range(4):  # four scripted runs within a minute, one request each
        (costs / f"{n:012x}.jsonl").write_text(line)
    (costs / "aaaaaaaaaaaa.jsonl").write_text(line * 3)  # a real conversation
    Storage(settings).sweep()
    assert len(list(costs.iterdir())) == 5
    report = run_chatcli("storage", env=env, cwd=workdir).stdout
    assert re.search(r"^  cost snapshots +5 +\S+ \S+ +4 files, ", report, re.M), report
    applied = run_chatcli("storage", "prune", "costs", "--apply", env=env, cwd=workdir)
    assert "Removed 4 files" in applied.stdout, applied.stdout
    assert [p.name for p in costs.iterdir()] == ["aaaaaaaaaaaa.jsonl"]


def test_a_one_shot_that_keeps_no_session_writes_no_cost_snapshot(openai_env, workdir, home):
    assert run_chatcli("-p", "hi", env=openai_env, cwd=workdir).returncode == 0
    assert not (home / ".chatcli").exists()
    assert run_chatcli("--session", "kept", "-p", "hi", env=openai_env, cwd=workdir).returncode == 0
    [snapshot] = (home / ".chatcli" / "costs").iterdir()
    assert json.loads(snapshot.read_text())["s"] == "kept" and oct(snapshot.stat().st_mode & 0o777) == "0o600"


def test_a_compaction_request_is_counted_too(make_conversation, fake_model):
    from chatcli.engine import compaction, costs

    conv = make_conversation()
    sessions.attach(conv, "long")
    for n in range(8):
        conv.send(f"question {n}")
    ref = costs.reference(conv, create=False)
    assert len(costs.store(conv).lines(ref)) == 8
    fake_model.reply("A short summary.")
    compaction.compact(conv, "")
    assert len(costs.store(conv).lines(ref)) == 9  # the summary request, counted with the session's


def test_the_cost_of_sessions_kept_is_never_a_burst(openai_env, workdir, home):
    for n in range(4):  # four quick runs, each kept in a session of its own
        assert run_chatcli("--session", f"proj{n}", "-p", f"question {n}", env=openai_env, cwd=workdir).returncode == 0
    pruned = run_chatcli("storage", "prune", "costs", env=openai_env, cwd=workdir)
    assert "Nothing to remove" in pruned.stdout, pruned.stdout
    shown = run_chatcli("session", "show", "proj0", env=openai_env, cwd=workdir).stdout
    assert "cost: 1 request" in shown


def test_requests_made_before_a_save_count_as_the_sessions(repl_env, workdir):
    repl = Repl(repl_env, "m", cwd=workdir)
    try:
        repl.send("q one")
        repl.send("q two")
        repl.send("/session save savedcost")
        said = plain(repl.send("/cost"))
        assert "This session (savedcost): 2 requests, 10 tokens in, 4 out" in said, said
    finally:
        repl.close()


def test_the_local_model_s_cost_is_said_to_be_free_not_a_sum_of_dollars():
    from chatcli.engine.costs import describe
    from chatcli.store.costs import Line

    local = Line(0.0, "s", "local", "SmolLM2-135M-Instruct", 12, 30, True, None)
    assert describe([local]) == "1 request, 12 tokens in, 30 out, free (the model runs on your machine); tokens estimated"
    paid = Line(0.0, "s", "openai", "gpt-4o-mini", 10, 5, False, 0.5)
    assert describe([local, paid]) == ("2 requests, 22 tokens in, 35 out, ≈ $0.5000 for 1 of them; tokens estimated "
                                       "for 1 of them")
