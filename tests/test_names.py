"""Session-name rules (SPEC §4): fuzzed so that no accepted name can leave the sessions directory."""

from __future__ import annotations

import os.path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chatcli.core.errors import UsageError
from chatcli.core.names import validate_name, validate_user_target


@pytest.mark.parametrize("name", ["a", "debug-api", "Proj_2.v1", "x" * 128, "0", "a.b-c_d"])
def test_valid_names_are_accepted(name):
    assert validate_name(name) == name


@pytest.mark.parametrize("name", ["", ".hidden", "-x", "_x", "a..b", "..", "a/b", "../etc", "a b", "x" * 129,
                                  "naïve", "a\x00b", "a\\b", "~home"])
def test_invalid_names_are_refused_with_the_rule(name):
    with pytest.raises(UsageError, match="letters, digits"):
        validate_name(name)


@pytest.mark.parametrize("name", ["autosave-20260101-000000", "mcp-abc"])
def test_reserved_prefixes_are_refused_as_user_targets_but_valid_names(name):
    assert validate_name(name) == name
    with pytest.raises(UsageError, match="prefix chatcli keeps"):
        validate_user_target(name)


@given(st.text(max_size=200))
def test_no_accepted_name_escapes_the_sessions_directory(name):
    sessions = "/home/u/.chatcli/sessions"
    try:
        validate_name(name)
    except UsageError as exc:
        message = str(exc)
        assert "\n" not in message and message.startswith("invalid session name")
        return
    path = os.path.normpath(os.path.join(sessions, name + ".json"))
    assert os.path.dirname(path) == sessions
    assert os.path.basename(path) == name + ".json"
