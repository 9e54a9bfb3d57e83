"""A coder-mode write between its approval and its run (engine/tools.py): the path approved is
checked again when written and reached without following a link, so a directory swapped for a
link while the user is being asked cannot carry the write out of the working directory."""

from __future__ import annotations

import os
import shutil

import pytest
from fakes import tool_call as call

from chatcli.core import agent as rules
from chatcli.engine import tools


@pytest.fixture
def project(workdir):
    (workdir / "app.py").write_text("print('hi')\n")
    (workdir / "sub").mkdir()
    (workdir / "sub" / "t.txt").write_text("old\n")
    return workdir


@pytest.fixture
def coder_in(make_conversation, project):
    """A coder-mode conversation working in `project`; keyword arguments are environment variables."""

    def make(**variables: str):
        conv = make_conversation(**variables)
        conv.agent.root = project
        conv.agent.switch("coder", conv)
        return conv

    return make


def results(conv) -> list[str]:
    return [m.content for m in conv.history if m.role == "tool"]


def tree(directory) -> dict[str, str]:
    """Every path under `directory` (links not followed) → its text, "dir/" or "-> target"."""
    out = {}
    for where, dirs, files in os.walk(directory):
        for name in dirs + files:
            path = os.path.join(where, name)
            shown = os.path.relpath(path, directory)
            if os.path.islink(path):
                out[shown] = "-> " + os.readlink(path)
            elif os.path.isdir(path):
                out[shown] = "dir/"
            else:
                with open(path, encoding="utf-8") as file:
                    out[shown] = file.read()
    return out


@pytest.mark.parametrize("tool, arguments", [
    ("write_file", {"path": "sub/new.txt", "content": "planted\n"}),
    ("edit_file", {"path": "sub/t.txt", "old_text": "old", "new_text": "planted"}),
])
def test_a_directory_swapped_for_a_link_while_approval_waits_is_not_written_through(coder_in, fake_model, project,
                                                                                    tmp_path, tool, arguments):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "t.txt").write_text("old\n")  # what the edit expects, so only the link can stop it
    fake_model.reply(tool_calls=[call("c1", tool, **arguments)])
    fake_model.reply("It was refused.")
    asked = []

    def swap_then_approve(question):
        asked.append(question.title)
        shutil.rmtree(project / "sub")  # meanwhile, something else in the project
        (project / "sub").symlink_to(outside, target_is_directory=True)
        return rules.YES

    conv = coder_in()
    before = tree(project)
    conv.send("write into sub", approve=swap_then_approve)

    assert len(asked) == 1
    assert tree(outside) == {"t.txt": "old\n"}  # nothing created or changed outside
    after = tree(project)
    assert after == {**{k: v for k, v in before.items() if not k.startswith("sub")}, "sub": f"-> {outside}"}
    [result] = results(conv)
    assert result == "refused: sub/ became a symbolic link after the write was approved; nothing was written"
    refused = next(m for m in conv.history if m.role == "tool")
    assert refused.meta.get("refused") is True and refused.extra == {"is_error": True}
    assert conv.history[-1].content == "It was refused."


def test_the_file_itself_swapped_for_a_link_while_approval_waits_is_not_written_through(coder_in, fake_model,
                                                                                      project, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("old\n")
    fake_model.reply(tool_calls=[call("c1", "edit_file", path="sub/t.txt", old_text="old", new_text="new")])
    fake_model.reply("Refused.")

    def swap_then_approve(_question):
        (project / "sub" / "t.txt").unlink()
        (project / "sub" / "t.txt").symlink_to(outside)
        return rules.YES

    conv = coder_in()
    conv.send("edit it", approve=swap_then_approve)
    assert outside.read_text() == "old\n"
    assert results(conv) == ["refused: sub/t.txt became a symbolic link after the write was approved; "
                             "nothing was written"]
    assert os.readlink(project / "sub" / "t.txt") == str(outside)


def test_an_approved_create_makes_its_new_nested_directories(coder_in, fake_model, project):
    fake_model.reply(tool_calls=[call("c1", "write_file", path="a/b/c.txt", content="deep\n")])
    fake_model.reply("Made it.")
    asked = []
    conv = coder_in()
    conv.send("make a/b/c.txt", approve=lambda question: asked.append(question.title) or rules.YES)
    assert asked == ["create a/b/c.txt (+1 −0; makes a/b/)"]
    assert results(conv) == ["wrote a/b/c.txt (+1 −0 lines)"]
    assert (project / "a" / "b" / "c.txt").read_text() == "deep\n"
    assert (project / "a" / "b" / "c.txt").stat().st_mode & 0o777 == 0o666 & ~tools.UMASK
    assert (project / "a").stat().st_mode & 0o777 == 0o777 & ~tools.UMASK
    assert sorted(os.listdir(project / "a" / "b")) == ["c.txt"]  # no temporary file left beside it


def test_writes_through_links_the_workspace_allows_still_work(coder_in, fake_model, project, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    (project / "real").mkdir()
    (project / "alias").symlink_to(project / "real", target_is_directory=True)  # a link that stays inside
    fake_model.reply(tool_calls=[call("c1", "write_file", path="alias/x.txt", content="x\n"),
                                 call("c2", "write_file", path=str(shared / "n" / "y.txt"), content="y\n"),
                                 call("c3", "edit_file", path="sub/t.txt", old_text="old", new_text="new")])
    fake_model.reply("Done.")
    conv = coder_in(CHATCLI_AGENT_DIRS=str(shared))
    conv.send("write them", approve=lambda _question: rules.YES)
    assert results(conv) == ["wrote real/x.txt (+1 −0 lines)", f"wrote {shared / 'n' / 'y.txt'} (+1 −0 lines)",
                             "wrote sub/t.txt (+1 −1 lines)"]
    assert (project / "real" / "x.txt").read_text() == "x\n"
    assert (shared / "n" / "y.txt").read_text() == "y\n"
    assert (project / "sub" / "t.txt").read_text() == "new\n"
