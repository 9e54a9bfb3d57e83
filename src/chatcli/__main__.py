"""Allows `python -m chatcli`."""

from chatcli.main import run

run()
