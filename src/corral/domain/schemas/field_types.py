"""The Kubernetes type of a rendered field, and the value its rendered text becomes.

Jinja renders text, but the API server rejects ``"30"`` for ``terminationGracePeriodSeconds``
and ``"true"`` for ``hostNetwork``. Guessing from the text alone would turn an image tag
``"1.10"`` into a float or a label ``"0755"`` into 755, so corral converts a value only when the
real schema says the field is not a string. ``field_types.json`` holds those fields, generated
from the Kubernetes and CRD schemas by ``scripts/generate_field_types.py``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from functools import cache
from importlib.resources import files
from typing import Any, Literal, get_args

FieldType = Literal["integer", "number", "boolean", "int-or-string"]

_FIELD_TYPES: dict[str, FieldType] = {name: name for name in get_args(FieldType)}
#: The path segment that matches any list index or any map key.
_ANY = "*"
_INTEGER = re.compile(r"[+-]?[0-9]+")
#: A plain decimal as YAML writes one: ``1.5``, ``-.5``, ``2.`` (no exponent, no inf or nan).
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.[0-9]*|\.[0-9]+)")
_BOOLEANS = {"true": True, "false": False}


class _Node:
    """One path segment of the lookup trie; ``field_type`` is set where a listed path ends."""

    __slots__ = ("children", "field_type")

    def __init__(self) -> None:
        self.children: dict[str, _Node] = {}
        self.field_type: FieldType | None = None


def _field_type(value: object) -> FieldType:
    found = _FIELD_TYPES.get(value) if isinstance(value, str) else None
    if found is None:
        raise ValueError(f"unknown field type {value!r} in field_types.json")
    return found


def _build_trie(fields: Mapping[str, object]) -> _Node:
    root = _Node()
    for dotted, value in fields.items():
        node = root
        for segment in dotted.split("."):
            node = node.children.setdefault(segment, _Node())
        node.field_type = _field_type(value)
    return root


@cache
def _tries() -> dict[str, _Node]:
    """A trie per ``apiVersion/Kind``, built once so a lookup walks the path, not the table."""
    text = files("corral.domain.schemas").joinpath("field_types.json").read_text(encoding="utf-8")
    kinds: dict[str, Mapping[str, object]] = json.loads(text)["kinds"]
    return {kind: _build_trie(fields) for kind, fields in kinds.items()}


def expected_type(api_version: str, kind: str, path: Sequence[str | int]) -> FieldType | None:
    """The schema type of the field at ``path`` in a ``kind`` object, or None when it is a
    string, a container, or not described (an unknown kind or field).

    A list index (an ``int``) matches ``*`` only; a map key matches its exact name first, then
    ``*`` (a map whose values all share one type, like ``resources.limits``). The table writes
    ``*`` for list items and map values alike, so a string key where the schema has a list also
    matches ``*``: that document is invalid anyway, and schema validation reports it.
    """
    node = _tries().get(f"{api_version}/{kind}")
    for segment in path:
        if node is None:
            return None
        if isinstance(segment, str):
            node = node.children.get(segment) or node.children.get(_ANY)
        else:
            node = node.children.get(_ANY)
    return None if node is None else node.field_type


def _as_int(text: str) -> int | None:
    stripped = text.strip()
    if not _INTEGER.fullmatch(stripped):
        return None
    try:
        return int(stripped)
    except ValueError:  # more digits than int() accepts from a string (sys.int_info)
        return None


def _as_float(text: str) -> float | None:
    stripped = text.strip()
    if not _DECIMAL.fullmatch(stripped):
        return None
    number = float(stripped)
    return number if math.isfinite(number) else None  # 400 digits overflow to inf


def coerce(text: str, expected: FieldType | None) -> Any:
    """The value rendered ``text`` becomes in a field of type ``expected``.

    Text that does not fit the type is returned unchanged rather than raising: schema
    validation then reports the field with the value the user actually wrote.
    """
    if expected in ("integer", "int-or-string"):
        number = _as_int(text)
        return text if number is None else number
    if expected == "number":
        integer = _as_int(text)
        if integer is not None:
            return integer
        decimal = _as_float(text)
        return text if decimal is None else decimal
    if expected == "boolean":
        return _BOOLEANS.get(text.strip().lower(), text)
    return text
