"""The built-in commands: /help, /model, /provider, /exit."""

from __future__ import annotations

from chatcli.commands import agent as agent_commands
from chatcli.commands import context as context_commands
from chatcli.commands import cost as cost_commands
from chatcli.commands import memory as memory_commands
from chatcli.commands import recall as recall_commands
from chatcli.commands import schedule as schedule_commands
from chatcli.commands import session as session_commands
from chatcli.commands import storage as storage_commands
from chatcli.commands import web as web_commands
from chatcli.commands.registry import CommandRegistry, Result
from chatcli.config.providers import DEFAULT_MODELS, PROVIDERS
from chatcli.core.errors import UsageError
from chatcli.engine.conversation import Conversation


def _model_candidates(conv: Conversation, prefix: str) -> list[str]:
    """Models this provider is configured to know: current, configured and default."""
    settings = conv.settings
    known = [
        settings.model,
        settings.model_for(settings.provider),
        settings.model_for(settings.provider, general=False),
        DEFAULT_MODELS[settings.provider],
    ]
    return [m for m in dict.fromkeys(known) if m.startswith(prefix)]


def build_registry() -> CommandRegistry:
    """A fresh registry with every built-in command (one per surface instance)."""
    registry = CommandRegistry()

    @registry.command("help", "/help", "list the commands", aliases=("?",))
    def help_(_conv: Conversation, _args: str) -> Result:
        return Result(registry.help_text())

    @registry.command("model", "/model [name]", "show or switch the model", complete=_model_candidates)
    def model(conv: Conversation, args: str) -> Result:
        if not args:
            return Result(f"Model: {conv.settings.model_label} (provider {conv.settings.provider}).")
        conv.switch_model(args)
        return Result(f"Model set to {conv.settings.model_label}.")

    @registry.command(
        "provider",
        "/provider [name]",
        "show or switch the provider",
        complete=lambda _conv, prefix: [p for p in PROVIDERS if p.startswith(prefix.lower())],
    )
    def provider(conv: Conversation, args: str) -> Result:
        if not args:
            return Result(
                f"Provider: {conv.settings.provider} (model {conv.settings.model_label}). "
                f"Available: {', '.join(PROVIDERS)}."
            )
        if len(args.split()) > 1:
            raise UsageError("usage: /provider [name]")
        conv.switch_provider(args)
        said = f"Provider set to {conv.settings.provider}, model {conv.settings.model_label}."
        if conv.agent.tagged and not getattr(conv.provider, "supports_tools", False):
            ended = conv.agent.mode
            conv.agent.switch("chat", conv)
            said += f" It does not call tools, so {ended} mode ended: back in chat mode."
        return Result(said)

    agent_commands.register(registry)
    session_commands.register(registry)
    storage_commands.register(registry)
    recall_commands.register(registry)
    memory_commands.register(registry)
    context_commands.register(registry)
    cost_commands.register(registry)
    schedule_commands.register(registry)
    web_commands.register(registry)

    @registry.command("exit", "/exit", "leave chatcli", aliases=("quit",))
    def exit_(_conv: Conversation, _args: str) -> Result:
        return Result(exit=True)

    return registry
