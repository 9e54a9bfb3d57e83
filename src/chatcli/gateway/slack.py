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

Both tokens are checked at start (auth.test, apps.connections.open): one Slack refuses, or a
Web API that cannot be reached, stops the start in one line naming the setting, never the token.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

from chatcli.core.errors import ChatcliError, UsageError
from chatcli.gateway.hub import ConversationHub
from chatcli.gateway.preview import Streamer

CHANNEL = "slack"
LIMIT = 3900  # characters in one message (Slack cuts long texts)
# What Slack answers for a token it will not take (the others are not the token's fault).
REFUSALS = {"invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired",
            "not_allowed_token_type"}


def build(hub: ConversationHub, bot_token: str, app_token: str, api_url: str | None = None,
          log=lambda _line: None, setting: Callable[[str], str] = str):
    """The Socket Mode handler answering through `hub` (`api_url`: a Web API other than Slack's;
    `setting` names a variable as the user set it, in the lines that say one), once Slack
    accepted the bot token."""
    from slack_bolt import App
    from slack_bolt.adapter.socket_mode import SocketModeHandler
    from slack_sdk import WebClient

    base = api_url.rstrip("/") + "/api/" if api_url else WebClient.BASE_URL
    client = WebClient(token=bot_token, base_url=base)
    _starting(client.auth_test, "auth.test", "SLACK_BOT_TOKEN", api_url, setting)
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

    return Socket(SocketModeHandler(app, app_token, web_client=WebClient(token=app_token, base_url=base)),
                  api_url, setting)


class Socket:
    """The Socket Mode connection: `connect` (its own threads) once Slack accepted the app
    token, `close`."""

    def __init__(self, handler, api_url: str | None, setting: Callable[[str], str]) -> None:
        self.handler, self.api_url, self.setting = handler, api_url, setting

    def connect(self) -> None:
        _starting(self.handler.connect, "apps.connections.open", "SLACK_APP_TOKEN", self.api_url, self.setting)

    def close(self) -> None:
        self.handler.close()


def _starting(call: Callable[[], object], method: str, token: str, api_url: str | None,
              setting: Callable[[str], str]) -> None:
    """`call` (a start-up request with the `token` variable's value), or one line saying why
    the adapter cannot start (a ChatcliError; the token is not in it)."""
    from slack_sdk.errors import SlackApiError

    try:
        call()
    except SlackApiError as exc:
        error = exc.response.get("error") if exc.response is not None else None
        if error in REFUSALS:
            raise UsageError(f"Slack refused {setting(token)} ({error}); check it") from None
        raise ChatcliError(f"slack: {method} failed at start ({error or exc})") from None
    except OSError as exc:  # urllib's URLError, a timeout
        where = urlsplit(api_url).netloc if api_url else "slack.com"
        raise UsageError(f"cannot reach the Slack API at {where} to check {setting(token)}: "
                         f"{getattr(exc, 'reason', None) or exc}; check the network, or {setting('SLACK_API_URL')}") from None


__all__ = ["CHANNEL", "Socket", "build"]
