"""Durations as OSMO writes them: ISO-8601 ``P[nD][T[nH][nM][n[.n]S]]`` or ``<int><unit>``."""

from __future__ import annotations

import re
from datetime import timedelta

_SIMPLE = re.compile(r"^(\d+)(d|h|m|s|ms|us)$")
_ISO = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$")
_UNIT_SECONDS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6}


def parse_duration(text: str) -> timedelta:
    """Parse ``text``; raise ValueError with OSMO's wording when it is not a duration."""
    simple = _SIMPLE.match(text)
    if simple:
        return timedelta(seconds=int(simple.group(1)) * _UNIT_SECONDS[simple.group(2)])
    iso = _ISO.match(text)
    if iso and text not in ("P", "PT") and not text.endswith("T"):
        days, hours, minutes, seconds = (float(g) if g else 0.0 for g in iso.groups())
        return timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    raise ValueError(
        f"Cannot recognize duration: {text}. "
        "Only support ISO 8601 (e.g. PT10S) or xd, xh, xm, xs, xms, xus"
    )
