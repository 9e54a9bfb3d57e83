"""Decoding many objects at once (a session file, a journal) without the cyclic collector."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Building 100,000 messages or events triggers the cyclic collector dozens of times over
    objects that are all alive. Pause it while they are decoded, then move what was built
    straight to the oldest generation (freeze + unfreeze splice lists, O(1)) instead of letting
    the next young collection scan all of it once more."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.unfreeze()
        if enabled:
            gc.enable()
