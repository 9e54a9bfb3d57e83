"""/web: the user's sessions as a page on 127.0.0.1, tested in a real browser
(Debian's Chromium, headless, driven by Playwright) against the real REPL: the page lists,
opens and searches sessions; its link works once; a session's text is shown as text; the
REPL's conversation is bound as web-<id> and leaves no autosave copy."""

from __future__ import annotations

import http.client
import json
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


def cookie_for(view) -> str:
    """The Cookie header the page's browser sends: its one-time link traded for the cookie."""
    connection = http.client.HTTPConnection("127.0.0.1", view.port, timeout=10)
    try:
        connection.request("GET", view.link().split(str(view.port), 1)[1])
        response = connection.getresponse()
        response.read()
        assert response.status == 303
        return response.getheader("Set-Cookie").split(";")[0]
    finally:
        connection.close()


def api_get(view, path: str, cookie: str) -> tuple[int, dict]:
    """An API call as the page makes it (no browser needed to see a status and its JSON)."""
    connection = http.client.HTTPConnection("127.0.0.1", view.port, timeout=10)
    try:
        connection.request("GET", path, headers={"Cookie": cookie})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def test_a_search_that_is_not_utf8_is_refused_in_one_line(env):
    from chatcli.engine.webview import WebView

    saved(env, "heron-notes", ("Where do herons nest?", "By the north pond."))
    view = WebView(Conversation(Settings.load(env)))
    try:
        cookie = cookie_for(view)
        status, answer = api_get(view, "/api/search?q=%ff%ff", cookie)
        assert (status, answer) == (400, {"error": "the query is not valid UTF-8"})
        status, answer = api_get(view, "/api/search?q=%21%21", cookie)  # no word in it
        assert (status, answer) == (400, {"error": "nothing to search for: give one or more words"})
        status, answer = api_get(view, "/api/search?q=h%C3%A9rons", cookie)  # UTF-8 still searches
        assert status == 200 and [group["name"] for group in answer["groups"]] == ["heron-notes"]
    finally:
        view.stop()


def test_a_page_position_that_is_a_digit_but_no_number_is_ignored_not_a_server_error(env):
    from chatcli.engine.webview import WebView

    saved(env, "heron-notes", ("Where do herons nest?", "By the north pond."))
    view = WebView(Conversation(Settings.load(env)))
    try:
        cookie = cookie_for(view)
        status, answer = api_get(view, "/api/sessions/heron-notes?before=%C2%B2", cookie)  # "²" is a digit to str
        assert status == 200 and len(answer["messages"]) == 2, answer
    finally:
        view.stop()


# -- /web and --continue: a page nobody chatted in leaves no session ---------------------------
def _left(repl: Repl) -> str:
    """Leave the REPL by /exit; what it printed on the way out."""
    import pexpect

    repl.child.send("/exit\r")
    repl.child.expect(pexpect.EOF)
    return plain(repl.child.before)


def test_a_web_page_nobody_chatted_in_leaves_no_session_and_continue_resumes_the_last_chat(
        repl_env, workdir, sessions_dir):
    from conftest import run_chatcli

    first = run_chatcli("--session", "notes", "-p", "a first note", env=repl_env, cwd=workdir)
    assert first.returncode == 0, first.stderr
    repl = Repl(repl_env, "m", cwd=workdir)
    try:
        said = plain(repl.send("/web"))
        assert re.search(r"session 'web-[0-9a-f]{8}'", said), said
        leaving = _left(repl)
        assert "saved in session 'web-" not in leaving, leaving  # it is not: it goes
    finally:
        repl.close()
    listed = run_chatcli("session", "list", env=repl_env, cwd=workdir)
    assert listed.returncode == 0 and "notes" in listed.stdout, listed.stdout + listed.stderr
    assert "web-" not in listed.stdout, listed.stdout
    assert not list(sessions_dir.glob("web-*")), "the unused page's session file is gone"
    resumed = run_chatcli("-c", "-p", "hi", env=repl_env, cwd=workdir)
    assert resumed.returncode == 0, resumed.stderr
    assert "Resumed session 'notes' (2 messages)." in resumed.stderr, resumed.stderr


def test_a_web_page_whose_conversation_was_chatted_in_keeps_its_session_and_continue_picks_it(
        repl_env, workdir, sessions_dir):
    from conftest import run_chatcli

    assert run_chatcli("--session", "notes", "-p", "a first note", env=repl_env, cwd=workdir).returncode == 0
    repl = Repl(repl_env, "m", cwd=workdir)
    try:
        name = re.search(r"session '(web-[0-9a-f]{8})'", plain(repl.send("/web"))).group(1)
        repl.send("a thought while the page is open")
        _left(repl)
    finally:
        repl.close()
    later = Repl(repl_env, "m", cwd=workdir)  # a page opened later and left unused does not take its place
    try:
        unused = re.search(r"session '(web-[0-9a-f]{8})'", plain(later.send("/web"))).group(1)
        _left(later)
    finally:
        later.close()
    listed = run_chatcli("session", "list", env=repl_env, cwd=workdir)
    assert name in listed.stdout and unused not in listed.stdout, listed.stdout
    resumed = run_chatcli("-c", "-p", "hi", env=repl_env, cwd=workdir)
    assert resumed.returncode == 0, resumed.stderr
    assert f"Resumed session '{name}' (2 messages)." in resumed.stderr, resumed.stderr


def test_web_stop_removes_the_session_of_a_page_nobody_chatted_in(env, sessions_dir):
    from chatcli.commands.web import web_command

    conv = Conversation(Settings.load(env), journal=True)
    name = re.search(r"session '(web-[0-9a-f]{8})'", web_command(conv, "").text).group(1)
    assert (sessions_dir / f"{name}.json").exists()
    stopped = web_command(conv, "stop").text
    assert name in stopped and not (sessions_dir / f"{name}.json").exists(), stopped
    assert conv.session_name is None  # not bound to a session that is gone


def test_web_stop_keeps_a_session_written_to_meanwhile(env, sessions_dir):
    from chatcli.commands.web import web_command

    conv = Conversation(Settings.load(env), journal=True)
    name = re.search(r"session '(web-[0-9a-f]{8})'", web_command(conv, "").text).group(1)
    other = Conversation(Settings.load(env), journal=True)  # another surface attaches and writes a turn
    sessions.attach(other, name)
    other.history += [Message("user", "from elsewhere"), Message("assistant", "noted")]
    sessions.save(other, name)
    web_command(conv, "stop")
    assert (sessions_dir / f"{name}.json").exists()


def test_continue_passes_over_a_newer_empty_session(env):
    saved(env, "notes", ("Where do herons nest?", "By the north pond."))
    sessions.attach(Conversation(Settings.load(env), journal=True), "blank")  # created, 0 messages, newer
    later = Conversation(Settings.load(env), journal=True)
    assert sessions.start(later, resume=True) == ["Resumed session 'notes' (2 messages)."]
