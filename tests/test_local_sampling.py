"""The local model: it computes on the cores that are free (one thread more than there are free
cores makes every token wait for the scheduler, several times slower on a shared machine), and
answers a question asked again afresh unless a seed is set."""

from __future__ import annotations

import subprocess
import sys
import time

from chatcli.providers.local_worker import cores, free_cores

SPIN = "import time\nend = time.monotonic() + 20\nwhile time.monotonic() < end: pass\n"


def test_a_busy_core_is_left_to_the_program_using_it():
    limit = cores()
    spinning = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(limit)]
    try:
        time.sleep(0.5)  # started and running
        assert free_cores(limit) == 1  # every core busy: one thread, never none
        for proc in spinning[1:]:
            proc.kill()
            proc.wait()
        assert free_cores(limit) <= max(1, limit - 1)
    finally:
        for proc in spinning:
            proc.kill()
            proc.wait()


def test_never_more_threads_than_cores_and_never_none():
    for limit in (1, 2, 64):
        assert 1 <= free_cores(limit) <= limit


def test_the_same_question_gets_a_new_answer_unless_a_seed_is_set(env, workdir):
    from conftest import run_chatcli

    question = ("-p", "Write a short poem about the sea.")
    env.pop("CHATCLI_LOCAL_SEED")
    unseeded = {run_chatcli(*question, env=env, cwd=workdir).stdout for _ in range(3)}
    assert len(unseeded) > 1  # asked again, answered afresh, as in any chat
    env["CHATCLI_LOCAL_SEED"] = "7"
    seeded = [run_chatcli(*question, env=env, cwd=workdir) for _ in range(2)]
    assert seeded[0].returncode == 0 and seeded[0].stdout.strip() and seeded[0].stdout == seeded[1].stdout
