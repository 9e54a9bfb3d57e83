"""Small factories for the REPL's prompt, key bindings, completer and history (built apart from the loop)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path, PurePath

from prompt_toolkit.completion import Completer, Completion
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.history import History
from prompt_toolkit.key_binding import KeyBindings

from chatcli.commands.registry import CommandRegistry
from chatcli.config.providers import KEY_VARS
from chatcli.config.settings import Settings
from chatcli.core.errors import ProviderError
from chatcli.engine.conversation import Conversation
from chatcli.store.history import PromptHistory

# Settings.provider_source when no flag, variable or key chose the provider: the local model answers.
NOTHING_CONFIGURED = "no provider is configured"
# A model file smaller than this is a small model (the bundled one is about 100 MB; models that
# answer well offline take several gigabytes).
SMALL_BELOW = 1_000_000_000


def prompt_text(conversation: Conversation) -> FormattedText:
    """`<model>> `, or `[<session>] <model>> ` once a session is bound; `agent:` or `coder:`
    before the model in those modes."""
    parts = []
    if conversation.session_name:
        parts.append(("class:session", f"[{_shorten(conversation.session_name)}] "))
    if conversation.agent.tagged:
        parts.append(("class:mode", f"{conversation.agent.mode}:"))
    parts.append(("class:model", model_name(conversation.settings)))
    parts.append(("class:arrow", "> "))
    return FormattedText(parts)


def model_name(settings: Settings) -> str:
    """The model as the prompt names it: a .gguf path by its file name without the extension,
    whichever provider runs it (a llama.cpp server may know its model by the path it loaded)."""
    label = settings.model_label
    return PurePath(label).stem if label.lower().endswith(".gguf") else label


def default_model_note(settings: Settings) -> str | None:
    """One line for a REPL that nobody configured: the small offline model answers, and what
    switches to a stronger one. None when a provider was chosen (a flag, a variable, a key)."""
    if settings.provider != "local" or settings.provider_source != NOTHING_CONFIGURED:
        return None
    from chatcli.providers.local import bundled_model_path  # on the way to the prompt: imports no llama_cpp

    gguf = settings.model.lower().endswith(".gguf")
    try:
        size = (Path(settings.model).expanduser() if gguf else bundled_model_path()).stat().st_size
    except (OSError, ProviderError):  # the first answer says what is missing
        size = None
    if size is None:
        what = "a local model"
    else:
        shown = f"{size / 1e9:.1f} GB" if size >= 1e9 else f"{size // 1_000_000} MB"
        what = f"a {'small ' if size < SMALL_BELOW else ''}local model ({shown})"
    first, *others = KEY_VARS.values()
    alternatives = ", or ".join([*others, "LLM_PROVIDER=ollama"])
    return (f"Model: {model_name(settings)}, {what} that runs offline. "
            f"Set {first} (or {alternatives}) for a stronger one.")


def _shorten(name: str, limit: int = 32) -> str:
    """Long session names (up to 128 characters) would push the prompt off a narrow screen."""
    if len(name) <= limit:
        return name
    head = (limit - 1) // 2
    return name[:head] + "…" + name[-(limit - 1 - head):]


def key_bindings() -> KeyBindings:
    bindings = KeyBindings()

    @bindings.add("escape", "enter")
    def _newline(event) -> None:
        """Alt-Enter (Esc, Enter) inserts a newline instead of sending."""
        event.current_buffer.insert_text("\n")

    return bindings


class SlashCompleter(Completer):
    """Completes command names after '/', then a command's own arguments."""

    def __init__(self, registry: CommandRegistry, conversation: Conversation) -> None:
        self.registry = registry
        self.conversation = conversation

    def get_completions(self, document, complete_event) -> Iterable[Completion]:
        text = document.text_before_cursor
        if not text.startswith("/") or "\n" in text:
            return
        word, space, rest = text.partition(" ")
        if not space:
            for candidate in self.registry.words():
                if candidate.startswith(word.lower()):
                    command = self.registry.find(candidate)
                    takes_arguments = command is not None and " " in command.usage
                    # A trailing space, so that the argument can be typed (or Tab-completed) next.
                    yield Completion(candidate + (" " if takes_arguments else ""), start_position=-len(word),
                                     display=candidate)
            return
        command = self.registry.find(word)
        if command is None or command.complete is None:
            return
        for candidate in command.complete(self.conversation, rest):
            yield Completion(candidate, start_position=-len(rest))


class PromptFileHistory(History):
    """prompt_toolkit's view of the prompt-history file; a file it cannot read or write is reported once."""

    def __init__(self, store: PromptHistory, warn: Callable[[str], None]) -> None:
        super().__init__()
        self.store = store
        self.warn = warn
        self._broken = False

    def load_history_strings(self) -> Iterable[str]:
        try:
            entries = self.store.load()
        except OSError as exc:
            self._report(exc)
            return []
        return list(reversed(entries))

    def store_string(self, string: str) -> None:
        if self._broken:
            return
        try:
            self.store.append(string)
        except OSError as exc:
            self._report(exc)

    def _report(self, exc: OSError) -> None:
        # Never touch a history file we could not read: stop writing it for this run.
        self._broken = True
        self.warn(f"prompt history {self.store.path} unavailable ({exc.strerror or exc}); not recording this run")
