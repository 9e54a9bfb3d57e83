"""`chatcli session list` without encryption, start to end, importing no more than each case
needs (on a cold page cache every module read costs milliseconds): the last rendering printed
when every session file still has the stamp it had then (listing_cache.stamp: a file another
program rewrote in place shows at once); after a few files changed, only their rows made again
(read, or taken from the appends log) and every other line kept; with no rendering, or a change
only the store's reader can read, the listing from the catalog. Encryption on (the key is
checked) or anything unexpected returns None, and the full listing (cli/session_cli.py) runs."""

from __future__ import annotations

import os
import sys
import time

from chatcli.commands.listing import rendered_key
from chatcli.config.paths import chatcli_home_text
from chatcli.store import listing_cache
from chatcli.store.home import appends_text, key_check_text, session_text, sessions_dir_text

STAMP = 64  # one file's stamp in a rendering's header: four 64-bit numbers, 16 hexadecimal digits each


def run() -> int | None:
    if os.environ.get("CHATCLI_ENCRYPTION_KEY") is not None or os.environ.get("CHATCLI_STORE"):
        return None  # the key is checked, and the listing shows no contents (or sessions are on a server): the full path
    home = chatcli_home_text(os.environ)
    if os.path.exists(key_check_text(home)):
        return None  # a sealed store without a key: the full path says so
    root, key = sessions_dir_text(home), rendered_key(False)
    rendering = listing_cache.read_rendering(root, key)
    scanned = text = None
    if rendering is not None:
        try:
            scanned = listing_cache.scan(root)
        except OSError:
            return None  # no directory, or one that cannot be read: the full path says so
        names, stats = scanned
        stamps = listing_cache.stamps_text(listing_cache.stat_numbers(stats))
        same_names = "/".join(names) == rendering.names
        if same_names and stamps == rendering.stamps:
            text = rendering.text
        else:
            text = _updated(root, key, rendering, scanned, stamps if same_names else None)
    if text is None:
        text = _from_catalog(home, key, scanned)
        if text is None:
            return None
    sys.stdout.write(text)
    return 0


def _updated(root: str, key: str, rendering: listing_cache.Rendering, scanned: listing_cache.Scan,
             stamps: str | None) -> str | None:
    """The saved rendering with the rows of the files changed since it was made formatted
    again, and every other line kept, without the catalog (a later listing of it brings it up
    to date, reading those files again): each changed file read here, or, after a turn
    appended in place, its new count taken from the appends log with the title its line
    showed. `stamps` are the files' stamps now when the names are the rendering's, in its
    order. None when a file needs the store's reader or the catalog (not plain JSON in the
    common shape, not a valid name, not a regular file) or the lines cannot be kept as they
    are: the caller goes to the catalog."""
    names, stats = scanned
    lines = rendering.text.removesuffix("\n").split("\n")
    if stamps is not None:  # the same files: only some stamps differ
        if len(lines) != len(names) + 1:
            return None
        width = max(map(len, names))
        changed = {names[i]: i for i in _differing(stamps, rendering.stamps)}
        before = {name: _stamp_at(rendering.stamps, i) for name, i in changed.items()}
    else:
        before = rendering.stamp_table()
        if before is None or len(lines) != len(before) + 1 or not before:
            return None
        width = max(map(len, before))
        if max(map(len, names), default=0) != width:
            return None  # every line is padded to the widest name: format it whole
        changed = {name: i for i, (name, st) in enumerate(zip(names, stats))
                   if before.get(name) != (st.st_mtime_ns, st.st_size, st.st_ctime_ns, st.st_ino)}
        changed.update((name, -1) for name in before.keys() - set(names))  # gone: their lines go too
    if any(name.endswith(" ") for name in changed):
        return None  # its line could be another's once padded ("a", "a "): none is kept (save_rendered)
    # The lines of the changed files go (to be made again); every other line stays as it is.
    drop = {name.ljust(width) for name in changed}
    kept, dropped = [], {}
    for line in lines[1:]:
        field = line[3:3 + width]
        if field not in drop:
            kept.append(line)
        elif field in dropped:
            return None
        else:
            dropped[field] = line
    if len(dropped) != sum(1 for name in changed if name in before):
        return None  # not a line for each file the rendering shows: format it whole
    made_rows = _rows(root, changed, stats, before, dropped, width, rendering.appends)
    if made_rows is None:
        return None
    fresh, appends = made_rows
    made = _formatted(fresh, width)
    if made is None:
        return None
    if stamps is not None:
        body = _merged(kept, made, fresh, names, stamps, width)
        header, stamps_now = lines[0], stamps
        for name, row in fresh.items():  # a row's own stamp: the one it was read with
            own, at = listing_cache.stamps_text([row[0], row[1], row[6], row[7]]), changed[name] * STAMP
            stamps_now = None if own is None or stamps_now is None else stamps_now[:at] + own + stamps_now[at + STAMP:]
    else:
        body = _sorted(kept, made, fresh, names, before, width)
        header = lines[0]
        if len(names) != len(before):
            header = header.replace(f"({len(before)})", f"({len(names)})", 1)
            if header == lines[0]:
                return None
        numbers: list[int] = []
        for name in names:
            row = fresh.get(name)
            numbers += before[name] if row is None else (row[0], row[1], row[6], row[7])
        stamps_now = listing_cache.stamps_text(numbers)
    if body is None:
        return None
    text = "\n".join([header, *body]) + "\n"
    listing_cache.save_rendered(root, key, text, names, stamps_now, appends)
    return text


def _differing(ours: str, theirs: str) -> list[int]:
    """The files whose stamps differ between two headers' stamps of the same files (compared a
    block of 128 at a time: one changed file among 10,000 costs 80 comparisons, not 10,000)."""
    block = STAMP * 128
    found = []
    for start in range(0, max(len(ours), len(theirs)), block):
        if ours[start:start + block] != theirs[start:start + block]:
            for at in range(start, start + block, STAMP):
                if ours[at:at + STAMP] != theirs[at:at + STAMP]:
                    found.append(at // STAMP)
    return found


def _stamp_at(stamps: str, index: int) -> tuple[int, ...]:
    """The stamp of the `index`th file in a header's stamps."""
    raw = bytes.fromhex(stamps[index * STAMP:(index + 1) * STAMP])
    return tuple(int.from_bytes(raw[i:i + 8], "little", signed=True) for i in range(0, 32, 8))


def _rows(root: str, changed: dict[str, int], stats: list, before: dict, lines: dict[str, str],
          width: int, since: int) -> tuple[dict[str, list], int] | None:
    """({name: row} of the files in `changed` that are still there ({name: index in `stats`}),
    the appends log's size when they were made); None when one is not ours to make. Turns
    appended in place are looked for in the log from byte `since` (where it ended when the
    rendering was made)."""
    now = time.time_ns()
    fresh: dict[str, list] = {}
    appended, appends = None, None
    for name, index in changed.items():
        if index < 0:
            continue  # gone
        st, old, line = stats[index], before.get(name), lines.get(name.ljust(width))
        title = None if old is None or line is None else _shown_title(line, width, old[0])
        if title is None:  # its line showed no message count: a name it may be right to refuse
            from chatcli.core.names import is_valid_name

            if not is_valid_name(name):
                return None
        row = None
        if title:  # a turn appended in place changes nothing but the count: the title stays
            if appended is None:
                appended, appends = _appended_since(root, since)
            logged = appended.get(name)
            if logged is not None and logged[:2] == (st.st_mtime_ns, st.st_size):
                row = [st.st_mtime_ns, st.st_size, logged[2], title, "", "", st.st_ctime_ns, st.st_ino]
        if row is None:
            row = listing_cache.read_row(session_text(root, name), now)
            if row is None:
                return None
        fresh[name] = row
    if appends is None:
        try:
            appends = os.stat(appends_text(root)).st_size
        except OSError:
            appends = 0
    return fresh, appends


def _appended_since(root: str, start: int) -> tuple[dict[str, tuple], int]:
    """({name: (mtime_ns, size, messages)} of the last turn logged for each session since byte
    `start` of the appends log, the log's size). A turn logged before it (when the file
    changed between a listing's look at the files and at the log) is not found: its file is read."""
    try:
        end = os.stat(appends_text(root)).st_size
    except OSError:
        return {}, 0
    latest = {}
    for name, mtime_ns, size, messages in listing_cache.appended_rows(root, start if start <= end else 0, end):
        if isinstance(messages, int):
            latest[name] = (mtime_ns, size, messages)
    return latest, end


def _shown_title(line: str, width: int, mtime_ns: int) -> str | None:
    """The title a listing's line shows after a message count (perhaps ""), found after the
    time format_listing writes for `mtime_ns`; None when it shows no count (unreadable, a size)."""
    from chatcli.commands.listing import WHEN

    when = time.strftime(WHEN, time.localtime(int(mtime_ns / 1e9) // 60 * 60))  # as format_listing
    at = line.find(f"  {when}  ", 3 + width + 12)
    if at < 0:
        return None
    count = line[3 + width:at].split()
    if len(count) != 2 or not count[0].isdigit() or count[1] not in ("msg", "msgs"):
        return None
    return line[at + len(when) + 4:]


def _formatted(fresh: dict[str, list], width: int) -> dict[str, str] | None:
    """{name: its line} for rows `fresh`, as format_listing writes them among names `width` wide."""
    from chatcli.commands.listing import format_listing

    if not fresh:
        return {}
    infos = listing_cache.newest_first(fresh)
    formatted = format_listing(infos, None).split("\n")
    if len(formatted) != len(infos) + 1:
        return None  # a title over several lines, or the note that encryption is on
    narrow = max(map(len, fresh))  # the width format_listing padded these names to
    return {info.name: line[:3] + info.name.ljust(width) + line[3 + narrow:]
            for info, line in zip(infos, formatted[1:])}


def _merged(kept: list[str], made: dict[str, str], fresh: dict[str, list], names: list[str], stamps: str,
            width: int) -> list[str] | None:
    """`kept` (in the listing's order: newest first, files of one mtime in directory order) with
    the lines `made` put where format_listing would: the same files as before, so the others
    keep their order, and each new line goes where its (mtime, place in the directory) falls."""
    from bisect import insort

    position = {name: index for index, name in enumerate(names)} if made else {}

    def order(line: str) -> tuple[float, int]:
        index = position.get(line[3:3 + width].rstrip(" "), -1)
        if index < 0 or names[index].ljust(width) != line[3:3 + width]:
            raise LookupError(line)
        row = fresh.get(names[index])
        mtime_ns = row[0] if row is not None else _stamp_at(stamps, index)[0]
        return -(mtime_ns / 1e9), index

    body = list(kept)
    try:
        for name, line in made.items():
            insort(body, line, key=order)
    except LookupError:
        return None  # a line whose name is not one of the files: format it whole
    return body


def _sorted(kept: list[str], made: dict[str, str], fresh: dict[str, list], names: list[str],
            before: dict[str, tuple], width: int) -> list[str] | None:
    """Every line, newest first as format_listing sorts them (files were added or removed, so
    the order of the others may have changed with the directory's)."""
    by_name = {line[3:3 + width]: line for line in kept}
    seconds = {name: (fresh[name] if name in fresh else before[name])[0] / 1e9 for name in names}
    body = []
    for name in sorted(seconds, key=seconds.__getitem__, reverse=True):
        line = made.get(name) or by_name.get(name.ljust(width))
        if line is None:
            return None
        body.append(line)
    return body


def _from_catalog(home: str, key: str, scanned: listing_cache.Scan | None) -> str | None:
    """The listing from the catalog (which reads only the files whose stamps changed),
    formatted whole, and saved with the catalog's rows."""
    from pathlib import Path

    from chatcli.commands.listing import format_listing
    from chatcli.core.errors import ChatcliError
    from chatcli.store.home import Home

    store = Home(Path(home)).sessions()
    try:
        rows = store.catalog.entries(scanned=scanned)
    except ChatcliError:
        return None
    text = format_listing(store.catalog.infos(rows), None) + "\n"
    store.catalog.save_rendered(key, text)
    return text
