"""Structural differences between two JSON values (for revision diffs and dry runs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Path = tuple[str | int, ...]
MISSING: Any = object()


@dataclass(frozen=True)
class Change:
    path: Path
    kind: Literal["added", "removed", "changed"]
    before: Any = None
    after: Any = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": list(self.path),
            "kind": self.kind,
            "before": self.before,
            "after": self.after,
        }


def changes(before: Any, after: Any, path: Path = ()) -> list[Change]:
    """Every leaf-level change from ``before`` to ``after``, in key order."""
    if before == after:
        return []
    if isinstance(before, dict) and isinstance(after, dict):
        found: list[Change] = []
        for key in [*before, *(k for k in after if k not in before)]:
            if key not in after:
                found.append(Change((*path, key), "removed", before=before[key]))
            elif key not in before:
                found.append(Change((*path, key), "added", after=after[key]))
            else:
                found.extend(changes(before[key], after[key], (*path, key)))
        return found
    return [Change(path, "changed", before=before, after=after)]
