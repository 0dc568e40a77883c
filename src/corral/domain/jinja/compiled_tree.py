"""A template tree compiled once, rendered for many pods.

A pool's merged pod template is rendered once per task, and most of it is plain values: walking
the whole tree for each pod was the largest part of planning a submission. Compiled, the tree
is a ``marshal`` image of its plain values (copied in C) and the list of its template values
(paths and texts). Rendering copies the image, renders each template value and puts it in
place: the same output as :func:`rendering.render_tree`, with the same errors and limits (each
value still goes through :func:`rendering.render_text`).

A :class:`RenderMemo` shared by the pods of one submission renders a template value once per
set of values of the variables it reads: a value that reads no per-task variable (most of
them) is rendered once for all tasks alike.
"""

from __future__ import annotations

import marshal
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jinja2 import TemplateSyntaxError, meta

from corral.domain.formats.json_paths import Path
from corral.domain.jinja.rendering import (
    Describe,
    TypeOf,
    is_template,
    render_leaf,
    sandbox_environment,
)

#: Rendered values a memo keeps (a submission's templates have a few dozen).
_MEMO_KEPT = 4096
#: Compiled trees kept, by image: one per platform's merged template in use.
_COMPILED_KEPT = 64
_compiled: dict[bytes, CompiledTree] = {}


def compile_tree(value: dict[str, Any]) -> CompiledTree:
    """``value`` compiled, or the tree compiled for an equal value before (templates are
    merged anew for each submission, and compiling reads every template value's Jinja)."""
    image = marshal.dumps(value)
    found = _compiled.get(image)
    if found is None:
        if len(_compiled) >= _COMPILED_KEPT:
            _compiled.pop(next(iter(_compiled)))
        found = _compiled[image] = CompiledTree(image, value)
    return found


@dataclass(frozen=True, slots=True)
class _Leaf:
    path: Path
    text: str
    #: The variables the text reads; None when its output may depend on more (a Jinja
    #: global such as ``lipsum``, or text Jinja cannot parse): then it is rendered each time.
    reads: tuple[str, ...] | None


class RenderMemo:
    """Values rendered for earlier pods of one submission, by template value and the values
    of the variables it reads."""

    def __init__(self) -> None:
        self._rendered: dict[tuple[Any, ...], Any] = {}

    def get(self, key: tuple[Any, ...]) -> Any:
        return self._rendered.get(key, _MISSING)

    def keep(self, key: tuple[Any, ...], value: Any) -> None:
        if len(self._rendered) < _MEMO_KEPT:
            self._rendered[key] = value


_MISSING = object()


class CompiledTree:
    """A JSON-like mapping (plain values, mappings, lists) split into a copyable image of it
    and its template values, in document order."""

    def __init__(self, image: bytes, value: dict[str, Any]) -> None:
        self._image = image
        self._leaves = tuple(
            _Leaf(path, text, _reads(text)) for path, text in _template_values(value, ())
        )

    def render(
        self,
        variables: Mapping[str, Any],
        *,
        describe: Describe,
        type_of: TypeOf,
        memo: RenderMemo | None = None,
    ) -> dict[str, Any]:
        """:func:`rendering.render_tree` of the tree: a new tree, every template value
        rendered (the first failing value, in document order, raises)."""
        tree: dict[str, Any] = marshal.loads(self._image)
        rendered = [self._render(leaf, variables, describe, type_of, memo) for leaf in self._leaves]
        # Last first: splicing an ARRAY into a list moves only the items after it.
        for leaf, value in zip(reversed(self._leaves), reversed(rendered), strict=True):
            _put(tree, leaf.path, value)
        return tree

    def _render(
        self,
        leaf: _Leaf,
        variables: Mapping[str, Any],
        describe: Describe,
        type_of: TypeOf,
        memo: RenderMemo | None,
    ) -> Any:
        key = _memo_key(leaf, variables) if memo is not None else None
        if key is not None and memo is not None:
            found = memo.get(key)
            if found is not _MISSING:
                return list(found) if isinstance(found, list) else found
        value = render_leaf(leaf.text, leaf.path, variables, describe=describe, type_of=type_of)
        if key is not None and memo is not None:
            memo.keep(key, list(value) if isinstance(value, list) else value)
        return value


def _memo_key(leaf: _Leaf, variables: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """The text, its field (which decides the rendered type) and the values it reads, each
    with its type (``1``, ``1.0`` and ``True`` are equal keys, and render apart)."""
    if leaf.reads is None:
        return None
    values = (variables.get(name) for name in leaf.reads)
    key = (leaf.path, leaf.text, *((type(value), value) for value in values))
    try:
        hash(key)
    except TypeError:  # a default variable holding a list or mapping
        return None
    return key


def _template_values(value: Any, path: Path) -> list[tuple[Path, str]]:
    found: list[tuple[Path, str]] = []
    if isinstance(value, dict):
        for key, child in value.items():
            found += _template_values(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _template_values(child, (*path, index))
    elif isinstance(value, str) and is_template(value):
        found.append((path, value))
    return found


def _reads(text: str) -> tuple[str, ...] | None:
    environment = sandbox_environment()
    try:
        names = meta.find_undeclared_variables(environment.parse(text))
    except TemplateSyntaxError:
        return None  # rendering reports it
    if names & environment.globals.keys():
        return None
    return tuple(sorted(names))


def _put(tree: Any, path: Path, value: Any) -> None:
    """Set ``value`` at ``path``; a list rendered into a list is spliced into it."""
    parent = tree
    for segment in path[:-1]:
        parent = parent[segment]
    last = path[-1]
    if isinstance(parent, list) and isinstance(value, list):
        assert isinstance(last, int)
        parent[last : last + 1] = value
    else:
        parent[last] = value
