"""The cluster description: which nodes a simulated backend has (docs/cluster.md).

Three formats, told apart by the document itself:

* corral's own: ``nodes`` (one entry per node) and ``generate`` (racks of identical nodes, with
  their topology labels made level by level, coarsest first);
* a Kubernetes ``NodeList`` (``kind: List`` or ``NodeList``) as ``kubectl get nodes -o yaml``
  prints it, or a single ``kind: Node`` document; fields corral does not use are ignored.

Every problem is a :class:`~corral.errors.UserError` reading
``<source>:<line>:<column>: <field path>: <reason and what to do>``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from corral.domain.formats.documents import locate, parse_document
from corral.domain.formats.json_paths import Path, format_path
from corral.domain.formats.kubernetes_names import label_key_problem, label_value_problem
from corral.domain.formats.quantities import parse_quantity
from corral.domain.platform.nodes import GPU_RESOURCE, MAX_GPUS, Node, Taint
from corral.errors import UserError

#: At most this many levels, as a KAI ``Topology``.
MAX_LEVELS = 16
#: More generated nodes than this is a mistake (and would take long to build and schedule).
MAX_GENERATED_NODES = 100_000
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
#: The resources corral's format knows; a NodeList keeps whatever the node reports.
ALLOCATABLE_KEYS = ("cpu", "memory", "ephemeral-storage", GPU_RESOURCE)
NODE_LIST_KINDS = ("List", "NodeList")

_TOP_KEYS = ("nodes", "generate")
_NODE_KEYS = ("name", "labels", "taints", "allocatable")
_TAINT_KEYS = ("key", "value", "effect")
_KUBERNETES_TAINT_KEYS = (*_TAINT_KEYS, "timeAdded")
_GENERATOR_KEYS = ("prefix", "count", "levels", "labels", "taints", "allocatable")
_LEVEL_KEYS = ("label", "values", "count")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_FORMATS = (
    "write corral's format (a mapping with `nodes` and/or `generate`) or paste the output of "
    "`kubectl get nodes -o yaml`"
)


@dataclass(frozen=True)
class Cluster:
    """The nodes of a described cluster, in file order (generated nodes after ``nodes``)."""

    nodes: tuple[Node, ...]
    _by_name: Mapping[str, Node] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {node.name: node for node in self.nodes})

    def node(self, name: str) -> Node | None:
        """The node called ``name``, if the cluster has one."""
        return self._by_name.get(name)


#: Longest cluster description read: ``kubectl get nodes -o yaml`` of 10,000 nodes is ~100 MB.
MAX_CLUSTER_CHARS = 256 * 2**20


def parse_cluster(text: str, *, source: str = "cluster.yaml") -> Cluster:
    """The cluster described by ``text`` (YAML or JSON); ``source`` names it in errors."""
    document = parse_document(text, source, max_chars=MAX_CLUSTER_CHARS)
    reader = _Reader(text, source)
    if isinstance(document, Mapping) and "kind" in document:
        placed = _kubernetes_nodes(reader, document)
    else:
        placed = _corral_nodes(reader, document)
    _reject_duplicate_names(reader, placed)
    return Cluster(tuple(node for node, _ in placed))


# ------------------------------------------------------------------------------------ errors


@dataclass(frozen=True)
class _Reader:
    """The text being read, to point errors at the line and column of a field path."""

    text: str
    source: str

    def where(self, path: Path) -> str:
        try:
            position = locate(self.text, path) if path else None
        except RecursionError:
            position = None
        return f"{self.source}:{position}" if position else self.source

    def error(self, path: Path, reason: str) -> UserError:
        field = f" {format_path(path)}:" if path else ""
        return UserError(f"{self.where(path)}:{field} {reason}")


#: A node and the path of the entry that made it (``nodes[3]`` or ``generate[0]``).
_Placed = tuple[Node, Path]


def _mapping(reader: _Reader, value: Any, path: Path, what: str) -> Mapping[Any, Any]:
    if not isinstance(value, Mapping):
        raise reader.error(path, f"{what} must be a mapping, not {_kind(value)}")
    return value


def _list(reader: _Reader, value: Any, path: Path, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise reader.error(path, f"{what} must be a list, not {_kind(value)}")
    return value


def _kind(value: Any) -> str:
    if value is None:
        return "empty"
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string"}
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return names.get(type(value), type(value).__name__)


def _reject_unknown(
    reader: _Reader, value: Mapping[Any, Any], path: Path, allowed: Sequence[str]
) -> None:
    for key in value:
        if key not in allowed:
            raise reader.error(
                (*path, str(key)),
                f"unknown field {str(key)!r}; the fields here are {', '.join(allowed)}",
            )


def _require(reader: _Reader, value: Mapping[Any, Any], path: Path, key: str) -> Any:
    if value.get(key) is None:
        raise reader.error(path, f"`{key}` is missing; add it")
    return value[key]


# ------------------------------------------------------------------------ corral's own format


def _corral_nodes(reader: _Reader, document: Any) -> list[_Placed]:
    if not isinstance(document, Mapping):
        raise reader.error((), f"a cluster description must be a mapping; {_FORMATS}")
    _reject_unknown(reader, document, (), _TOP_KEYS)
    placed: list[_Placed] = []
    entries = document.get("nodes")
    if entries is not None:
        for index, entry in enumerate(_list(reader, entries, ("nodes",), "`nodes`")):
            path: Path = ("nodes", index)
            placed.append((_corral_node(reader, entry, path), (*path, "name")))
    generators = document.get("generate")
    if generators is not None:
        placed += _generated_nodes(reader, _list(reader, generators, ("generate",), "`generate`"))
    if not placed:
        raise reader.error(
            (), "the cluster has no nodes; describe some under `nodes` or `generate`"
        )
    return placed


def _corral_node(reader: _Reader, entry: Any, path: Path) -> Node:
    entry = _mapping(reader, entry, path, "a node")
    _reject_unknown(reader, entry, path, _NODE_KEYS)
    return Node(
        name=_node_name(reader, _require(reader, entry, path, "name"), (*path, "name")),
        labels=_labels(reader, entry.get("labels"), (*path, "labels")),
        taints=_taints(reader, entry.get("taints"), (*path, "taints"), _TAINT_KEYS),
        allocatable=_allocatable(reader, entry.get("allocatable"), (*path, "allocatable"), True),
    )


def _node_name(reader: _Reader, value: Any, path: Path) -> str:
    if not isinstance(value, str):
        raise reader.error(path, f"a node name must be a string, not {_kind(value)}")
    if len(value) > 253 or not _DNS_SUBDOMAIN.match(value):
        raise reader.error(
            path,
            f"{value!r} is not a valid node name: use at most 253 lowercase letters, digits, "
            "'-' and '.', starting and ending with a letter or digit",
        )
    return value


def _labels(reader: _Reader, value: Any, path: Path) -> dict[str, str]:
    if value is None:
        return {}
    labels = _mapping(reader, value, path, "`labels`")
    return {
        _label_key(reader, key, (*path, str(key))): _label_value(reader, item, (*path, str(key)))
        for key, item in labels.items()
    }


def _label_key(reader: _Reader, key: Any, path: Path) -> str:
    if not isinstance(key, str):
        raise reader.error(path, f"a label key must be a string, not {_kind(key)}")
    problem = label_key_problem(key)
    if problem:
        raise reader.error(path, f"{key!r} is not a valid Kubernetes label key: {problem}")
    return key


def _label_value(reader: _Reader, value: Any, path: Path) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise reader.error(
            path, f"a label value must be a string, not {_kind(value)}; put it in quotes"
        )
    problem = label_value_problem(value)
    if problem:
        raise reader.error(path, f"not a valid Kubernetes label value: {problem}")
    return value


def _taints(reader: _Reader, value: Any, path: Path, allowed: Sequence[str]) -> tuple[Taint, ...]:
    if value is None:
        return ()
    entries = _list(reader, value, path, "`taints`")
    return tuple(
        _taint(reader, entry, (*path, index), allowed) for index, entry in enumerate(entries)
    )


def _taint(reader: _Reader, entry: Any, path: Path, allowed: Sequence[str]) -> Taint:
    entry = _mapping(reader, entry, path, "a taint")
    if allowed == _TAINT_KEYS:
        _reject_unknown(reader, entry, path, allowed)
    key = _label_key(reader, _require(reader, entry, path, "key"), (*path, "key"))
    raw_value = entry.get("value")
    value = "" if raw_value is None else _label_value(reader, raw_value, (*path, "value"))
    effect = _require(reader, entry, path, "effect")
    if effect not in TAINT_EFFECTS:
        raise reader.error(
            (*path, "effect"),
            f"{effect!r} is not a taint effect; use one of {', '.join(TAINT_EFFECTS)}",
        )
    return Taint(key=key, effect=str(effect), value=value)


def _allocatable(reader: _Reader, value: Any, path: Path, strict: bool) -> dict[str, str]:
    if value is None:
        return {}
    resources = _mapping(reader, value, path, "`allocatable`")
    if strict:
        _reject_unknown(reader, resources, path, ALLOCATABLE_KEYS)
    return {
        str(key): _quantity(reader, str(key), item, (*path, str(key)))
        for key, item in resources.items()
    }


def _quantity(reader: _Reader, resource: str, value: Any, path: Path) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise reader.error(
            path, f'must be a Kubernetes quantity such as "64" or "512Gi", not {_kind(value)}'
        )
    text = str(value)
    try:
        amount = parse_quantity(text)
    except (ValueError, ArithmeticError) as err:
        raise reader.error(path, str(err)) from None
    if amount < 0:
        raise reader.error(path, f"{text!r} is negative; allocatable resources are 0 or more")
    if resource == GPU_RESOURCE and (amount != amount.to_integral_value() or amount > MAX_GPUS):
        raise reader.error(path, f"{text!r} is not a whole number of GPUs up to {MAX_GPUS}")
    return text


# ------------------------------------------------------------------------------- generators


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


def _generated_nodes(reader: _Reader, entries: list[Any]) -> list[_Placed]:
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
    placed: list[_Placed] = []
    parents: dict[tuple[str, str], tuple[str, Path]] = {}
    for generator in generators:
        for node, chain in _expand(reader, generator):
            _check_parents(reader, generator, chain, parents)
            placed.append((node, generator.path))
    return placed


def _generator(reader: _Reader, entry: Any, path: Path) -> _Generator:
    entry = _mapping(reader, entry, path, "a generator")
    _reject_unknown(reader, entry, path, _GENERATOR_KEYS)
    levels = _levels(reader, entry.get("levels"), (*path, "levels"))
    labels = _labels(reader, entry.get("labels"), (*path, "labels"))
    for level in levels:
        if level.label in labels:
            raise reader.error(
                (*path, "labels", level.label),
                "this label is set per node by `levels`; remove it from `labels`",
            )
    return _Generator(
        path=path,
        prefix=_prefix(reader, _require(reader, entry, path, "prefix"), (*path, "prefix")),
        count=_count(reader, _require(reader, entry, path, "count"), (*path, "count")),
        levels=levels,
        labels=labels,
        taints=_taints(reader, entry.get("taints"), (*path, "taints"), _TAINT_KEYS),
        allocatable=_allocatable(reader, entry.get("allocatable"), (*path, "allocatable"), True),
    )


def _prefix(reader: _Reader, value: Any, path: Path) -> str:
    if not isinstance(value, str) or len(value) > 40 or not _DNS_LABEL.match(value):
        raise reader.error(
            path,
            f"{value!r} is not a valid name prefix: use at most 40 lowercase letters, digits "
            "and '-', starting and ending with a letter or digit",
        )
    return value


def _count(reader: _Reader, value: Any, path: Path) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise reader.error(path, f"must be a whole number, 1 or more, not {value!r}")
    return value


def _levels(reader: _Reader, value: Any, path: Path) -> tuple[_Level, ...]:
    if value is None:
        return ()
    entries = _list(reader, value, path, "`levels`")
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


def _level(reader: _Reader, entry: Any, path: Path) -> _Level:
    entry = _mapping(reader, entry, path, "a level")
    _reject_unknown(reader, entry, path, _LEVEL_KEYS)
    label = _label_key(reader, _require(reader, entry, path, "label"), (*path, "label"))
    if ("values" in entry) == ("count" in entry):
        raise reader.error(
            path, "give either `values` (the label values) or `count` (how many values)"
        )
    if "count" in entry:
        return _Level(label, None, _count(reader, entry["count"], (*path, "count")))
    return _Level(label, _level_values(reader, entry["values"], (*path, "values")), None)


def _level_values(reader: _Reader, value: Any, path: Path) -> tuple[tuple[str, str], ...]:
    entries = _list(reader, value, path, "`values`")
    if not entries:
        raise reader.error(path, "is empty; give at least one value")
    values: list[tuple[str, str]] = []
    for index, item in enumerate(entries):
        text = _label_value(reader, item, (*path, index))
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


def _expand(reader: _Reader, generator: _Generator) -> Iterator[tuple[Node, tuple[str, ...]]]:
    width = len(str(generator.count - 1))
    for chain in _combinations(generator.levels):
        topology = {
            level.label: value for level, (value, _) in zip(generator.levels, chain, strict=True)
        }
        _check_level_values(reader, generator, topology)
        stem = "-".join((generator.prefix, *(part for _, part in chain)))
        for index in range(generator.count):
            name = f"{stem}-{index:0{width}d}"
            if len(name) > 63 or not _DNS_LABEL.match(name):
                raise reader.error(
                    generator.path,
                    f"makes node name {name!r}, which is not a valid name: use at most 63 "
                    "lowercase letters, digits and '-' in all (shorten `prefix` or the levels' "
                    "`values`, and write the values in lowercase)",
                )
            labels = {**generator.labels, **topology}
            node = Node(name, labels, generator.taints, dict(generator.allocatable))
            yield node, tuple(value for value, _ in chain)


def _check_level_values(
    reader: _Reader, generator: _Generator, topology: Mapping[str, str]
) -> None:
    for index, (label, value) in enumerate(topology.items()):
        problem = label_value_problem(value)
        if problem:
            raise reader.error(
                (*generator.path, "levels", index),
                f"makes the value of {label!r} invalid: {problem}; give the coarser levels "
                "shorter `values`",
            )


def _check_parents(
    reader: _Reader,
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


# ---------------------------------------------------------------------- Kubernetes NodeList


def _kubernetes_nodes(reader: _Reader, document: Mapping[Any, Any]) -> list[_Placed]:
    kind = document.get("kind")
    if kind == "Node":
        return [(_kubernetes_node(reader, document, ()), ("metadata", "name"))]
    if kind not in NODE_LIST_KINDS:
        raise reader.error(
            ("kind",),
            f"{kind!r} is not a node list; use kind List, NodeList or Node, or {_FORMATS}",
        )
    items = document.get("items")
    entries = [] if items is None else _list(reader, items, ("items",), "`items`")
    placed: list[_Placed] = []
    for index, entry in enumerate(entries):
        path: Path = ("items", index)
        entry = _mapping(reader, entry, path, "an item")
        if entry.get("kind", "Node") != "Node":
            raise reader.error(
                (*path, "kind"), f"{entry.get('kind')!r} is not a Node; list only nodes"
            )
        placed.append((_kubernetes_node(reader, entry, path), (*path, "metadata", "name")))
    if not placed:
        raise reader.error(("items",), "the list has no nodes; a cluster needs at least one")
    return placed


def _kubernetes_node(reader: _Reader, entry: Mapping[Any, Any], path: Path) -> Node:
    if entry.get("metadata") is None:
        raise reader.error(path, "`metadata` (with the node's `name`) is missing; add it")
    metadata = _mapping(reader, entry["metadata"], (*path, "metadata"), "`metadata`")
    spec = _optional_mapping(reader, entry.get("spec"), (*path, "spec"))
    status = _optional_mapping(reader, entry.get("status"), (*path, "status"))
    where = (*path, "metadata")
    return Node(
        name=_node_name(reader, _require(reader, metadata, where, "name"), (*where, "name")),
        labels=_labels(reader, metadata.get("labels"), (*where, "labels")),
        taints=_taints(
            reader, spec.get("taints"), (*path, "spec", "taints"), _KUBERNETES_TAINT_KEYS
        ),
        allocatable=_allocatable(
            reader, status.get("allocatable"), (*path, "status", "allocatable"), False
        ),
    )


def _optional_mapping(reader: _Reader, value: Any, path: Path) -> Mapping[Any, Any]:
    return {} if value is None else _mapping(reader, value, path, f"`{path[-1]}`")


# ------------------------------------------------------------------------------- uniqueness


def _reject_duplicate_names(reader: _Reader, placed: list[_Placed]) -> None:
    first: dict[str, Path] = {}
    for node, path in placed:
        if node.name not in first:
            first[node.name] = path
            continue
        known = first[node.name]
        if known == path:
            reason = (
                f"makes node name {node.name!r} twice; its level values run together into "
                "the same name, so give the levels' `values` distinct spellings"
            )
        else:
            reason = (
                f"node name {node.name!r} is already used by {format_path(known)} "
                f"({reader.where(known)}); node names must be unique, rename one of them"
            )
        raise reader.error(path, reason)
