"""What a request carries of the history, pure: the latest messages that fit the model's context window.

A request never exceeds the window, whatever the compaction setting. Compaction (SPEC §8)
rewrites the history; this only chooses what is sent, and the history stays whole. Taken in
this order while the budget lasts:

1. the newest question (the latest user message that is not a summary) and the latest step
   after it (an assistant message with its tool results): always, even when they alone are
   over the budget (`Window.over`: the caller refuses, or lets the provider judge);
2. the system messages and summaries that open the history (a compaction leaves its summary
   there), the longest run of them that fits;
3. the question's earlier steps, newest first;
4. older messages, newest first, from a question on: the model never gets an answer without
   its question, and what is sent never starts with a tool result.

An assistant message that calls tools and its results go together or not at all. The walk goes
back from the end and stops where the budget is spent, so a 100,000-message history costs what
its sent part costs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from chatcli.core.messages import Message, call_chars

# The room kept for the answer when CHATCLI_MAX_TOKENS does not say: what Anthropic's requests
# ask for by default, and at most an eighth of the window (512 of the local model's 4,096).
ANSWER_TOKENS = 4096


@dataclass(frozen=True)
class Window:
    """history[:head] (from the run of system messages and summaries that opens it), then the
    question at `question` when the turn's earlier steps were left out, then history[start:]."""

    head: int
    start: int
    question: int | None = None
    tokens: int = 0  # the estimate of what is sent
    over: bool = False  # the newest question and its latest step alone are more than the budget

    @property
    def left_out(self) -> int:
        return self.start - self.head - (self.question is not None)

    def messages(self, history: Sequence[Message]) -> list[Message]:
        pinned = [history[self.question]] if self.question is not None else []
        return [*history[:self.head], *pinned, *history[self.start:]]


def message_tokens(message: Message) -> int:
    """A rough count of one message's tokens, as `compaction.estimate_tokens` counts them."""
    return (len(message.content) + call_chars(message)) // 4 + 4


def answer_room(window: int, max_tokens: int | None) -> int:
    """The tokens of the window kept for the answer: CHATCLI_MAX_TOKENS (at most half the
    window), else ANSWER_TOKENS (at most an eighth of it)."""
    return min(max_tokens, window // 2) if max_tokens else min(ANSWER_TOKENS, window // 8)


def _opens(message: Message) -> bool:
    return message.role == "system" or message.is_summary


def _asks(message: Message) -> bool:
    return message.role == "user" and not message.is_summary


def fit(history: Sequence[Message], budget: int) -> Window:
    """What of `history` a request whose messages may take about `budget` tokens carries (see
    the module's docstring)."""
    count = len(history)
    lead = 0  # the system messages and summaries that open the history
    while lead < count and _opens(history[lead]):
        lead += 1
    question = next((i for i in range(count - 1, lead - 1, -1) if _asks(history[i])), None)
    after = lead if question is None else question + 1
    # 1. The question and its latest step: from the last message after it that is not a tool result.
    start = count
    while start > after and history[start - 1].role == "tool":
        start -= 1
    start = start - 1 if start > after else count  # only tool results after it: none is sent alone
    used = sum(message_tokens(history[i]) for i in range(start, count))
    if question is not None:
        used += message_tokens(history[question])
    if used > budget:
        return _window(0, start, question, used, over=True)
    # 2. The run that opens the history.
    head = 0
    while head < lead and used + (cost := message_tokens(history[head])) <= budget:
        used += cost
        head += 1
    # 3 and 4. Newest first: a step of the question's turn may start what is sent at any message
    # that is not a tool result, an older message only at a question.
    sent = used
    index = start
    while index > lead:
        index -= 1
        if index == question:  # counted already: the whole turn fits
            start, sent = index, used
            continue
        used += message_tokens(history[index])
        if used > budget:
            break
        if (_asks(history[index]) if question is not None and index < question
                else history[index].role != "tool"):
            start, sent = index, used
    else:
        start, sent = lead, used  # everything fits: sent as it is
    return _window(head, start, question, sent)


def _window(head: int, start: int, question: int | None, tokens: int, over: bool = False) -> Window:
    pinned = question if question is not None and question < start - 1 else None
    if question is not None and question == start - 1:
        start = question
    return Window(head, start, pinned, tokens, over)


class Appended(Sequence):
    """`history` followed by `message`, without copying it: a turn plans its request before
    its question joins the history."""

    def __init__(self, history: Sequence[Message], message: Message) -> None:
        self._history, self._message = history, message

    def __len__(self) -> int:
        return len(self._history) + 1

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if index == len(self._history):
            return self._message
        if not 0 <= index < len(self._history):
            raise IndexError(index)
        return self._history[index]


__all__ = ["ANSWER_TOKENS", "Appended", "Window", "answer_room", "fit", "message_tokens"]
