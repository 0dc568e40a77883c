"""Many node names in a few words: the sixteen trays of one clique as
``gb200-zone-b-s0-r0-g0-00`` DASH ``15``, where a line used to list every task and its node.
The dash is an en dash: a hyphen is part of the names."""

from __future__ import annotations

import re
from collections.abc import Sequence

_NUMBERED = re.compile(r"^(.*?)(\d+)$")
#: Between the first and the last number of a run.
DASH = "\u2013"


def node_ranges(names: Sequence[str]) -> str:
    """``names`` (each once) as runs of consecutive numbers under a common prefix, e.g.
    ``a-00`` DASH ``03, a-07, b-1``; names without a trailing number are listed as they are."""
    runs: list[tuple[str, int, int, int]] = []  # prefix, first, last, width (0: unpadded)
    plain: list[str] = []
    numbered: list[tuple[str, int, int]] = []
    for name in sorted(set(names)):
        found = _NUMBERED.match(name)
        if found is None:
            plain.append(name)
        else:
            prefix, digits = found.groups()
            padded = len(digits) if digits.startswith("0") and len(digits) > 1 else 0
            numbered.append((prefix, int(digits), padded))
    for prefix, number, width in sorted(numbered):
        last = runs[-1] if runs else None
        same_width = width == last[3] or len(str(number)) == last[3] if last else False
        if last is not None and last[0] == prefix and same_width and number == last[2] + 1:
            runs[-1] = (prefix, last[1], number, last[3])
        else:
            runs.append((prefix, number, number, width))
    texts = [
        f"{prefix}{first:0{width}d}" + (f"{DASH}{last:0{width}d}" if last != first else "")
        for prefix, first, last, width in runs
    ]
    return ", ".join([*texts, *plain])
