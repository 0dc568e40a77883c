"""Reading config documents (JSON or YAML) with errors that name file, line and column.

Parsing happens on the client (CLI) and on the server (raw uploads); both use these helpers so
that a user sees ``a100.json:13:9: ...`` for a syntax error and a line/column for a semantic
error reported on a dotted field path.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from corral.errors import UserError

_CLOSER_FOR = {"{": "}", "[": "]"}
_KIND = {"{": "object", "[": "list"}


@dataclass(frozen=True)
class Position:
    """1-based line and column."""

    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.line}:{self.column}"


def position_of(text: str, offset: int) -> Position:
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return Position(line, column)


def looks_like_json(filename: str, text: str) -> bool:
    lowered = filename.lower()
    if lowered.endswith(".json"):
        return True
    if lowered.endswith((".yaml", ".yml")):
        return False
    return text.lstrip()[:1] in ("{", "[")


def parse_document(text: str, filename: str = "<input>") -> Any:
    """Parse JSON or YAML text; raise UserError naming ``filename:line:column`` on bad syntax."""
    if looks_like_json(filename, text):
        return _parse_json(text, filename)
    return _parse_yaml(text, filename)


def _reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _parse_json(text: str, filename: str) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_reject_duplicate_keys)
    except _DuplicateKey as dup:
        raise UserError(
            f'{filename}: key "{dup.key}" appears twice in the same object; keep one of them.'
        ) from None
    except json.JSONDecodeError as err:
        where = position_of(text, err.pos)
        hint = _bracket_hint(text, err.pos)
        raise UserError(f"{filename}:{where}: invalid JSON: {err.msg}{hint}") from None


def _bracket_hint(text: str, error_offset: int) -> str:
    """Explain a bracket mismatch: which list/object is still open where the error is."""
    stack = _open_brackets(text, error_offset)
    if not stack:
        return ""
    opener, opened_at = stack[-1]
    found = text[error_offset] if error_offset < len(text) else ""
    expected = _CLOSER_FOR[opener]
    opened = position_of(text, opened_at)
    if found in ("}", "]") and found != expected:
        return (
            f" (found '{found}' but the {_KIND[opener]} opened at line {opened.line}, "
            f"column {opened.column} must be closed with '{expected}' first)"
        )
    return f" (inside the {_KIND[opener]} opened at line {opened.line}, column {opened.column})"


def _open_brackets(text: str, end: int) -> list[tuple[str, int]]:
    stack: list[tuple[str, int]] = []
    in_string = escaped = False
    for offset, char in enumerate(text[:end]):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in _CLOSER_FOR:
            stack.append((char, offset))
        elif char in ("}", "]") and stack and _CLOSER_FOR[stack[-1][0]] == char:
            stack.pop()
    return stack


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys instead of silently keeping the last."""


class _FastStrictLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """The same on libyaml's parser (about 10x faster), when PyYAML was built with it."""


def _construct_strict_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: dict[Any, yaml.Node] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if isinstance(key, dict | list):
            raise yaml.constructor.ConstructorError(
                None,
                None,
                "a mapping key must be a plain value, not a list or mapping",
                key_node.start_mark,
            )
        if key in seen:
            mark = key_node.start_mark
            raise yaml.constructor.ConstructorError(
                None, None, f'key "{key}" appears twice in the same mapping', mark
            )
        seen[key] = key_node
    mapping: dict[Any, Any] = loader.construct_mapping(node, deep=True)
    return mapping


for _loader in (_StrictLoader, _FastStrictLoader):
    _loader.add_constructor(
        yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_strict_mapping
    )


def _parse_yaml(text: str, filename: str) -> Any:
    try:
        return yaml.load(text, Loader=_FastStrictLoader)
    except (yaml.YAMLError, ValueError, TypeError, RecursionError):
        pass  # parse again with the pure-Python parser: its messages say more
    try:
        return yaml.load(text, Loader=_StrictLoader)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"{mark.line + 1}:{mark.column + 1}" if mark else "?"
        problem = err.problem or err.context or "syntax error"
        raise UserError(f"{filename}:{where}: invalid YAML: {problem}") from None
    except (yaml.YAMLError, ValueError, TypeError, RecursionError) as err:
        raise UserError(f"{filename}: invalid YAML: {err}") from None


def locate(text: str, path: Sequence[str | int]) -> Position | None:
    """Position of the key (or item) at ``path`` in a JSON/YAML text, if it can be found."""
    try:
        node: yaml.Node | None = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None
    found: yaml.Node | None = None
    for step in path:
        found = None
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if isinstance(key_node, yaml.ScalarNode) and key_node.value == str(step):
                    found, node = key_node, value_node
                    break
        elif (
            isinstance(node, yaml.SequenceNode)
            and isinstance(step, int)
            and 0 <= step < len(node.value)
        ):
            found = node = node.value[step]
        if found is None:
            return None
    if found is None:
        return None
    return Position(found.start_mark.line + 1, found.start_mark.column + 1)
