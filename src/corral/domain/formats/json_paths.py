"""Paths into JSON-like trees: walking them and printing them for people."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

Path = tuple[str | int, ...]

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def format_path(path: Path) -> str:
    """``spec.containers[0].resources.limits["nvidia.com/gpu"]``: unambiguous and readable."""
    text = ""
    for step in path:
        if isinstance(step, int):
            text += f"[{step}]"
        elif _PLAIN_KEY.match(step):
            text += f".{step}" if text else step
        else:
            text += '["' + step.replace("\\", "\\\\").replace('"', '\\"') + '"]'
    return text


def leaves(value: Any, path: Path = ()) -> Iterator[tuple[Path, Any]]:
    """Every scalar, and every empty mapping or list, of a tree with its path."""
    if isinstance(value, dict) and value:
        for key, child in value.items():
            yield from leaves(child, (*path, key))
    elif isinstance(value, list) and value:
        for index, child in enumerate(value):
            yield from leaves(child, (*path, index))
    else:
        yield path, value


def get_path(value: Any, path: Path) -> Any:
    """The value at ``path``; KeyError/IndexError/TypeError if it is not there."""
    for step in path:
        value = value[step]
    return value
