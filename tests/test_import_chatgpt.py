"""`chatcli import chatgpt`: ChatGPT's data export (its zip, or the conversations.json in it) as
chatcli sessions. The fixtures are built here, node by node, in the shapes the open-source
readers of the export declare (see store/sources/chatgpt.py)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from conftest import run_chatcli
from importing import continued, imported, journaled, made, searched, session_document, snapshot

from chatcli.core.imported import Tally
from chatcli.store.sources import chatgpt

MAY_1 = 1714550400.25  # 2024-05-01T08:00:00Z
JUNE_2 = 1717315200.5
JULY_3 = 1719993600.0


class Chat:
    """One ChatGPT conversation being written: each call adds a node under the current one (or
    under `parent`: a regenerated answer, an edited message), which becomes the current one."""

    def __init__(self, ident: str, title: str | None, start: float) -> None:
        self.ident = ident
        self.title = title
        self.start = self.clock = start
        self.root = "client-created-root"
        self.mapping: dict[str, dict] = {self.root: {"id": self.root, "message": None, "parent": None,
                                                      "children": []}}
        self.current = self.root
        self.count = 0

    def node(self, role: str, content: dict, *, name: str | None = None, recipient: str = "all",
             parent: str | None = None, **metadata) -> str:
        self.count += 1
        self.clock += 7
        node_id = f"{self.ident[:8]}-aaaa-4bbb-8ccc-{self.count:012d}"
        message = {"id": node_id, "author": {"role": role, "name": name, "metadata": {}},
                   "create_time": None if role == "system" else self.clock, "update_time": None,
                   "content": content, "status": "finished_successfully",
                   "end_turn": True if role == "assistant" and recipient == "all" else None,
                   "weight": 0.0 if role == "system" else 1.0, "metadata": metadata, "recipient": recipient,
                   "channel": None}
        parent = parent or self.current
        self.mapping[node_id] = {"id": node_id, "message": message, "parent": parent, "children": []}
        self.mapping[parent]["children"].append(node_id)
        self.current = node_id
        return node_id

    def system(self, value: str = "", **metadata) -> str:
        return self.node("system", text(value), is_visually_hidden_from_conversation=True, **metadata)

    def user(self, *parts, parent: str | None = None, **metadata) -> str:
        content = text(*parts) if all(isinstance(p, str) for p in parts) else \
            {"content_type": "multimodal_text", "parts": list(parts)}
        return self.node("user", content, parent=parent, **metadata)

    def assistant(self, value: str, parent: str | None = None, model: str = "gpt-4o", stop: str = "stop") -> str:
        return self.node("assistant", text(value), parent=parent, model_slug=model,
                         finish_details={"type": stop, "stop_tokens": [200002]})

    def call(self, recipient: str, code: str, kind: str = "code") -> str:
        content = {"content_type": "code", "language": "unknown", "response_format_name": None, "text": code} \
            if kind == "code" else text(code)
        return self.node("assistant", content, recipient=recipient, model_slug="gpt-4o")

    def tool(self, name: str, content: dict, **metadata) -> str:
        return self.node("tool", content, name=name, **metadata)

    def thoughts(self, summary: str, body: str, parent: str | None = None) -> str:
        content = {"content_type": "thoughts", "source_analysis_msg_id": "x",
                   "thoughts": [{"summary": summary, "content": body, "chunks": [], "finished": True}]}
        return self.node("assistant", content, parent=parent, model_slug="o3")

    def to_dict(self) -> dict:
        return {"title": self.title, "create_time": self.start, "update_time": self.clock, "mapping": self.mapping,
                "moderation_results": [], "current_node": self.current, "plugin_ids": None,
                "conversation_id": self.ident, "conversation_template_id": None, "gizmo_id": None,
                "gizmo_type": None, "is_archived": False, "is_starred": None, "safe_urls": [], "blocked_urls": [],
                "default_model_slug": "auto", "conversation_origin": None, "voice": None, "async_status": None,
                "disabled_tool_ids": [], "is_do_not_remember": False, "memory_scope": "global_enabled",
                "id": self.ident}


def text(*parts: str) -> dict:
    return {"content_type": "text", "parts": list(parts)}


def exported(*chats, extra: tuple = ()) -> str:
    """conversations.json as ChatGPT writes it: the conversations, the latest first."""
    ordered = sorted(chats, key=lambda chat: chat.start, reverse=True)
    return json.dumps([*(chat.to_dict() for chat in ordered), *extra])


def write_zip(path: Path, *chats) -> Path:
    """The export's zip: conversations.json among the other files ChatGPT puts there."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("conversations.json", exported(*chats))
        archive.writestr("user.json", json.dumps({"id": "user-1", "email": "user@example.org"}))
        archive.writestr("message_feedback.json", "[]")
        archive.writestr("chat.html", "<html><body>…</body></html>")
        archive.writestr("file-AbC123-plant.jpg", b"\xff\xd8\xff\xe0 jpeg")
    return path


def write_json(path: Path, *chats) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(exported(*chats))
    return path


def sums() -> Chat:
    """Custom instructions, a regenerated answer that ran Python after thinking, an edited
    question answered by browsing."""
    chat = Chat("6632a1b0-0000-4000-8000-000000000001", "Sum of one to a hundred", MAY_1)
    chat.system("")
    chat.node("user", {"content_type": "user_editable_context", "user_profile": "I teach maths.",
                       "user_instructions": "Be brief."},
              is_visually_hidden_from_conversation=True, is_user_system_message=True,
              user_context_message_data={"about_user_message": "I teach maths.", "about_model_message": "Be brief."})
    question = chat.user("What is the sum of 1 to 100?")
    chat.assistant("5050, I think.")  # regenerated below: a side branch
    chat.thoughts("Checking with Python", "Compute it rather than recall it.", parent=question)
    chat.call("python", "sum(range(1, 101))")
    chat.tool("python", {"content_type": "execution_output", "text": "5050"},
              aggregate_result={"status": "success", "code": "sum(range(1, 101))", "messages": []})
    answer = chat.assistant("The sum is 5050.")
    chat.user("Who found the trick?")  # edited below: a side branch
    chat.user("Search the web: how did Gauss add 1 to 100?", parent=answer)
    chat.call("browser", 'search("Gauss sum 1 to 100")')
    chat.tool("browser", {"content_type": "tether_browsing_display", "summary": None,
                          "result": "# 【0†Gauss and the school sum†example.org】\nHe paired the numbers."})
    chat.assistant("He paired 1 with 100, 2 with 99: fifty pairs of 101.")
    return chat


def plant() -> Chat:
    """A hidden context message, a photo and a file uploaded, thoughts, a plugin's result
    without its call."""
    chat = Chat("66a0c2d4-0000-4000-8000-000000000002", "Plant photo", JUNE_2)
    chat.system("")
    chat.user("The user is in Lisbon.", is_visually_hidden_from_conversation=True)
    chat.user({"content_type": "image_asset_pointer", "asset_pointer": "file-service://file-AbC123", "width": 1024,
               "height": 768, "size_bytes": 201334, "fovea": None, "metadata": None},
              "What plant is this?",
              attachments=[{"id": "file-AbC123", "name": "plant.jpg", "mime_type": "image/jpeg", "size": 201334},
                           {"id": "file-Doc9", "name": "care.pdf", "mime_type": "application/pdf", "size": 52000}])
    chat.thoughts("Identifying leaf shape", "Serrated, opposite leaves.")
    chat.node("assistant", {"content_type": "reasoning_recap", "content": "Thought for 6s"}, model_slug="o3")
    chat.assistant("It looks like mint (Mentha).", model="o3")
    chat.user("Will it survive outside this week?")
    chat.tool("weather.forecast", text("Lisbon: 18-24 C, no frost."))  # a plugin: no call before it
    chat.assistant("Yes: no frost is forecast.", model="o3")
    return chat


def cat() -> Chat:
    """An image made by DALL·E: its call's arguments are JSON, its result an image and a note."""
    chat = Chat("66859a00-0000-4000-8000-000000000003", "Cat in a teacup", JULY_3)
    chat.system("")
    chat.user("Draw a cat in a teacup")
    chat.call("dalle.text2im", '{"prompt": "a cat in a teacup", "size": "1024x1024"}', kind="text")
    chat.tool("dalle.text2im", {"content_type": "multimodal_text", "parts": [
        {"content_type": "image_asset_pointer", "asset_pointer": "sediment://file_77", "width": 1024, "height": 1024,
         "size_bytes": 300000, "metadata": {"dalle": {"prompt": "a cat in a teacup", "seed": 1}}}]})
    chat.tool("dalle.text2im", text("DALL·E displayed 1 images. The images are already plainly visible."))
    chat.assistant("Here is your cat in a teacup.")
    return chat


SUMS = "chatgpt-2024-05-01-sum-of-one-to-a-hundred"
PLANT = "chatgpt-2024-06-02-plant-photo"
CAT = "chatgpt-2024-07-03-cat-in-a-teacup"


@pytest.mark.parametrize("form", ["zip", "file", "directory"])
def test_an_export_becomes_searchable_sessions_that_continue(form, openai_env, openai_server, home):
    downloads = home / "Downloads"
    chats = sums(), plant(), cat()
    if form == "zip":
        given = write_zip(downloads / "chatgpt-export.zip", *chats)
    elif form == "file":
        given = write_json(downloads / "conversations.json", *chats)
    else:
        given = write_json(downloads / "export" / "conversations.json", *chats).parent
    before = snapshot(downloads)

    report = imported(openai_env, "chatgpt", str(given))

    assert report.startswith(f"Imported from ChatGPT (~/Downloads/{given.name}): 3 new sessions")
    assert made(report) == [SUMS, PLANT, CAT]  # oldest first, though the export lists the latest first
    assert f"new '{SUMS}': 8 messages; left out: 2 side branches, 1 set of custom instructions, " \
           "1 thinking block" in report
    assert f"new '{PLANT}': 6 messages; left out: 1 attached file, 1 hidden context message, 1 image, " \
           "1 thinking block" in report
    assert f"new '{CAT}': 4 messages; left out: 1 image" in report
    assert "skipped" not in report
    assert snapshot(downloads) == before  # only read

    document = session_document(openai_env, SUMS)
    assert document["title"] == "Sum of one to a hundred"
    record = document["imported"]
    assert (record["source"], record["id"]) == ("chatgpt", "6632a1b0-0000-4000-8000-000000000001")
    assert record["details"] == {"models": ["o3", "gpt-4o"]}
    history = document["chat_history"]
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant", "user", "assistant", "tool",
                                            "assistant"]
    ran = history[1]
    assert ran["content"] == "" and ran["meta"]["thinking"] == "Checking with Python\nCompute it rather than recall it."
    [python] = ran["tool_calls"]
    assert (python["name"], python["arguments"]) == ("python", {"code": "sum(range(1, 101))"})
    assert python["id"].startswith("call_")
    assert (history[2]["tool_call_id"], history[2]["content"]) == (python["id"], "5050")
    assert history[2]["timestamp"] == "2024-05-01T08:00:49+00:00"
    assert history[4]["content"] == "Search the web: how did Gauss add 1 to 100?"
    [browser] = history[5]["tool_calls"]
    assert (browser["name"], browser["arguments"]) == ("browser", {"code": 'search("Gauss sum 1 to 100")'})
    assert history[6]["tool_call_id"] == browser["id"] and "He paired the numbers." in history[6]["content"]

    plant_history = session_document(openai_env, PLANT)["chat_history"]
    assert [m["role"] for m in plant_history] == ["user", "assistant", "user", "assistant", "tool", "assistant"]
    assert plant_history[0]["content"] == ("What plant is this?\n[image (1024x768, 196 KB): not imported]\n"
                                           "[file care.pdf (application/pdf, 50 KB): not imported]")
    assert plant_history[0]["meta"]["left_out"] == ["image (1024x768, 196 KB)",
                                                    "file care.pdf (application/pdf, 50 KB)"]
    assert plant_history[1]["meta"]["thinking"] == "Identifying leaf shape\nSerrated, opposite leaves."
    [plugin] = plant_history[3]["tool_calls"]  # put back: the plugin's result came without it
    assert (plugin["name"], plugin["arguments"]) == ("weather_forecast", {})
    assert plant_history[4]["tool_call_id"] == plugin["id"]
    assert plant_history[4]["content"] == "Lisbon: 18-24 C, no frost."

    cat_history = session_document(openai_env, CAT)["chat_history"]
    [drawing] = cat_history[1]["tool_calls"]
    assert (drawing["name"], drawing["arguments"]) == ("dalle_text2im",
                                                       {"prompt": "a cat in a teacup", "size": "1024x1024"})
    assert cat_history[2]["content"] == ("[generated image (1024x1024, 292 KB): not imported]\n\n"
                                         "DALL·E displayed 1 images. The images are already plainly visible.")

    assert SUMS in searched(openai_env, "paired", "numbers")
    sent = continued(openai_env, openai_server, SUMS)
    assert [m["role"] for m in sent[-9:]] == ["user", "assistant", "tool", "assistant", "user", "assistant", "tool",
                                              "assistant", "user"]
    calls = sent[-8]["tool_calls"]
    assert [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
        (python["id"], "python", {"code": "sum(range(1, 101))"})]
    assert (sent[-7]["tool_call_id"], sent[-7]["content"]) == (python["id"], "5050")
    assert sent[-4]["tool_calls"][0]["id"] == sent[-3]["tool_call_id"] == browser["id"]
    assert sent[-1]["content"] == "and then?"


def freeze() -> Chat:
    chat = Chat("6640aa00-0000-4000-8000-00000000000a", "Deploy freeze", MAY_1)
    chat.system("")
    chat.user("Is the freeze over?")
    chat.assistant("Not until Friday.")
    return chat


def herbs() -> Chat:
    chat = Chat("6640bb00-0000-4000-8000-00000000000b", "Herbs", JUNE_2)
    chat.system("")
    chat.user("Name a herb")
    chat.assistant("Mint.")
    return chat


def test_importing_again_adds_what_grew_leaves_what_was_edited_and_nothing_twice(env, home):
    path = home / "Downloads" / "conversations.json"
    first, second = freeze(), herbs()
    write_json(path, first, second)
    report = imported(env, "chatgpt", str(path))
    assert made(report) == ["chatgpt-2024-05-01-deploy-freeze", "chatgpt-2024-06-02-herbs"]

    again = imported(env, "chatgpt", str(path))
    assert made(again) == [] and "0 new sessions, 0 grown, 0 messages written; 2 already imported" in again

    first.user("And after Friday?")
    first.assistant("Deploys resume Monday.")
    # The herb question edited in ChatGPT: the current branch now leaves from before it.
    asked = second.mapping[second.current]["parent"]
    second.user("Name a spice", parent=second.mapping[asked]["parent"])
    second.assistant("Pepper.")
    write_json(path, first, second)
    later = imported(env, "chatgpt", str(path))
    assert "added 2 messages to 'chatgpt-2024-05-01-deploy-freeze' (now 4 messages)" in later
    assert "left 'chatgpt-2024-06-02-herbs': an earlier message changed at the source since it was imported " \
           "(edited there); left as it was" in later
    name = "chatgpt-2024-05-01-deploy-freeze"
    history = session_document(env, name)["chat_history"]
    assert [m["content"] for m in history] == ["Is the freeze over?", "Not until Friday.", "And after Friday?",
                                               "Deploys resume Monday."]
    assert journaled(env, name) == [m["content"] for m in history]  # each message once in its journal
    assert [m["content"] for m in session_document(env, "chatgpt-2024-06-02-herbs")["chat_history"]] == [
        "Name a herb", "Mint."]
    assert run_chatcli("session", "list", env=env).stdout.count("chatgpt-") == 2


def test_a_file_cut_short_gives_the_conversations_before_the_cut(env, home):
    path = home / "Downloads" / "conversations.json"
    first, second, third = sums(), plant(), cat()
    third.node("assistant", {"content_type": "hologram", "frames": []})  # a kind no reader knows: newer ChatGPT
    whole = exported(first, second, third, extra=({"kind": "feedback", "rating": 1},))
    # The oldest conversation is listed last but one: the file stops half-way through it.
    cut = whole[:whole.index("He paired 1 with 100") + 10]
    path.parent.mkdir(parents=True)
    path.write_text(cut)

    report = imported(env, "chatgpt", str(path))

    assert made(report) == [PLANT, CAT]
    assert "~/Downloads/conversations.json: skipped 1 conversation cut short, " \
           "1 message of unknown content type 'hologram'" in report
    assert [m["content"] for m in session_document(env, CAT)["chat_history"]][-1] == "Here is your cat in a teacup."

    whole_path = home / "Downloads" / "full" / "conversations.json"
    whole_path.parent.mkdir()
    whole_path.write_text(whole)
    report = imported(env, "chatgpt", str(whole_path))
    assert made(report) == [SUMS]
    assert "~/Downloads/full/conversations.json: skipped 1 entry that is not a conversation, " \
           "1 message of unknown content type 'hologram'" in report


@pytest.mark.parametrize("name,data,said", [
    ("notes.txt", b"shopping: eggs, milk\n", "~/notes.txt is not a ChatGPT export (give the export's .zip, "
                                             "its conversations.json or the directory holding it)"),
    ("other.zip", None, "~/other.zip is not a ChatGPT export: it holds no conversations.json"),
    ("torn.zip", b"torn", "~/torn.zip cannot be read as a zip (is it cut short?)"),
    ("nowhere", b"", "no ChatGPT export at ~/nowhere: it does not exist"),
])
def test_what_is_not_an_export_is_said_in_one_line(name, data, said, env, home):
    path = home / name
    if name.endswith(".zip"):
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("photos/cat.jpg", b"jpeg")
        if data is not None:
            path.write_bytes(path.read_bytes()[:-30])  # cut before its directory
    elif data:
        path.write_bytes(data)
    result = run_chatcli("import", "chatgpt", str(path), env=env)
    assert result.returncode == 1
    assert result.stderr.startswith(f"chatcli: error: {said}") and result.stderr.count("\n") == 1
    assert "Traceback" not in result.stdout + result.stderr


def test_without_a_path_the_downloads_folder_is_looked_at(env, home):
    result = run_chatcli("import", "chatgpt", env=env)
    assert result.returncode == 1
    assert result.stderr == "chatcli: error: no ChatGPT export at ~/Downloads/conversations.json: it does not " \
                            "exist (give the export's .zip, its conversations.json or the directory holding it)\n"
    write_json(home / "Downloads" / "conversations.json", freeze())
    assert made(imported(env, "chatgpt")) == ["chatgpt-2024-05-01-deploy-freeze"]


def read(path: Path) -> tuple[list, Tally]:
    tally = Tally(path.name)
    return list(chatgpt.read(path, tally)), tally


def shape(found) -> list[tuple]:
    """Each message as (role, its text, the ids of its calls or the id it answers)."""
    return [(m.role, m.content, m.tool_call_id or [c["id"] for c in m.tool_calls or []]) for m in found.messages]


def test_every_call_has_its_result_and_every_result_its_call(tmp_path):
    chat = Chat("6650cc00-0000-4000-8000-00000000000c", "Tools", MAY_1)
    chat.user("Run both")
    chat.assistant("Running them.")
    first = chat.call("python", "1 + 1")
    second = chat.call("python", "2 + 2")  # a second call in the same response
    chat.tool("python", {"content_type": "execution_output", "text": "4"})  # answers the latest
    chat.tool("python", {"content_type": "system_error", "name": "tool_error", "text": "kernel died"})
    chat.user("And search?")
    lost = chat.call("browser", 'search("x")')  # its result never came
    chat.user("Never mind")
    orphan = chat.tool("bio", text("Model set context updated."))  # no call: one is put back
    chat.assistant("Noted.")
    [found], tally = read(write_json(tmp_path / "c.json", chat))
    assert not tally
    ids = {node: chatgpt._call_id(node) for node in (first, second, lost, orphan)}
    assert shape(found) == [
        ("user", "Run both", []),
        ("assistant", "Running them.", [ids[first], ids[second]]),
        ("tool", "4", ids[second]),
        ("tool", "tool_error: kernel died", ids[first]),
        ("user", "And search?", []),
        ("assistant", "", [ids[lost]]),
        ("tool", chatgpt.NO_RESULT, ids[lost]),
        ("user", "Never mind", []),
        ("assistant", "", [ids[orphan]]),
        ("tool", "Model set context updated.", ids[orphan]),
        ("assistant", "Noted.", []),
    ]
    assert found.messages[3].extra["is_error"] is True


def test_an_answer_continued_is_one_message_and_a_lost_current_node_gives_the_newest_branch(tmp_path):
    chat = Chat("6650dd00-0000-4000-8000-00000000000d", None, MAY_1)
    chat.user("Write a long poem")
    chat.assistant("Roses are", stop="max_tokens")
    continued_node = chat.assistant(" red.")  # "continue generating"
    chat.user("Shorter", parent=chat.root)  # the question edited later: the newest leaf
    chat.assistant("Red.")
    data = chat.to_dict()
    data["current_node"] = "gone"
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([data]))
    [found], _ = read(path)
    assert [m.content for m in found.messages] == ["Shorter", "Red."]
    assert found.title == "Shorter" and found.left_out == {"side branch": 1}
    data["current_node"] = continued_node
    path.write_text(json.dumps([data]))
    [found], _ = read(path)
    assert [m.content for m in found.messages] == ["Write a long poem", "Roses are red."]
    assert found.title == "Write a long poem" and found.left_out == {"side branch": 1}


def test_a_large_export_is_read_in_order_one_conversation_at_a_time(tmp_path, monkeypatch):
    monkeypatch.setattr(chatgpt, "KEEP_BELOW", 0)  # every conversation read again when its turn comes
    old, new = freeze(), herbs()
    stale = freeze()
    stale.clock -= 100  # an older copy of the same conversation (two parts of a split export)
    data = [new.to_dict(), old.to_dict(), stale.to_dict()]
    data[2]["mapping"][stale.current]["message"]["content"]["parts"] = ["stale"]
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(data, indent=1))
    found, tally = read(path)
    assert not tally
    assert [f.title for f in found] == ["Deploy freeze", "Herbs"]
    assert [m.content for m in found[0].messages] == ["Is the freeze over?", "Not until Friday."]


def test_a_split_export_is_read_from_its_parts_each_conversation_once(tmp_path):
    old, new = freeze(), herbs()
    stale = freeze()
    stale.clock -= 100
    stale.mapping[stale.current]["message"]["content"]["parts"] = ["stale"]
    path = tmp_path / "export.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("conversations-000.json", json.dumps([new.to_dict(), stale.to_dict()]))
        archive.writestr("conversations-001.json", json.dumps([old.to_dict()]))
    assert chatgpt.files(path) == [path]
    found, tally = read(path)
    assert not tally
    assert [(f.title, f.messages[-1].content) for f in found] == [("Deploy freeze", "Not until Friday."),
                                                                   ("Herbs", "Mint.")]


def test_an_unpacked_split_export_is_read_as_one_each_conversation_once(env, tmp_path):
    old, stale = freeze(), freeze()
    stale.clock -= 100
    stale.mapping[stale.current]["message"]["content"]["parts"] = ["stale"]
    export = tmp_path / "export"
    export.mkdir()
    (export / "conversations-000.json").write_text(json.dumps([herbs().to_dict(), stale.to_dict()]))
    (export / "conversations-001.json").write_text(json.dumps([old.to_dict()]))
    assert chatgpt.files(export) == [export]
    first = imported(env, "chatgpt", str(export))
    assert sorted(made(first)) == ["chatgpt-2024-05-01-deploy-freeze", "chatgpt-2024-06-02-herbs"]
    assert session_document(env, "chatgpt-2024-05-01-deploy-freeze")["chat_history"][-1]["content"] == \
        "Not until Friday."
    assert "2 already imported and unchanged." in imported(env, "chatgpt", str(export))


def test_an_odd_value_costs_its_own_conversation_only(tmp_path):
    odd = freeze()
    odd.ident = "odd-one"
    image = {"content_type": "image_asset_pointer", "asset_pointer": "file-service://x", "size_bytes": float("nan")}
    odd.user("look", image)
    deep = herbs()
    deep.call("python", "x" * 3)
    deep.mapping[deep.current]["message"]["content"]["text"] = "[" * 100_000 + "]" * 100_000  # JSON: a deep list
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([odd.to_dict(), deep.to_dict(), freeze().to_dict() | {"conversation_id": "fine"}],
                               allow_nan=True))
    found, tally = read(path)
    assert [f.id for f in found] == ["odd-one", "fine"]  # the image of no size named without one
    assert tally.kinds == {"conversation that could not be read": 1}  # the call nested past reading
