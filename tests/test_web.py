"""/web (issue 19): the user's sessions as a page on 127.0.0.1, tested in a real browser
(Debian's Chromium, headless, driven by Playwright) against the real REPL: the page lists,
opens and searches sessions; its link works once; a session's text is shown as text; the
REPL's conversation is bound as web-<id> and leaves no autosave copy."""

from __future__ import annotations

import os
import re
import shutil

import pytest
from repl_driver import Repl, plain

from chatcli.config.settings import Settings
from chatcli.core.messages import Message
from chatcli.engine import sessions
from chatcli.engine.conversation import Conversation

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]


def saved(env: dict[str, str], name: str, *turns: tuple[str, str]) -> None:
    conv = Conversation(Settings.load(env), journal=True)
    for question, answer in turns:
        conv.history += [Message("user", question), Message("assistant", answer)]
    sessions.save(conv, name)


@pytest.fixture
def browser():
    from playwright.sync_api import sync_playwright

    assert shutil.which(CHROMIUM), "make test installs Debian's chromium for this test; it is never skipped"
    with sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        yield launched
        launched.close()


def test_the_page_lists_opens_and_searches_sessions(repl_env, workdir, sessions_dir, browser):
    saved(repl_env, "deploy-plan", ("When does the freeze end?", "The freeze ends Friday."))
    saved(repl_env, "heron-notes", ("Where do herons nest?", "By the north pond."),
          ("A script?", "<img src=x onerror=document.title='owned'>"))
    repl = Repl(repl_env, "m", cwd=workdir)
    try:
        said = plain(repl.send("/web"))
        assert re.search(r"Attached to session 'web-[0-9a-f]{8}' \(0 messages; created\)\.", said), said
        url = re.search(r"(http://127\.0\.0\.1:\d+/\?token=[\w-]+)", said).group(1)
        page = browser.new_page()
        assert page.goto(url).status == 200  # the token is traded for a cookie, and the page comes
        page.wait_for_selector(".session")
        names = page.locator(".session .name").all_text_contents()
        assert "deploy-plan" in names and "heron-notes" in names
        assert any(name.startswith("web-") and name.endswith("(this conversation)") for name in names)

        page.click(".session[data-name='deploy-plan']")  # open one
        page.wait_for_selector("#reader .message")
        assert "The freeze ends Friday." in page.text_content("#reader")

        page.fill("#search", "herons nest")  # search every session
        page.wait_for_selector("#results .hit")
        assert "heron-notes" in page.text_content("#results")
        page.click("#results .hit")
        page.wait_for_selector("#m4")
        assert page.text_content("#m4 .content") == "<img src=x onerror=document.title='owned'>"  # text, not markup
        assert page.locator("#reader img").count() == 0 and page.title() == "chatcli sessions"

        stranger = browser.new_context().new_page()  # the link again, elsewhere: spent
        assert stranger.goto(url).status == 403
        assert stranger.goto(url.split("?")[0] + "api/sessions").status == 403
    finally:
        repl.close()


def test_the_web_conversation_is_bound_and_leaves_no_autosave(repl_env, workdir, sessions_dir):
    repl = Repl(repl_env, "m", cwd=workdir)
    try:
        repl.send("a first thought")
        said = plain(repl.send("/web"))
        name = re.search(r"session '(web-[0-9a-f]{8})'", said).group(1)
        repl.send("a second thought")
        assert "closed" in plain(repl.send("/web stop"))
    finally:
        repl.close()
    assert sorted(p.name for p in sessions_dir.glob("*.json")) == [f"{name}.json"]  # no autosave copy
