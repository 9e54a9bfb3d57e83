"""The Telegram adapter of the chat gateway (python-telegram-bot's Bot, long polling; the
`telegram` extra). Each text message of a private chat is one `ConversationHub.handle` call,
run in a worker thread; the principal is `telegram:<user id>` and the message id Telegram's
update id.

Nothing said is lost to a restart: the poller confirms an update to Telegram (the getUpdates
offset) only once every update before it was answered, so a daemon killed during a turn is
served that update again when it starts, and the hub, which knows that update's answer was
never finished, answers it (an update that was answered is not answered twice).

Only private chats are answered: in a group, a sender's conversation, session names and titles
would be shown to everyone in it. Edits of messages are not answered (only "message" updates
are asked for).

An answer streams by edits (gateway/preview.py): its first words are sent as a message, which
is edited as more arrive, and a last time with the whole reply. Replies longer than Telegram's
4,096 characters continue in further messages; when the last edit fails (a rate limit, say),
the reply is sent as new messages instead.

The token is checked (getMe) before the poller says it is ready: a token Telegram refuses, or
an API that cannot be reached, stops the start in one line naming the setting, never the token.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from urllib.parse import urlsplit

from chatcli.core.errors import ChatcliError, UsageError
from chatcli.gateway.hub import ConversationHub
from chatcli.gateway.preview import Streamer

CHANNEL = "telegram"
LIMIT = 4096  # characters in one Telegram message
POLL = 5  # seconds a getUpdates call waits for news
WAIT_WHILE_ANSWERING = 1.0  # seconds between polls while the oldest update is being answered
STOP_GRACE = 10.0  # seconds a stop waits for the answers in progress (the others come back at the next start)


def streamer(message, loop: asyncio.AbstractEventLoop) -> Streamer:
    """The answer's message in `message`'s chat, driven from the worker thread on `loop`."""

    def run(coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result(timeout=30)

    return Streamer(lambda text: run(message.reply_text(text)), lambda sent, text: run(sent.edit_text(text)), LIMIT)


class Poller:
    """Long polling that confirms an update only when it and every one before it are answered."""

    def __init__(self, hub: ConversationHub, bot, log=lambda _line: None, api_url: str | None = None,
                 setting: Callable[[str], str] = str) -> None:
        self.hub, self.bot, self.log = hub, bot, log
        self.api_url, self.setting = api_url, setting  # `setting`: how a variable is named to the user
        self.answering: dict[int, asyncio.Task] = {}
        self.done: set[int] = set()  # answered, but not yet confirmed to Telegram
        self.highest = -1

    @property
    def offset(self) -> int | None:
        """The getUpdates offset: below it, every update was answered (Telegram forgets those)."""
        running = [update_id for update_id, task in self.answering.items() if not task.done()]
        if running:
            return min(running)
        return self.highest + 1 if self.highest >= 0 else None

    async def run(self, stop: asyncio.Event, ready: Callable[[], None] = lambda: None) -> None:
        """Check the token, say `ready`, then poll until `stop`."""
        await self._check_token()
        ready()
        async with self.bot:  # initialized already: this only shuts it down at the end
            stopping = asyncio.create_task(stop.wait())
            try:
                while not stop.is_set():
                    await self._poll(stopping)
            finally:
                stopping.cancel()
                running = [task for task in self.answering.values() if not task.done()]
                if running:
                    await asyncio.wait(running, timeout=STOP_GRACE)

    async def _check_token(self) -> None:
        """getMe, or one line saying why the bot cannot start (a ChatcliError; the token is not in it)."""
        from telegram.error import InvalidToken, NetworkError, TelegramError

        try:
            await self.bot.initialize()  # its getMe checks the token
            return
        except InvalidToken as exc:
            # The library's own text quotes the token; the one it was raised from is Telegram's reason.
            reason = str(exc.__cause__) if exc.__cause__ is not None else "invalid token"
            problem: ChatcliError = UsageError(f"Telegram refused {self.setting('TELEGRAM_BOT_TOKEN')} ({reason}); "
                                               "check it")
        except NetworkError as exc:
            where = urlsplit(self.api_url).netloc if self.api_url else "api.telegram.org"
            reason = str(exc).removeprefix("httpx.").split(": ", 1)[-1]  # the library's class names say nothing more
            problem = UsageError(f"cannot reach the Telegram Bot API at {where} to check "
                                 f"{self.setting('TELEGRAM_BOT_TOKEN')}: {reason}; check the network, or "
                                 f"{self.setting('TELEGRAM_API_URL')}")
        except TelegramError as exc:
            problem = ChatcliError(f"telegram: the bot could not start: {type(exc).__name__}: {exc}")
        await self.bot.shutdown()
        raise problem

    async def _poll(self, stopping: asyncio.Task) -> None:
        from telegram.error import TelegramError

        polling = asyncio.create_task(self.bot.get_updates(offset=self.offset, timeout=POLL,
                                                           allowed_updates=["message"]))
        await asyncio.wait({polling, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if stopping.done():
            polling.cancel()
            return
        try:
            updates = polling.result()
        except TelegramError as exc:
            self.log(f"telegram: getUpdates failed: {exc}; trying again")
            await asyncio.wait({stopping}, timeout=POLL)
            return
        fresh = 0
        for update in updates:
            update_id = update.update_id
            self.highest = max(self.highest, update_id)
            if update_id in self.answering or update_id in self.done:
                continue  # served again while an older one is being answered
            fresh += 1
            self.answering[update_id] = asyncio.create_task(self._answer(update))
        self._forget_confirmed()
        running = [task for task in self.answering.values() if not task.done()]
        if not fresh and running:  # the oldest unanswered update is served at once: do not spin on it
            await asyncio.wait({*running, stopping}, timeout=WAIT_WHILE_ANSWERING,
                               return_when=asyncio.FIRST_COMPLETED)

    def _forget_confirmed(self) -> None:
        for update_id, task in list(self.answering.items()):
            if task.done():
                del self.answering[update_id]
                self.done.add(update_id)
        offset = self.offset
        if offset is not None:
            self.done = {update_id for update_id in self.done if update_id >= offset}

    async def _answer(self, update) -> None:
        message = update.message
        user = message.from_user if message is not None else None
        if message is None or user is None or not message.text or user.is_bot:
            return
        if message.chat.type != "private":
            self.log(f"telegram: a message from {user.id} in a {message.chat.type} chat was not answered "
                     "(only private chats are)")
            return
        answer = streamer(message, asyncio.get_running_loop())
        try:
            reply = await asyncio.to_thread(self.hub.handle, CHANNEL, str(user.id), message.text,
                                            display=user.full_name or "", message_id=str(update.update_id),
                                            on_text=answer.feed)
            if reply is not None and not reply.busy:
                await asyncio.to_thread(answer.finish, reply.text)
        except Exception as exc:  # noqa: BLE001 - one message's failure does not stop the daemon
            self.log(f"telegram: a message could not be answered: {type(exc).__name__}: {exc}")


def build(hub: ConversationHub, token: str, base_url: str | None = None, log=lambda _line: None,
          setting: Callable[[str], str] = str) -> Poller:
    """The poller answering through `hub` (`base_url`: a Bot API other than Telegram's, such
    as a local one; `setting` names a variable as the user set it, in the lines that say one)."""
    from telegram import Bot

    if base_url:
        bot = Bot(token, base_url=base_url.rstrip("/") + "/bot", base_file_url=base_url.rstrip("/") + "/file/bot")
    else:
        bot = Bot(token)
    return Poller(hub, bot, log, base_url, setting)


def serve(poller: Poller, signals: tuple[signal.Signals, ...], ready: Callable[[], None] = lambda: None) -> None:
    """Poll in this thread until one of `signals` arrives; `ready` is called once Telegram accepted the token."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in signals:
            loop.add_signal_handler(signum, stop.set)
        await poller.run(stop, ready)

    asyncio.run(main())


__all__ = ["CHANNEL", "LIMIT", "Poller", "build", "serve"]
