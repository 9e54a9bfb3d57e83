"""Answers on a terminal: the model's single line breaks stay line breaks in the rendered Markdown."""

from __future__ import annotations

import pexpect
import pytest
from conftest import CHATCLI
from repl_driver import Repl, plain

from chatcli.core.line_breaks import keep_line_breaks

POEM = "Roses are red\nViolets are blue\nSugar is sweet\nAnd so are you"
POEM_LINES = POEM.split("\n")


def _screen_lines(out: str) -> list[str]:
    return [line.strip() for line in plain(out).splitlines()]


def _poem_on_four_lines(out: str) -> None:
    lines = _screen_lines(out)
    for verse in POEM_LINES:
        assert verse in lines, f"{verse!r} is not a line of its own in {lines!r}"
    # The last screen line holding each verse is what stays after the live area's redraws.
    last = {verse: max(i for i, line in enumerate(lines) if line == verse) for verse in POEM_LINES}
    assert [last[verse] for verse in POEM_LINES] == sorted(last.values())


def test_repl_shows_each_line_of_a_poem_on_its_own_line(openai_env, openai_server, workdir):
    # Streamed a few words at a time, as a model does; no NO_COLOR, so rich renders the Markdown.
    openai_server.reply("Roses are red\nViolets", " are blue\nSugar is", " sweet\nAnd so are you")
    repl = Repl(openai_env, "m", cwd=workdir)
    try:
        out = repl.send("a poem")
    finally:
        repl.close()
    _poem_on_four_lines(out)


def test_oneshot_on_a_terminal_shows_each_line_of_a_poem_on_its_own_line(openai_env, openai_server, workdir):
    openai_server.reply(POEM)
    child = pexpect.spawn(CHATCLI, ["-p", "a poem"], env=openai_env, cwd=workdir, encoding="utf-8",
                          timeout=20, dimensions=(40, 100))
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, plain(child.before)
    _poem_on_four_lines(child.before)


# -- keep_line_breaks: the text rule, pure ---------------------------------------------------------


def _render(markdown: str) -> str:
    """What rich prints for `markdown` on an 80-column terminal, without colours."""
    import io

    from rich.console import Console
    from rich.markdown import Markdown

    out = io.StringIO()
    Console(file=out, width=80, no_color=True, highlight=False, force_terminal=False).print(Markdown(markdown))
    return out.getvalue()


def test_a_poem_keeps_its_lines():
    assert keep_line_breaks(POEM) == "Roses are red  \nViolets are blue  \nSugar is sweet  \nAnd so are you"
    assert [line.strip() for line in _render(keep_line_breaks(POEM)).splitlines()] == POEM_LINES
    assert "Roses are red Violets are blue" in _render(POEM)  # what Markdown alone does


def test_blank_line_paragraphs_and_a_final_newline_are_unchanged():
    assert keep_line_breaks("One.\n\nTwo.\n") == "One.\n\nTwo.\n"
    assert keep_line_breaks("a\nb\n") == "a  \nb\n"
    assert keep_line_breaks("") == ""


def test_windows_line_ends_get_the_break_before_them():
    assert keep_line_breaks("Roses are red\r\nViolets are blue\r\n") == "Roses are red  \r\nViolets are blue\r\n"


def test_a_line_already_ending_in_a_hard_break_is_unchanged():
    assert keep_line_breaks("two spaces  \nnext") == "two spaces  \nnext"
    assert keep_line_breaks("backslash\\\nnext") == "backslash\\\nnext"
    # An escaped backslash is a character, not a break.
    assert keep_line_breaks("C:\\\\\nnext") == "C:\\\\  \nnext"


def test_fenced_code_is_unchanged():
    for fence in ("```", "~~~", "````"):
        text = f"Run:\n{fence}python\nx = 1\ny = 2\n{fence}\nDone\nnow"
        assert keep_line_breaks(text) == f"Run:  \n{fence}python\nx = 1\ny = 2\n{fence}\nDone  \nnow"


def test_a_shorter_or_other_fence_does_not_close_a_fence():
    text = "````\n```\nstill code\n~~~\nstill code\n````\nafter\nthis"
    assert keep_line_breaks(text) == "````\n```\nstill code\n~~~\nstill code\n````\nafter  \nthis"


def test_an_unclosed_fence_is_code_to_the_end_while_it_streams():
    assert keep_line_breaks("```\nline one\nline two") == "```\nline one\nline two"


def test_a_fence_in_a_list_item_or_a_quote_is_code():
    assert keep_line_breaks("1. Install:\n   ```\n   pip install x\n   pip install y\n   ```") == (
        "1. Install:  \n   ```\n   pip install x\n   pip install y\n   ```")
    assert keep_line_breaks("> ```\n> a\n> b\n> ```") == "> ```\n> a\n> b\n> ```"


def test_inline_code_at_the_start_of_a_line_is_not_a_fence():
    assert keep_line_breaks("```x``` is code\nnext line\nlast") == "```x``` is code  \nnext line  \nlast"


def test_indented_code_is_unchanged_but_an_indented_continuation_breaks():
    assert keep_line_breaks("Code:\n\n    a = 1\n    b = 2\n\nText") == "Code:\n\n    a = 1\n    b = 2\n\nText"
    assert keep_line_breaks("    a = 1\n    b = 2") == "    a = 1\n    b = 2"
    # Indented code cannot interrupt a paragraph: this is the paragraph's next line.
    assert keep_line_breaks("Dear Sir,\n    yours") == "Dear Sir,  \n    yours"


def test_tables_are_unchanged():
    piped = "| a | b |\n|---|:-:|\n| 1 | 2 |\n| 3 | 4 |"
    assert keep_line_breaks(piped) == piped
    bare = "a | b\n--- | ---\n1 | 2"
    assert keep_line_breaks(bare) == bare
    assert keep_line_breaks(f"Totals:\n\n{piped}\n\nAfter\nthat") == f"Totals:\n\n{piped}\n\nAfter  \nthat"


def test_the_text_of_a_setext_heading_is_unchanged():
    assert keep_line_breaks("Title\n=====\nBody\nmore") == "Title\n=====\nBody  \nmore"
    assert keep_line_breaks("Title\n---") == "Title\n---"
    assert keep_line_breaks("Above\n\n***\nBelow") == "Above\n\n***\nBelow"


def test_list_item_lines_and_quote_lines_break():
    assert keep_line_breaks("1. Step one\n   with detail\n2. Step two") == "1. Step one  \n   with detail  \n2. Step two"
    assert keep_line_breaks("> quoted\n> lines") == "> quoted  \n> lines"
    rendered = _render(keep_line_breaks("1. Step one\n   with detail\n2. Step two"))
    assert [line.strip() for line in rendered.splitlines() if line.strip()] == ["1 Step one", "with detail", "2 Step two"]
    rendered = _render(keep_line_breaks("> quoted\n> lines"))
    assert [line.strip() for line in rendered.splitlines() if line.strip()] == ["▌ quoted", "▌ lines"]


def test_the_rule_is_idempotent():
    text = "a\nb\n\n```\nc\nd\n```\n| x |\n|---|\n| 1 |\n\ne\r\nf"
    once = keep_line_breaks(text)
    assert keep_line_breaks(once) == once


@pytest.mark.parametrize("markdown", [
    "# Heading\n\nA paragraph.\n\n## Sub\n\nAnother one.",
    "- one\n- two\n  - nested\n- three",
    "1. first\n2. second\n3. third",
    "```python\ndef f():\n    return 1\n```",
    "~~~\nplain  code\n~~~",
    "Code:\n\n    indented = True\n    more = False",
    "| name | size |\n|------|-----:|\n| a    | 1    |\n| b    | 22   |",
    "> a quote\n>\n> in two paragraphs",
    "Title\n=====\n\nText.",
    "Para one.\n\nPara two.\n\n---\n\nAfter a rule.",
])
def test_markdown_without_single_line_breaks_renders_as_before(markdown):
    assert _render(keep_line_breaks(markdown)) == _render(markdown)
