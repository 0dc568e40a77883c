"""The clock of garbage collection that tick log lines report (``gc_seconds``)."""

from __future__ import annotations

import gc

from corral.services.lifecycle.tick_report import TickReport
from corral.services.workers.gc_settings import collection_clock


def test_a_collection_is_counted() -> None:
    clock = collection_clock()
    before = clock.seconds
    gc.collect()
    assert clock.seconds > before
    assert collection_clock() is clock  # installed once


def test_the_tick_line_says_how_long_collections_took() -> None:
    report = TickReport(seconds=0.25, gc_seconds=0.125)
    fields = report.log_fields()
    assert (fields["seconds"], fields["gc_seconds"]) == (0.25, 0.125)
