"""The non-interactive front end: one-shot prompts (and, later, `chatcli session …` scripting)."""

import sys


def silence_stdout() -> None:
    """Standard output becomes the null device under what still buffers for it: output that
    could not be written (its reader gone, a full disk) is not tried again at exit."""
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass
