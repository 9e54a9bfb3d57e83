"""`chatcli session list` shows every session as its file is now: rewritten in place by another
program (same name, same inode, the directory unchanged), retitled, damaged, deleted; and after
one change it updates that row of its saved rendering instead of making the listing again."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

from conftest import run_chatcli

from chatcli.config.settings import Settings
from chatcli.core.messages import Message
from chatcli.engine import sessions as engine_sessions
from chatcli.engine.conversation import Conversation
from chatcli.store import listing_cache


def sessions_of(env) -> Path:
    return Path(env["CHATCLI_HOME"]) / "sessions"


def document(messages: int, title: str | None = None) -> str:
    history = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"} for i in range(messages)]
    return json.dumps({"version": 2, **({"title": title} if title is not None else {}), "chat_history": history})


def plant(env, name: str, messages: int, title: str | None = None) -> Path:
    sessions = sessions_of(env)
    sessions.mkdir(parents=True, exist_ok=True)
    path = sessions / f"{name}.json"
    path.write_text(document(messages, title))
    return path


def settle(env) -> None:
    """As if the last session was written a minute ago: a directory that looks settled, where a
    listing that trusted the directory's mtime missed a file rewritten in place."""
    sessions = sessions_of(env)
    st = sessions.stat()
    os.utime(sessions, ns=(st.st_atime_ns, st.st_mtime_ns - 60_000_000_000))


def rewrite_in_place(path: Path, content: str | bytes) -> None:
    """What another program (Go ChatCLI, an editor) does: open with O_TRUNC and write. The
    file keeps its inode and the directory its mtime."""
    directory, inode = path.parent.stat().st_mtime_ns, path.stat().st_ino
    with open(path, "wb") as handle:
        handle.write(content.encode() if isinstance(content, str) else content)
    assert (path.parent.stat().st_mtime_ns, path.stat().st_ino) == (directory, inode)


def listed(env) -> dict[str, str]:
    """{name: its row after the name} as `chatcli session list` prints them."""
    result = run_chatcli("session", "list", env=env)
    assert result.returncode == 0, result.stderr
    return {line.split()[0]: " ".join(line.split()[1:]) for line in result.stdout.splitlines()[1:] if line.strip()}


def remade(env) -> str:
    """What `chatcli session list` prints with no saved rendering: the listing formatted whole."""
    (Path(env["CHATCLI_HOME"]) / "sessions.listing.txt").unlink(missing_ok=True)
    result = run_chatcli("session", "list", env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout


def listed_json(env) -> dict[str, dict]:
    result = run_chatcli("session", "list", "--json", env=env)
    assert result.returncode == 0, result.stderr
    return {row["name"]: row for row in json.loads(result.stdout)}


def test_a_session_rewritten_in_place_shows_its_new_count(env):
    path = plant(env, "shared", 27)
    plant(env, "other", 2)
    settle(env)
    assert listed(env)["shared"].startswith("27 msgs")
    assert listed(env)["shared"].startswith("27 msgs")  # printed from the saved rendering
    rewrite_in_place(path, document(29))
    assert listed(env)["shared"].startswith("29 msgs")
    assert listed_json(env)["shared"]["messages"] == 29
    assert listed(env)["other"].startswith("2 msgs")


def test_a_rewrite_of_the_same_size_with_its_old_mtime_put_back_is_seen(env):
    # As `cp -p`, `rsync -t` or `touch -r` leave it: size and mtime as before, content not.
    path = plant(env, "kept", 4, "alpha title")
    settle(env)
    assert listed(env)["kept"].endswith("alpha title")
    before = path.stat()
    rewrite_in_place(path, document(4, "omega title"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert listed(env)["kept"].endswith("omega title")
    assert listed_json(env)["kept"]["title"] == "omega title"


def test_a_title_changed_in_place_shows_in_the_listing(env):
    path = plant(env, "named", 2, "the first title")
    settle(env)
    assert listed(env)["named"].endswith("the first title")
    rewrite_in_place(path, document(2, "a better title"))
    row = listed(env)["named"]
    assert row.startswith("2 msgs") and row.endswith("a better title") and "first" not in row


def test_a_file_damaged_in_place_shows_its_problem_then_its_repair(env):
    path = plant(env, "fragile", 3)
    plant(env, "sound", 1)
    settle(env)
    assert listed(env)["fragile"].startswith("3 msgs")
    rewrite_in_place(path, '{"version": 2, "chat_history": [')
    row = listed(env)["fragile"]
    assert row.startswith("unreadable") and "not valid JSON" in row, row
    assert "not valid JSON" in listed_json(env)["fragile"]["problem"]
    rewrite_in_place(path, document(5))  # mended by hand
    assert listed(env)["fragile"].startswith("5 msgs")
    assert listed(env)["sound"].startswith("1 msg")


def test_a_deleted_session_leaves_the_listing_even_when_the_directory_looks_unchanged(env):
    gone = plant(env, "gone", 2)
    plant(env, "stays", 2)
    settle(env)
    assert set(listed(env)) == {"gone", "stays"}
    sessions = sessions_of(env)
    st = sessions.stat()
    gone.unlink()
    os.utime(sessions, ns=(st.st_atime_ns, st.st_mtime_ns))  # the directory's mtime as it was
    assert set(listed(env)) == {"stays"}
    assert set(listed_json(env)) == {"stays"}


def test_a_new_session_another_program_writes_is_listed(env):
    plant(env, "first", 2)
    settle(env)
    assert set(listed(env)) == {"first"}
    st = sessions_of(env).stat()
    plant(env, "second-one-with-a-longer-name", 6, "from elsewhere")
    os.utime(sessions_of(env), ns=(st.st_atime_ns, st.st_mtime_ns))
    rows = listed(env)
    assert rows["second-one-with-a-longer-name"].startswith("6 msgs") and rows["first"].startswith("2 msgs")


def test_after_one_rewrite_only_that_row_of_the_rendering_is_made_again(env):
    for name in ("alpha", "beta", "gamma"):
        plant(env, name, 2, f"{name} title")
    settle(env)
    listed(env)
    rendered = Path(env["CHATCLI_HOME"]) / "sessions.listing.txt"
    text = rendered.read_text()
    assert "alpha title" in text
    rendered.write_text(text.replace("alpha title", "FROM-THE-RENDERING"))  # only a rendering says this
    rewrite_in_place(sessions_of(env) / "gamma.json", document(8, "gamma rewritten"))
    result = run_chatcli("session", "list", env=env)
    lines = result.stdout.splitlines()
    assert lines[0] == "Sessions (3), newest first:"
    assert lines[1].split()[:3] == ["gamma", "8", "msgs"] and lines[1].endswith("gamma rewritten")  # newest
    assert "FROM-THE-RENDERING" in result.stdout  # the other rows were kept, not formatted again
    assert rendered.read_text().split("\n", 1)[1] == result.stdout  # kept for the next listing
    assert "FROM-THE-RENDERING" in run_chatcli("session", "list", env=env).stdout  # printed from it
    assert remade(env) == result.stdout.replace("FROM-THE-RENDERING", "alpha title")  # what a whole listing prints


def test_a_session_rewritten_twice_in_a_row_shows_the_last_version(env):
    path = plant(env, "busy", 2)
    settle(env)
    listed(env)
    for count in (3, 5, 4):
        rewrite_in_place(path, document(count))
        assert listed(env)["busy"].startswith(f"{count} msgs")


def test_with_encryption_on_a_session_rewritten_in_place_shows_its_new_size_and_nothing_from_inside(env):
    from chatcli.config.settings import Settings
    from chatcli.core.messages import Message
    from chatcli.core.session import SessionData
    from chatcli.store.home import Home

    sealed = dict(env, CHATCLI_ENCRYPTION_KEY=base64.b64encode(os.urandom(32)).decode())
    store = Home.of(Settings.load(sealed)).sessions()
    for name, count in (("small", 1), ("large", 40)):
        store.write(name, SessionData(history=[Message("user", f"secret words {i}") for i in range(count)]))
    settle(env)
    first = listed(sealed)
    small, large = store.path("small"), store.path("large")
    rewrite_in_place(small, large.read_bytes())  # other sealed bytes restored in place
    rows = listed(sealed)
    assert rows["small"] != first["small"] and rows["small"].split()[:2] == rows["large"].split()[:2], rows
    caches = [Path(env["CHATCLI_HOME"]) / f"sessions{suffix}" for suffix in (".catalog.json", ".listing.txt")]
    assert all(b"secret" not in path.read_bytes() for path in caches)
    assert json.loads(caches[0].read_text())["entries"]["small"][2:6] == [None, "", "", ""]


def test_a_listing_updated_row_by_row_is_the_listing_formatted_whole(env):
    # Files of one mtime are listed in directory order: rows made again must land where a whole
    # listing puts them, through rewrites, new files, deletions, damage and an editor's rename.
    sessions = sessions_of(env)
    for index, name in enumerate(["s01", "s02", "s03", "s04", "s05", "s06"]):
        plant(env, name, index + 1, f"title {name}")
    tie = 1_700_000_000_000_000_000
    for name in ("s02", "s04", "s05"):
        os.utime(sessions / f"{name}.json", ns=(tie, tie))
    settle(env)
    assert listed(env)
    steps = [
        lambda: rewrite_in_place(sessions / "s03.json", document(9, "rewritten")),
        lambda: (rewrite_in_place(sessions / "s01.json", document(3, "same time as others")),
                 os.utime(sessions / "s01.json", ns=(tie, tie))),
        lambda: plant(env, "s07", 2, "a new one"),
        lambda: (sessions / "s02.json").unlink(),
        lambda: rewrite_in_place(sessions / "s04.json", "{not json"),
        lambda: ((sessions / "s05.tmp").write_text(document(4, "saved by an editor")),
                 os.replace(sessions / "s05.tmp", sessions / "s05.json")),
        lambda: (rewrite_in_place(sessions / "s06.json", document(6, "title s06")),
                 os.utime(sessions / "s06.json", ns=(tie + 1, tie + 1))),
    ]
    for step in steps:
        step()
        shown = run_chatcli("session", "list", env=env).stdout
        assert shown == remade(env), step


def test_a_turn_appended_in_place_shows_its_count_under_the_same_title(env):
    conv = Conversation(Settings.load(env), journal=False)
    engine_sessions.start(conv, name="long")
    conv.history += [Message("user" if i % 2 == 0 else "assistant", f"message {i} " + "word " * 200)
                     for i in range(300)]  # past 256 KB: turns are appended in place
    conv.binding.write_through()
    plant(env, "short", 2, "another")
    settle(env)
    before = listed(env)["long"]
    assert before.startswith("300 msgs") and "message 0 word word" in before
    path = sessions_of(env) / "long.json"
    inode, directory = path.stat().st_ino, path.parent.stat().st_mtime_ns
    conv.history += [Message("user", "one more question"), Message("assistant", "one more answer")]
    conv.binding.write_through()
    assert (path.stat().st_ino, path.parent.stat().st_mtime_ns) == (inode, directory)  # in place
    shown = run_chatcli("session", "list", env=env).stdout
    row = listed(env)["long"]
    assert row.startswith("302 msgs") and row.split(" ", 4)[4] == before.split(" ", 4)[4]  # count, time, title
    assert shown == remade(env)


def test_a_file_read_within_a_coarse_clock_tick_of_its_change_is_read_again():
    # On a clock that counts whole seconds a file may change again, at the same size, without
    # its stamp changing: its row is kept with a ctime no file has until it settles.
    second = 1_000_000_000
    now = 1_700_000_000 * second + 500_000_000

    def stat_with(ctime_ns: int) -> os.stat_result:
        return os.stat_result((0o100600, 7, 1, 1, 0, 0, 10, 0, 0, 0, 0.0, 0.0, 0.0, 0, ctime_ns, ctime_ns))

    assert listing_cache.kept_ctime(stat_with(now - 123_456_789), now) == now - 123_456_789  # a fine clock
    assert listing_cache.kept_ctime(stat_with(1_700_000_000 * second), now) == 0  # whole seconds, just now
    assert listing_cache.kept_ctime(stat_with(1_699_999_990 * second), now) == 1_699_999_990 * second  # settled
