"""Values made from files and made again only when those files change: the memory's prompt, a
context snapshot. Each is kept with the stamp of what it was made from (a file's or a
directory's mtime and size); a different stamp makes it again. Safe from several threads (a
server answers several conversations)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import TypeVar

T = TypeVar("T")


class ByStamp:
    def __init__(self) -> None:
        self._values: dict[Hashable, tuple[Hashable, object]] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable, stamp: Hashable, make: Callable[[], T]) -> T:
        with self._lock:
            cached = self._values.get(key)
        if cached is not None and cached[0] == stamp:
            return cached[1]  # type: ignore[return-value]
        value = make()
        with self._lock:
            self._values[key] = (stamp, value)
        return value

    def last(self, key: Hashable, default: T) -> T:
        """The value made last for `key`, whatever its stamp (`default` when none was): what a
        store that cannot be reached now (a server restarting) last said."""
        with self._lock:
            cached = self._values.get(key)
        return default if cached is None else cached[1]  # type: ignore[return-value]


__all__ = ["ByStamp"]
