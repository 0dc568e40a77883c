"""Merging pod templates (and default variables, and group templates) the way OSMO does.

OSMO's rule (``recursive_dict_update``, docs/osmo-reference.md#pod-template-merge): mappings merge
recursively, lists merge item by item on equal ``name`` and otherwise append, anything else
replaces. corral keeps that rule and fixes its defects (docs/templates.md):

- a mapping that the overriding list repeats exactly (the same toleration in two templates) is
  kept once; scalar lists such as ``args`` and ``command`` are still concatenated;
- only mappings have names, so string lists that contain the text "name" and integer lists
  (``supplementalGroups: [1000]``) merge like any other scalar list;
- where the two sides disagree in kind (a mapping over a string, ...) the override wins instead
  of crashing;
- nothing given to the merge is modified or aliased.

Beyond OSMO, the merge can record provenance: which templates wrote each field, in order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from corral.domain.formats.json_paths import Path, format_path, leaves
from corral.domain.jinja.compiled_tree import CompiledTree, compile_tree

Record = Callable[[Path, Any], None]


def _no_record(path: Path, value: Any) -> None:
    return None


def copy_tree(value: Any) -> Any:
    """A copy of a JSON-like tree (mappings, lists, plain values): ``copy.deepcopy`` for the
    trees templates are made of, without its memo (a fifth of planning a submission's pods)."""
    if isinstance(value, Mapping):
        return {key: copy_tree(item) for key, item in value.items()}
    if isinstance(value, list):
        return [copy_tree(item) for item in value]
    if isinstance(value, tuple):
        return tuple(copy_tree(item) for item in value)
    return value


def merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``override`` merged on top of ``base``, as a new tree."""
    target: dict[str, Any] = copy_tree(base)
    _merge_mapping(target, override, (), _no_record)
    return target


def merge_given(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`merge` of trees the caller gives away (a pod just built, and a template just
    rendered for it): ``base`` becomes the result, and the subtrees of ``override`` move into
    it instead of being copied."""
    _merge_mapping(base, override, (), _no_record, _given)
    return base


def _given(value: Any) -> Any:
    return value


@dataclass
class MergedTemplate:
    """A merged template and, for every leaf field, the templates that wrote it in order."""

    value: dict[str, Any] = field(default_factory=dict)
    #: leaf path -> (template, value it wrote), in merge order
    writers: dict[Path, list[tuple[str, Any]]] = field(default_factory=dict)

    @cached_property
    def compiled(self) -> CompiledTree:
        """The merged template compiled for rendering (once, not per pod: finding it again by
        its ``marshal`` image cost a dump of the whole template for every pod)."""
        return compile_tree(self.value)

    def provenance(self) -> list[dict[str, Any]]:
        """Per field: the template that set the value in effect, the templates whose other
        values it overrode, and later templates that wrote the same value again."""
        return [
            {"field": format_path(path), "path": list(path), **_attribution(writes)}
            for path, _ in leaves(self.value)
            if (writes := self.writers.get(path))
        ]


def _attribution(writes: list[tuple[str, Any]]) -> dict[str, Any]:
    effective = writes[-1][1]
    start = len(writes) - 1
    while start > 0 and writes[start - 1][1] == effective:
        start -= 1
    return {
        "set_by": writes[start][0],
        "overrode": _unique(name for name, _ in writes[:start]),
        "repeated_by": _unique(name for name, _ in writes[start + 1 :]),
    }


def _unique(names: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(names))


def merge_templates(templates: Sequence[tuple[str, Mapping[str, Any]]]) -> MergedTemplate:
    """Merge named templates in order (later wins), recording who wrote each field."""
    merged = MergedTemplate()
    for name, template in templates:
        merge_into(merged, name, template)
    return merged


def merge_into(merged: MergedTemplate, name: str, template: Mapping[str, Any]) -> None:
    """Merge one more named template on top of ``merged`` (in place)."""

    def record(path: Path, value: Any) -> None:
        for leaf_path, leaf in leaves(value, path):
            merged.writers.setdefault(leaf_path, []).append((name, leaf))

    _merge_mapping(merged.value, template, (), record)
    # A replaced subtree leaves records of fields that no longer exist; drop them.
    still_there = {path for path, _ in leaves(merged.value)}
    for path in [path for path in merged.writers if path not in still_there]:
        del merged.writers[path]


def _merge_mapping(
    target: dict[str, Any],
    override: Mapping[str, Any],
    path: Path,
    record: Record,
    copy: Callable[[Any], Any] = copy_tree,
) -> None:
    for key, value in override.items():
        here = (*path, key)
        current = target.get(key)
        if isinstance(value, Mapping) and isinstance(current, dict):
            _merge_mapping(current, value, here, record, copy)
        elif isinstance(value, list) and isinstance(current, list):
            _merge_list(current, value, here, record, copy)
        else:
            target[key] = copy(value)
            record(here, target[key])


def _name_of(item: Any) -> Any:
    """The merge key of a list item: the ``name`` of a mapping, if it is a plain value."""
    if isinstance(item, Mapping):
        name = item.get("name")
        if isinstance(name, str | int | float | bool):
            return name
    return None


def _merge_list(
    target: list[Any],
    items: Sequence[Any],
    path: Path,
    record: Record,
    copy: Callable[[Any], Any] = copy_tree,
) -> None:
    position_of_name = {
        _name_of(item): index for index, item in enumerate(target) if _name_of(item) is not None
    }
    appended: list[Any] = []
    for item in items:
        name = _name_of(item)
        if name is not None and name in position_of_name:
            position = position_of_name[name]
            _merge_mapping(target[position], item, (*path, position), record, copy)
        elif isinstance(item, Mapping) and item in target:
            # The same mapping again (e.g. a toleration in two templates): keep it once.
            position = target.index(item)
            record((*path, position), target[position])
        elif isinstance(item, Mapping) and item in appended:
            continue
        else:
            appended.append(item)
    for item in appended:
        target.append(copy(item))
        record((*path, len(target) - 1), target[-1])
