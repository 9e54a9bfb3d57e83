"""Drives the real REPL in a pseudo-terminal with pexpect."""

from __future__ import annotations

import re

import pexpect
from conftest import CHATCLI


class Repl:
    def __init__(self, env: dict[str, str], prompt: str, cwd=None, args: tuple[str, ...] = ()) -> None:
        self.prompt = prompt
        self.child = pexpect.spawn(
            CHATCLI, list(args), env=env, cwd=cwd, encoding="utf-8", timeout=20, dimensions=(40, 100)
        )
        self.expect_prompt()

    @property
    def prompt_re(self) -> str:
        # The model name and the '>' may be separated by colour codes.
        return re.escape(self.prompt) + r"(?:\x1b\[[0-9;]*m)*>"

    def expect_prompt(self, timeout: float = 20) -> str:
        self.child.expect(self.prompt_re, timeout=timeout)
        return self.child.before

    def send(self, line: str, timeout: float = 20) -> str:
        """Type a line and press Enter; return everything printed until the next prompt."""
        self.child.send(line + "\r")
        # The prompt is redrawn while keys arrive: wait for the one after the newline.
        self.child.expect(r"\n[\s\S]*?" + self.prompt_re, timeout=timeout)
        return self.child.before + self.child.after

    def exit_keeping(self) -> str:
        """Leave by /exit and return the name of the autosave the REPL says it kept."""
        self.child.send("/exit\r")
        self.child.expect(r"Conversation kept as session '(autosave-\d{8}-\d{6}(?:-\d+)?)'")
        name = self.child.match.group(1)
        self.child.expect(pexpect.EOF)
        return name

    def close(self) -> int | None:
        # Ctrl-D typed before the next prompt is up (tty still in cooked mode) can be
        # swallowed, as it would be for a person typing ahead: press it again if needed.
        for _ in range(5):
            if not self.child.isalive():
                break
            self.child.sendeof()
            if self.child.expect([pexpect.EOF, pexpect.TIMEOUT], timeout=2) == 0:
                break
        self.child.close()
        return self.child.exitstatus


ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[=>]|\r")


def plain(text: str) -> str:
    return ANSI.sub("", text)
