"""OSMO's strategic merge patch (``common.strategic_merge_patch``), used by PATCH endpoints.

Dict values merge recursively; ``{"$action": "delete"}`` removes a key; lists of dicts are matched
by ``$index`` (with ``$action: replace|delete``, else merged) and unmatched patch items are
appended; other lists and scalars replace.
"""

from __future__ import annotations

import copy
from typing import Any

from corral.errors import UserError


def strategic_merge(current: Any, patch: Any) -> Any:
    """A new value: ``patch`` applied onto ``current`` (neither is modified)."""
    if not isinstance(patch, dict) or not isinstance(current, dict):
        return copy.deepcopy(patch)
    merged = copy.deepcopy(current)
    for key, value in patch.items():
        if isinstance(value, dict) and value.get("$action") == "delete":
            merged.pop(key, None)
        elif isinstance(value, list) and isinstance(merged.get(key), list) and _has_dicts(value):
            merged[key] = _merge_list(merged[key], value, key)
        else:
            merged[key] = strategic_merge(merged.get(key), value)
    return merged


def _has_dicts(items: list[Any]) -> bool:
    return any(isinstance(item, dict) for item in items)


def _merge_list(current: list[Any], patch: list[Any], key: str) -> list[Any]:
    result: list[Any] = list(current)
    deleted: set[int] = set()
    appended: list[Any] = []
    for item in patch:
        if not isinstance(item, dict) or "$index" not in item:
            appended.append(copy.deepcopy(item))
            continue
        index = item["$index"]
        if not isinstance(index, int) or not 0 <= index < len(current):
            raise UserError(
                f"$index {index!r} is outside the list (it has {len(current)} items)",
                path=(key,),
            )
        action = item.get("$action", "merge")
        body = {k: v for k, v in item.items() if k not in ("$index", "$action")}
        if action == "delete":
            deleted.add(index)
        elif action == "replace":
            result[index] = copy.deepcopy(body)
        elif action == "merge":
            result[index] = strategic_merge(result[index], body)
        else:
            raise UserError(
                f"$action {action!r} is not one of replace, delete", path=(key, "$action")
            )
    kept = [item for index, item in enumerate(result) if index not in deleted]
    return kept + appended
