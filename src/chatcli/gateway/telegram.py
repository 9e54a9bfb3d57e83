"""The Telegram adapter of the chat gateway (python-telegram-bot, long polling; the `telegram`
extra). Each text message is one `ConversationHub.handle` call, run in a worker thread; the
principal is `telegram:<user id>` and the message id Telegram's update id, so an update
redelivered after a restart (Telegram keeps unconfirmed ones) is answered once.

An answer streams by edits (gateway/preview.py): its first words are sent as a message, which
is edited as more arrive, and a last time with the whole reply. Replies
longer than Telegram's 4,096 characters continue in further messages.
"""

from __future__ import annotations

import asyncio

from chatcli.gateway.hub import ConversationHub
from chatcli.gateway.preview import Preview, parts

CHANNEL = "telegram"
LIMIT = 4096  # characters in one Telegram message


class Streamer:
    """The answer's message while it streams: sent at the first words, edited as more come."""

    def __init__(self, message, loop: asyncio.AbstractEventLoop) -> None:
        self.message, self.loop = message, loop
        self.sent = None  # the bot's message being edited
        self.shown = ""
        self.preview = Preview(self._show_from_thread, LIMIT)
        self.feed = self.preview.feed

    def _show_from_thread(self, shown: str) -> None:
        asyncio.run_coroutine_threadsafe(self._show(shown), self.loop).result(timeout=30)

    async def _show(self, shown: str) -> None:
        if shown == self.shown:
            return
        if self.sent is None:
            self.sent = await self.message.reply_text(shown)
        else:
            await self.sent.edit_text(shown)
        self.shown = shown

    async def finish(self, reply: str) -> None:
        pieces = parts(reply, LIMIT) or ["(no answer)"]
        if self.sent is None:
            await self.message.reply_text(pieces[0])
        elif pieces[0] != self.shown:
            await self.sent.edit_text(pieces[0])
        for piece in pieces[1:]:
            await self.message.reply_text(piece)


def build(hub: ConversationHub, token: str, base_url: str | None = None, log=lambda _line: None):
    """The python-telegram-bot Application answering through `hub` (`base_url`: a Bot API other
    than Telegram's, such as a local one)."""
    from telegram.ext import Application, MessageHandler, filters

    builder = Application.builder().token(token)
    if base_url:
        builder = builder.base_url(base_url.rstrip("/") + "/bot").base_file_url(base_url.rstrip("/") + "/file/bot")
    application = builder.build()

    async def on_message(update, _context) -> None:
        message, user = update.effective_message, update.effective_user
        if message is None or user is None or not message.text:
            return
        streamer = Streamer(message, asyncio.get_running_loop())
        try:
            reply = await asyncio.to_thread(hub.handle, CHANNEL, str(user.id), message.text,
                                            display=user.full_name or "", message_id=str(update.update_id),
                                            on_text=streamer.feed)
        except Exception as exc:  # noqa: BLE001 - one message's failure does not stop the daemon
            log(f"telegram: a message could not be answered: {type(exc).__name__}: {exc}")
            return
        if reply is not None:
            await streamer.finish(reply.text)

    application.add_handler(MessageHandler(filters.TEXT, on_message))
    return application


__all__ = ["CHANNEL", "LIMIT", "build"]
