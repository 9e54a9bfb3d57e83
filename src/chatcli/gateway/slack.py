"""The Slack adapter of the chat gateway (slack-bolt in Socket Mode; the `slack` extra). Each
message event is one `ConversationHub.handle` call; the principal is `slack:<user id>` and the
message id the event's `client_msg_id` or channel and timestamp, so an event Slack delivers
again is answered once.

An event is acknowledged once it is answered (Bolt's process_before_response), so one a daemon
killed during its turn never acknowledged comes back from Slack as a retry, and the hub answers
it then; a retry that comes while the first try is still being answered gets no second answer.

Only direct messages are answered: in a channel, a sender's conversation, session names and
titles would be shown to everyone in it. Messages from bots (this one included) and edits are
not answered. An answer streams by edits (`chat.update`, gateway/preview.py), and a last time
with the whole reply; when that last edit fails, the reply is posted as a new message instead.
"""

from __future__ import annotations

from chatcli.gateway.hub import ConversationHub
from chatcli.gateway.preview import Streamer

CHANNEL = "slack"
LIMIT = 3900  # characters in one message (Slack cuts long texts)


def build(hub: ConversationHub, bot_token: str, app_token: str, api_url: str | None = None,
          log=lambda _line: None):
    """The Socket Mode handler answering through `hub` (`api_url`: a Web API other than Slack's)."""
    from slack_bolt import App
    from slack_bolt.adapter.socket_mode import SocketModeHandler
    from slack_sdk import WebClient

    base = api_url.rstrip("/") + "/api/" if api_url else WebClient.BASE_URL
    client = WebClient(token=bot_token, base_url=base)
    app = App(client=client, token_verification_enabled=True, ignoring_self_events_enabled=True,
              process_before_response=True)

    @app.event("message")
    def on_message(event, client) -> None:
        if event.get("subtype") or event.get("bot_id") or not isinstance(event.get("text"), str):
            return  # edits, joins, bots
        if event.get("channel_type") != "im":
            log(f"slack: a message from {event.get('user')} in a {event.get('channel_type')} channel was not "
                "answered (only direct messages are)")
            return
        message_id = event.get("client_msg_id") or f"{event.get('channel')}/{event.get('ts')}"
        channel = event["channel"]
        streamer = Streamer(lambda text: client.chat_postMessage(channel=channel, text=text)["ts"],
                            lambda ts, text: client.chat_update(channel=channel, ts=ts, text=text), LIMIT)
        try:
            reply = hub.handle(CHANNEL, str(event.get("user")), event["text"], message_id=message_id,
                               on_text=streamer.feed)
            if reply is not None and not reply.busy:
                streamer.finish(reply.text)
        except Exception as exc:  # noqa: BLE001 - one message's failure does not stop the daemon
            log(f"slack: a message could not be answered: {type(exc).__name__}: {exc}")

    return SocketModeHandler(app, app_token, web_client=WebClient(token=app_token, base_url=base))


__all__ = ["CHANNEL", "build"]
