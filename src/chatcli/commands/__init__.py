"""Slash commands, each written once and called by every surface that takes text. No printing.

`commands.builtin.build_registry()` assembles them; importing this package loads nothing, so a
script that needs one formatter (`chatcli session list`) does not pay for every command.
"""
