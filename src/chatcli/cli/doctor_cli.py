"""`chatcli doctor`: print the checks of engine.doctor as they finish; exit 1 if one that chatting needs failed."""

from __future__ import annotations

import platform
import sys

from chatcli import __version__
from chatcli.config.settings import Settings
from chatcli.engine.doctor import diagnose

_MARKS = {True: "ok  ", False: "FAIL"}


def run_doctor(settings: Settings) -> int:
    out = sys.stdout
    out.write(f"chatcli {__version__}, Python {platform.python_version()}, {platform.system()} {platform.machine()}\n")
    failed: list[str] = []  # the needed checks that failed
    offline: list[bool] = []  # the local model's checks when another provider is chosen
    for check in diagnose(settings):
        mark = _MARKS[check.ok] if check.ok or check.needed else "warn"
        out.write(f"{mark}  {check.name}: {check.text}\n")
        out.flush()
        if check.needed and not check.ok:
            failed.append(check.name)
        if check.name.endswith("(offline)"):
            offline.append(check.ok)
    if not failed:
        out.write("chatcli can answer.\n")
    elif offline and all(offline) and set(failed) <= {"provider", "answer"}:  # only the hosted provider failed
        out.write("Something chatcli needs failed (above); the offline model answers: chatcli --provider local\n")
    else:
        out.write("Something chatcli needs failed (above).\n")
    return 1 if failed else 0
