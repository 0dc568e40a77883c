"""How JSON columns are encoded and decoded: with orjson (several times faster than the standard
library's ``json``; a submission stores every object of its workflow as JSON), falling back to
``json`` for the rare value orjson refuses (an integer beyond 64 bits)."""

from __future__ import annotations

import json
from typing import Any

import orjson

_OPTIONS = orjson.OPT_NON_STR_KEYS  # keys such as 1 or true become "1", "true", as with json


def dumps(value: Any) -> str:
    try:
        return orjson.dumps(value, option=_OPTIONS).decode()
    except orjson.JSONEncodeError:
        return json.dumps(value)


def loads(text: str | bytes) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)  # e.g. NaN, which json writes and orjson does not read
