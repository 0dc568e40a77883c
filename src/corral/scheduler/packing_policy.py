"""Which order gangs are packed in (``packing.py`` says what each one does): its own module
because the snapshot keeps it, and ``packing.py`` works on the snapshot's domains."""

from __future__ import annotations

from enum import Enum


class Packing(Enum):
    BEST_FIT = "best-fit"
    TOP_DOWN = "top-down"
    TIGHTEST = "tightest"
