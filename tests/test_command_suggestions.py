"""A mistyped command or action is answered in one line naming the nearest one (difflib), or /help."""

from __future__ import annotations

import pytest
from repl_driver import Repl, plain


@pytest.fixture
def dispatch(make_conversation):
    from chatcli.commands.builtin import build_registry

    registry, conv = build_registry(), make_conversation()

    def run(line: str) -> str:
        result = registry.dispatch(line, conv)
        assert result.error, line
        assert "\n" not in result.text, result.text
        return result.text

    return run


@pytest.mark.parametrize(("line", "expected"), [
    ("/sesion", "unknown command /sesion — did you mean /session? (/help lists them)"),
    ("/sesion list", "unknown command /sesion — did you mean /session? (/help lists them)"),
    ("/memroy", "unknown command /memroy — did you mean /memory? (/help lists them)"),
    ("/Quitt", "unknown command /Quitt — did you mean /quit? (/help lists them)"),
])
def test_a_mistyped_command_names_the_nearest_one_in_one_line(dispatch, line, expected):
    assert dispatch(line) == expected


def test_an_unknown_command_with_no_near_name_points_to_help_in_one_line(dispatch):
    said = dispatch("/frobnicate now")
    assert said.startswith("unknown command /frobnicate (/help lists them")
    assert "did you mean" not in said
    assert "//" in said  # how to send such a line as text instead


@pytest.mark.parametrize(("line", "expected"), [
    ("/session lst", "unknown action 'lst' for /session — did you mean 'list'? (actions: save, load, attach, "
                     "detach, status, list, delete, new, fork, export, transcript, search, import)"),
    ("/session exprot md", "unknown action 'exprot' for /session — did you mean 'export'?"),
    ("/session transcript shwo 1", "unknown action 'shwo' for /session transcript — did you mean 'show'? "
                                   "(actions: search, show, export, stats)"),
    ("/storage prnue", "unknown action 'prnue' for /storage — did you mean 'prune'? (actions: report, prune)"),
    ("/memory lsit", "unknown action 'lsit' for /memory — did you mean 'list'? (actions: list, save, show, forget)"),
    ("/context atach x", "unknown action 'atach' for /context — did you mean 'attach'?"),
    ("/schedule lsit", "unknown action 'lsit' for /schedule — did you mean 'list'?"),
    ("/rewind compcat", "unknown action 'compcat' for /rewind — did you mean 'compact'?"),
    ("/web stpo", "unknown action 'stpo' for /web — did you mean 'stop'?"),
    ("/config sesion", "unknown action 'sesion' for /config — did you mean 'session'?"),
])
def test_a_mistyped_action_names_the_nearest_one_in_one_line(dispatch, line, expected):
    said = dispatch(line)
    assert said.startswith(expected), said
    assert "usage:" not in said


def test_an_unknown_action_with_no_near_name_lists_the_actions(dispatch):
    said = dispatch("/session zzzzzz")
    assert said == ("unknown action 'zzzzzz' for /session (actions: save, load, attach, detach, status, list, "
                    "delete, new, fork, export, transcript, search, import)")
    assert dispatch("/schedule zzzzzz") == \
        "unknown action 'zzzzzz' for /schedule (actions: list, remove; or CRON /COMMAND)"


@pytest.mark.parametrize(("line", "expected"), [
    ("/session load", "usage: /session load <name>"),
    ("/session list now", "usage: /session list"),
    ("/session transcript", "usage: /session transcript search <words>"),
    ("/storage prune everything", "unknown store 'everything' (choose from: sessions"),
    ("/memory forget", "usage: /memory forget <n|id>"),
    ("/context show", "usage: /context show NAME"),
    ("/schedule remove", "usage: /schedule remove ID"),
    ("/rewind -1", "'-1' is not a checkpoint number"),
    ("/web stop now", "usage: /web"),
    ("/config session now", "usage: /config session"),
])
def test_a_known_action_with_bad_arguments_keeps_its_one_line_error(dispatch, line, expected):
    said = dispatch(line)
    assert said.startswith(expected), said
    assert "did you mean" not in said


def test_a_mistyped_command_is_one_line_in_the_repl_and_a_path_still_goes_to_the_model(repl_env, workdir,
                                                                                        openai_server):
    repl = Repl(repl_env, "m", cwd=workdir)
    try:
        out = plain(repl.send("/sesion"))
        said = [line for line in out.split("\n")[1:-1] if line.strip()]  # between the typed line and the prompt
        assert said == ["error: unknown command /sesion — did you mean /session? (/help lists them)"], out
        assert "You said: /usr/bin/pyhton3 crashes" in plain(repl.send("/usr/bin/pyhton3 crashes"))
        assert len(openai_server.requests) == 1
    finally:
        repl.close()
