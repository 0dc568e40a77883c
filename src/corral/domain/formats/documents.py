"""Reading config documents (JSON or YAML) with errors that name file, line and column.

Parsing happens on the client (CLI) and on the server (raw uploads); both use these helpers so
that a user sees ``a100.json:13:9: ...`` for a syntax error and a line/column for a semantic
error reported on a dotted field path.

Every document is bounded *before* a C parser sees it: libyaml's composer recurses once per
level and overflows the C stack (the process dies) on ``[[[[...`` 30,000 deep. So a text longer
than ``max_chars`` is refused unread; YAML is first walked as a stream of parser events (libyaml's
parser keeps its own stack and does not recurse), refusing nesting deeper than
:data:`MAX_NESTING` and aliases that expand a document more than :data:`MAX_ALIAS_GROWTH` times
(the "billion laughs"); JSON is parsed by Python's reader, which stops deep recursion itself.
Every parsed value then passes :func:`check_value`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from corral.domain.formats.yaml_hints import yaml_problem
from corral.errors import UserError

#: Deepest nesting of lists and mappings in any document or request body. A Pod template is
#: about 12 levels deep inside a request; nothing corral reads needs more than a few dozen.
MAX_NESTING = 64
#: Longest document (in characters) parsed by default: configs, bundles, workflow files.
MAX_DOCUMENT_CHARS = 8 * 2**20
#: A YAML document's aliases may make it at most this many times bigger than it is written.
MAX_ALIAS_GROWTH = 10
#: Below this many values, aliases may expand a document freely.
_ALIAS_FREE_NODES = 100_000
#: Integers corral stores or compares must fit in 64 bits (database columns, Kubernetes).
INT64 = (-(2**63), 2**63 - 1)

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


def parse_document(
    text: str, filename: str = "<input>", *, max_chars: int = MAX_DOCUMENT_CHARS
) -> Any:
    """Parse JSON or YAML text; raise UserError naming ``filename:line:column`` on bad syntax,
    and on a document longer than ``max_chars``, nested deeper than :data:`MAX_NESTING` or
    holding what no field may hold (:func:`check_value`)."""
    if len(text) > max_chars:
        raise UserError(
            f"{filename}: the document is {len(text):,} characters long; the limit is "
            f"{max_chars:,}. Split it, or leave out what is not needed."
        )
    if looks_like_json(filename, text):
        return parse_json(text, filename)
    _check_yaml_events(text, filename)
    document = _parse_yaml(text, filename)
    _check_parsed(document, text, filename)
    return document


def parse_json(text: str, filename: str) -> Any:
    """JSON text, parsed and checked (:func:`check_value`); nesting deeper than
    :data:`MAX_NESTING` is refused with the line and column where it goes too deep."""
    try:
        document = _parse_json(text, filename)
    except RecursionError:
        raise _too_deep_in_json(text, filename) from None
    try:
        _check_parsed(document, text, filename)
    except _TooDeep:
        raise _too_deep_in_json(text, filename) from None
    return document


def check_json_limits(text: str, filename: str) -> None:
    """Refuse JSON text that is nested too deep or holds what no field may hold (as
    :func:`parse_json`); a syntax error is left for whoever parses the text to report."""
    try:
        document = json.loads(text, parse_int=_json_int)
    except _HugeInteger as err:
        raise _huge_integer_in_json(text, filename, err) from None
    except json.JSONDecodeError:
        return
    except RecursionError:
        raise _too_deep_in_json(text, filename) from None
    try:
        _check_parsed(document, text, filename)
    except _TooDeep:
        raise _too_deep_in_json(text, filename) from None


class _TooDeep(UserError):
    """A value nested deeper than :data:`MAX_NESTING`."""


def _check_parsed(document: Any, text: str, filename: str) -> None:
    try:
        check_value(document)
    except _TooDeep:
        raise
    except UserError as err:
        where = locate(text, err.path)
        at = f":{where}" if where else ""
        field = f" {err.field}:" if err.field else ""
        raise UserError(f"{filename}{at}:{field} {err.message}") from None


def _too_deep_in_json(text: str, filename: str) -> UserError:
    offset = _too_deep_offset(text)
    where = f":{position_of(text, offset)}" if offset is not None else ""
    return UserError(f"{filename}{where}: {_too_deep()}")


def _too_deep() -> str:
    return (
        f"lists and mappings are nested more than {MAX_NESTING} levels deep here; "
        "flatten the document"
    )


def _too_deep_offset(text: str) -> int | None:
    """Where a JSON text opens its ``MAX_NESTING + 1``-th nested list or object."""
    depth = 0
    for offset, char in _brackets(text):
        if char in _CLOSER_FOR:
            depth += 1
            if depth > MAX_NESTING:
                return offset
        else:
            depth -= 1
    return None


def _brackets(text: str) -> Iterator[tuple[int, str]]:
    """Every ``{``, ``[``, ``}`` and ``]`` of a JSON text outside its strings, with its offset."""
    in_string = escaped = False
    for offset, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[}]":
            yield offset, char


def check_value(value: Any) -> None:
    """Refuse what would break the server further on, naming where (``UserError.path``):
    nesting deeper than :data:`MAX_NESTING`, text that is not valid Unicode (a lone surrogate
    such as ``"\\ud800"``, which JSON allows but no response can encode) and integers beyond
    64 bits. Iterative: no document can make it recurse."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if len(path) > MAX_NESTING:
            raise _TooDeep(_too_deep(), path=path)
        if isinstance(item, dict):
            for key, child in item.items():
                _check_scalar(key, path)
                stack.append((child, (*path, key if isinstance(key, str | int) else str(key))))
        elif isinstance(item, list):
            stack.extend((child, (*path, index)) for index, child in enumerate(item))
        else:
            _check_scalar(item, path)


def _check_scalar(value: Any, path: tuple[str | int, ...]) -> None:
    if isinstance(value, str) and not _is_unicode(value):
        raise UserError(
            "text holds a lone surrogate code point (such as \\ud800), which is not "
            "valid Unicode; remove it or escape the character it was meant to be",
            path=path,
        )
    if isinstance(value, int) and not isinstance(value, bool) and not INT64[0] <= value <= INT64[1]:
        raise UserError(
            f"the integer {_short(value)} does not fit in 64 bits; use a smaller number",
            path=path,
        )


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _short(number: int) -> str:
    if abs(number) < 10**40:
        return str(number)
    return f"of {number.bit_length():,} bits"  # str() of a huge int is slow, and refused


#: Characters an integer literal may have before it is refused unread: Python's int() of a long
#: literal costs quadratic time (and over 4,300 digits raises), and no field holds one.
MAX_INTEGER_CHARS = 40


class _HugeInteger(ValueError):
    def __init__(self, literal: str) -> None:
        super().__init__(literal)
        self.literal = literal


def _huge_integer_message(literal: str) -> str:
    return (
        f"the integer {literal[:20]}... ({len(literal):,} characters) does not fit in 64 bits; "
        "use a smaller number"
    )


def _json_int(literal: str) -> int:
    if len(literal) > MAX_INTEGER_CHARS:
        raise _HugeInteger(literal)
    return int(literal)


def _huge_integer_in_json(text: str, filename: str, err: _HugeInteger) -> UserError:
    where = position_of(text, max(text.find(err.literal), 0))
    return UserError(f"{filename}:{where}: {_huge_integer_message(err.literal)}")


def _check_yaml_events(text: str, filename: str) -> None:
    """Walk the YAML parser's events (no recursion) before any composer sees the text: refuse
    deep nesting and aliases that blow the document up. A syntax error is left for the loader,
    which reports it with its position."""
    try:
        _walk_events(_yaml_events(text, _C_LOADER or yaml.SafeLoader), filename)
    except yaml.YAMLError as err:
        # libyaml (PyYAML >= 6.0.4) stops at its own depth limit (1000) while it scans ahead,
        # before the event at ours; the pure-Python parser reaches it, without recursing.
        if _C_LOADER is None or "nesting depth" not in str(err):
            return
        try:
            _walk_events(_yaml_events(text, yaml.SafeLoader), filename)
        except yaml.YAMLError:
            return


def _walk_events(events: Iterator[yaml.Event], filename: str) -> None:
    opened: list[tuple[int, str | None]] = []  # per open collection: ``expanded`` then, anchor
    anchors: dict[str, int] = {}  # anchor -> how many values it stands for, aliases expanded
    written = expanded = 0
    for event in events:
        if isinstance(event, yaml.CollectionStartEvent):
            if len(opened) >= MAX_NESTING:
                raise UserError(f"{filename}:{_mark(event)}: {_too_deep()}")
            opened.append((expanded, event.anchor))
            written += 1
            expanded += 1
        elif isinstance(event, yaml.CollectionEndEvent):
            began, anchor = opened.pop()
            if anchor is not None:
                anchors[anchor] = expanded - began
        elif isinstance(event, yaml.ScalarEvent):
            written += 1
            expanded += 1
            if event.anchor is not None:
                anchors[event.anchor] = 1
        elif isinstance(event, yaml.AliasEvent):
            written += 1
            expanded += anchors.get(event.anchor or "", 1)
            if expanded > max(_ALIAS_FREE_NODES, MAX_ALIAS_GROWTH * written):
                raise UserError(
                    f"{filename}:{_mark(event)}: its aliases (*name) make the document more "
                    f"than {MAX_ALIAS_GROWTH} times larger than it is written; repeat the "
                    "values instead of aliasing them"
                )


def _mark(event: yaml.Event) -> Position | str:
    mark = event.start_mark
    return Position(mark.line + 1, mark.column + 1) if mark else "?"


_C_LOADER: type[Any] | None = getattr(yaml, "CSafeLoader", None)


def _yaml_events(text: str, loader: type[Any]) -> Iterator[yaml.Event]:
    return iter(yaml.parse(text, Loader=loader))


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
        return json.loads(text, object_pairs_hook=_reject_duplicate_keys, parse_int=_json_int)
    except _HugeInteger as err:
        raise _huge_integer_in_json(text, filename, err) from None
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
    for offset, char in _brackets(text[:end]):
        if char in _CLOSER_FOR:
            stack.append((char, offset))
        elif stack and _CLOSER_FOR[stack[-1][0]] == char:
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


def _construct_bounded_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    literal = str(node.value)
    if len(literal) > MAX_INTEGER_CHARS:
        raise yaml.constructor.ConstructorError(
            None, None, _huge_integer_message(literal), node.start_mark
        )
    number: int = loader.construct_yaml_int(node)
    return number


for _loader in (_StrictLoader, _FastStrictLoader):
    _loader.add_constructor(
        yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_strict_mapping
    )
    _loader.add_constructor("tag:yaml.org,2002:int", _construct_bounded_int)


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
        raise UserError(f"{filename}:{where}: invalid YAML: {yaml_problem(err)}") from None
    except (yaml.YAMLError, ValueError, TypeError, RecursionError) as err:
        raise UserError(f"{filename}: invalid YAML: {err}") from None


def locate(text: str, path: Sequence[str | int]) -> Position | None:
    """Position of the key (or item) at ``path`` in a JSON/YAML text, if it can be found."""
    try:
        node: yaml.Node | None = yaml.compose(text, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, RecursionError):
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
