"""The ``generate`` section of corral's cluster format: racks of identical nodes, their topology
labels made level by level, coarsest first (docs/cluster.md)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from corral.domain.cluster.reader import (
    DNS_LABEL,
    TAINT_KEYS,
    Placed,
    Reader,
    allocatable_at,
    label_key,
    label_value,
    labels_at,
    list_at,
    mapping_at,
    reject_unknown,
    require,
    taints_at,
)
from corral.domain.formats.json_paths import Path, format_path
from corral.domain.formats.kubernetes_names import label_value_problem
from corral.domain.platform.nodes import Node, Taint

#: At most this many levels, as a KAI ``Topology``.
MAX_LEVELS = 16
#: More generated nodes than this is a mistake (and would take long to build and schedule).
MAX_GENERATED_NODES = 100_000

_GENERATOR_KEYS = ("prefix", "count", "levels", "labels", "taints", "allocatable")
_LEVEL_KEYS = ("label", "values", "count")


@dataclass(frozen=True)
class _Level:
    label: str
    #: Per value: the label value and the part it adds to node names.
    values: tuple[tuple[str, str], ...] | None
    count: int | None

    def size(self) -> int:
        return len(self.values) if self.values is not None else self.count or 0


@dataclass(frozen=True)
class _Generator:
    path: Path
    prefix: str
    count: int
    levels: tuple[_Level, ...]
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    allocatable: dict[str, str]

    def size(self) -> int:
        total = self.count
        for level in self.levels:
            total *= level.size()
            if total > MAX_GENERATED_NODES:  # stop before the product gets huge
                return total
        return total


def generated_nodes(reader: Reader, entries: list[Any]) -> list[Placed]:
    generators = [
        _generator(reader, entry, ("generate", index)) for index, entry in enumerate(entries)
    ]
    total = 0
    for generator in generators:
        before, total = total, total + generator.size()
        if total > MAX_GENERATED_NODES:
            others = " with the generators before it" if before else ""
            raise reader.error(
                generator.path,
                f"makes more than {MAX_GENERATED_NODES} nodes{others}; lower `count` or the "
                "levels' `count` or `values`",
            )
    placed: list[Placed] = []
    parents: dict[tuple[str, str], tuple[str, Path]] = {}
    for generator in generators:
        for node, chain in _expand(reader, generator):
            _check_parents(reader, generator, chain, parents)
            placed.append((node, generator.path))
    return placed


def _generator(reader: Reader, entry: Any, path: Path) -> _Generator:
    entry = mapping_at(reader, entry, path, "a generator")
    reject_unknown(reader, entry, path, _GENERATOR_KEYS)
    levels = _levels(reader, entry.get("levels"), (*path, "levels"))
    labels = labels_at(reader, entry.get("labels"), (*path, "labels"))
    for level in levels:
        if level.label in labels:
            raise reader.error(
                (*path, "labels", level.label),
                "this label is set per node by `levels`; remove it from `labels`",
            )
    return _Generator(
        path=path,
        prefix=_prefix(reader, require(reader, entry, path, "prefix"), (*path, "prefix")),
        count=_count(reader, require(reader, entry, path, "count"), (*path, "count")),
        levels=levels,
        labels=labels,
        taints=taints_at(reader, entry.get("taints"), (*path, "taints"), TAINT_KEYS),
        allocatable=allocatable_at(reader, entry.get("allocatable"), (*path, "allocatable"), True),
    )


def _prefix(reader: Reader, value: Any, path: Path) -> str:
    if not isinstance(value, str) or len(value) > 40 or not DNS_LABEL.match(value):
        raise reader.error(
            path,
            f"{value!r} is not a valid name prefix: use at most 40 lowercase letters, digits "
            "and '-', starting and ending with a letter or digit",
        )
    return value


def _count(reader: Reader, value: Any, path: Path) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise reader.error(path, f"must be a whole number, 1 or more, not {value!r}")
    return value


def _levels(reader: Reader, value: Any, path: Path) -> tuple[_Level, ...]:
    if value is None:
        return ()
    entries = list_at(reader, value, path, "`levels`")
    if len(entries) > MAX_LEVELS:
        raise reader.error(path, f"has {len(entries)} levels; a topology has at most {MAX_LEVELS}")
    levels: list[_Level] = []
    for index, entry in enumerate(entries):
        level = _level(reader, entry, (*path, index))
        if any(seen.label == level.label for seen in levels):
            raise reader.error(
                (*path, index, "label"), f"{level.label!r} is already a level; name it once"
            )
        levels.append(level)
    return tuple(levels)


def _level(reader: Reader, entry: Any, path: Path) -> _Level:
    entry = mapping_at(reader, entry, path, "a level")
    reject_unknown(reader, entry, path, _LEVEL_KEYS)
    label = label_key(reader, require(reader, entry, path, "label"), (*path, "label"))
    if ("values" in entry) == ("count" in entry):
        raise reader.error(
            path, "give either `values` (the label values) or `count` (how many values)"
        )
    if "count" in entry:
        return _Level(label, None, _count(reader, entry["count"], (*path, "count")))
    return _Level(label, _level_values(reader, entry["values"], (*path, "values")), None)


def _level_values(reader: Reader, value: Any, path: Path) -> tuple[tuple[str, str], ...]:
    entries = list_at(reader, value, path, "`values`")
    if not entries:
        raise reader.error(path, "is empty; give at least one value")
    values: list[tuple[str, str]] = []
    for index, item in enumerate(entries):
        text = label_value(reader, item, (*path, index))
        if not text:
            raise reader.error((*path, index), "a level value must not be empty")
        if any(seen == text for seen, _ in values):
            raise reader.error((*path, index), f"{text!r} appears twice; list each value once")
        values.append((text, text))
    return tuple(values)


def _short(label: str) -> str:
    """``topology.kubernetes.io/rack`` -> ``rack``: the stem of counted values."""
    return label.rpartition("/")[2]


def _level_choices(level: _Level, parent: str | None) -> tuple[tuple[str, str], ...]:
    """The (label value, name part) pairs of ``level`` under a parent with value ``parent``."""
    if level.values is not None:
        return level.values
    stem = _short(level.label)
    start = f"{parent}-" if parent else ""
    return tuple((f"{start}{stem}-{i}", f"{stem[0].lower()}{i}") for i in range(level.count or 0))


def _combinations(levels: tuple[_Level, ...]) -> Iterator[tuple[tuple[str, str], ...]]:
    """Every path through the levels, coarsest first, as (label value, name part) pairs."""
    if not levels:
        yield ()
        return
    for head in _combinations(levels[:-1]):
        parent = head[-1][0] if head else None
        for choice in _level_choices(levels[-1], parent):
            yield (*head, choice)


def _expand(reader: Reader, generator: _Generator) -> Iterator[tuple[Node, tuple[str, ...]]]:
    width = len(str(generator.count - 1))
    for chain in _combinations(generator.levels):
        topology = {
            level.label: value for level, (value, _) in zip(generator.levels, chain, strict=True)
        }
        _check_level_values(reader, generator, topology)
        stem = "-".join((generator.prefix, *(part for _, part in chain)))
        for index in range(generator.count):
            name = f"{stem}-{index:0{width}d}"
            if len(name) > 63 or not DNS_LABEL.match(name):
                raise reader.error(
                    generator.path,
                    f"makes node name {name!r}, which is not a valid name: use at most 63 "
                    "lowercase letters, digits and '-' in all (shorten `prefix` or the levels' "
                    "`values`, and write the values in lowercase)",
                )
            labels = {**generator.labels, **topology}
            node = Node(name, labels, generator.taints, dict(generator.allocatable))
            yield node, tuple(value for value, _ in chain)


def _check_level_values(reader: Reader, generator: _Generator, topology: Mapping[str, str]) -> None:
    for index, (label, value) in enumerate(topology.items()):
        problem = label_value_problem(value)
        if problem:
            raise reader.error(
                (*generator.path, "levels", index),
                f"makes the value of {label!r} invalid: {problem}; give the coarser levels "
                "shorter `values`",
            )


def _check_parents(
    reader: Reader,
    generator: _Generator,
    chain: tuple[str, ...],
    parents: dict[tuple[str, str], tuple[str, Path]],
) -> None:
    """A domain value belongs to one parent across the whole cluster (a rack is in one spine)."""
    for index in range(1, len(chain)):
        label = generator.levels[index].label
        parent = f"{generator.levels[index - 1].label}={chain[index - 1]}"
        known = parents.setdefault((label, chain[index]), (parent, generator.path))
        if known[0] != parent:
            raise reader.error(
                (*generator.path, "levels", index),
                f"{label}={chain[index]} would be under both {known[0]} "
                f"({format_path(known[1])}) and {parent}; a domain belongs to one parent, so "
                "use `count` (its values start with the parent's value) or distinct `values`",
            )
