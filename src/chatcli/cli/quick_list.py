"""`chatcli session list` while its last rendering still holds, or needs only the rows of
turns appended since: printed after importing almost nothing (on a cold page cache every
module read costs milliseconds). Anything else (a changed directory, encryption on, a
rendering that does not update) returns None, and the full listing (cli/session_cli.py) runs."""

from __future__ import annotations

import os
import sys

from chatcli.commands.listing import rendered_key, saved_listing
from chatcli.config.paths import chatcli_home_text
from chatcli.store.home import key_check_text, sessions_dir_text


def run() -> int | None:
    if os.environ.get("CHATCLI_ENCRYPTION_KEY") is not None:
        return None  # the key is checked, and the listing shows no contents: the full path
    home = chatcli_home_text(os.environ)
    if os.path.exists(key_check_text(home)):
        return None  # a sealed store without a key: the full path says so
    text = saved_listing(sessions_dir_text(home), rendered_key(False))
    if text is None:
        return None
    sys.stdout.write(text)
    return 0
