"""Garbage-collector settings of corral's long-running processes (server, controller, sandbox
workers).

Each holds thousands of long-lived objects (configs, a cluster's nodes, the controller's working
set) and makes many short-lived ones per request or tick. With Python's default young-generation
threshold (700 allocations) a busy controller tick spent a sixth of its time collecting, and a
sandbox worker walked a 5,000-node cluster in every full collection.
"""

from __future__ import annotations

import gc
import time
from typing import Any

#: Young-generation collection threshold, then the two older generations' (as gc.set_threshold).
GC_THRESHOLDS = (50_000, 20, 20)


def tune_gc() -> None:
    """Collect young objects less often (what stays in cycles between collections is small)."""
    gc.set_threshold(*GC_THRESHOLDS)


def keep_out_of_collections() -> None:
    """Move every object alive now out of the collector's sight, for good: for a process's
    long-lived data once it is loaded (reference counting still frees them)."""
    gc.collect()
    gc.freeze()


class CollectionClock:
    """Seconds this process has spent collecting garbage (``gc.callbacks``): a tick that took
    long because of a full collection says so in its log line."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._started = 0.0

    def __call__(self, phase: str, _info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started


#: Installed when the module is imported: a clock reading per collection costs nothing next to
#: the collection.
_CLOCK = CollectionClock()
gc.callbacks.append(_CLOCK)


def collection_clock() -> CollectionClock:
    """The process's clock of garbage collection."""
    return _CLOCK
