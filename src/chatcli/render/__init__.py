"""Terminal rendering shared by the terminal front ends: streamed answers, notices, errors."""

from chatcli.render.stream import MarkdownStream, PlainStream, StreamRenderer, make_renderer, wants_markdown

__all__ = ["MarkdownStream", "PlainStream", "StreamRenderer", "make_renderer", "wants_markdown"]
