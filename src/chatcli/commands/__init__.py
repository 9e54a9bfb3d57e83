"""Slash commands, each written once and called by every surface that takes text. No printing."""

from chatcli.commands.builtin import build_registry
from chatcli.commands.registry import Command, CommandRegistry, Result

__all__ = ["Command", "CommandRegistry", "Result", "build_registry"]
