"""The one wording of an unknown field, shared by every reader of a user's document: workflow
specs, configs, pod and group templates, and cluster descriptions."""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from corral.errors import quoted

#: How alike a known name must be to be offered as "did you mean" (``cpu`` is not a ``gpu``).
CLOSENESS = 0.75
#: More allowed names than this are not listed (a Pod spec has over 40): the hint is enough.
MAX_LISTED = 30


def unknown_field(key: object, allowed: Sequence[str], *, suggestion: str | None = None) -> str:
    """``unknown field 'colour' (did you mean 'color'?); the fields here are name, color.``:
    the key, the closest allowed name (or ``suggestion``), then the allowed names."""
    close = suggestion or closest(str(key), allowed)
    hint = f" (did you mean {close!r}?)" if close else ""
    listed = f"; the fields here are {', '.join(allowed)}" if allowed else ""
    if len(allowed) > MAX_LISTED:
        listed = ""
    return f"unknown field {quoted(key)}{hint}{listed}."


def closest(word: str, choices: Sequence[str]) -> str | None:
    """The choice most like ``word``, if one is alike enough."""
    found = difflib.get_close_matches(word, list(choices), n=1, cutoff=CLOSENESS)
    return found[0] if found else None
