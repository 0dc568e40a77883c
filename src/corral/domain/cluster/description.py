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

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from corral.domain.cluster.generators import generated_nodes
from corral.domain.cluster.health_reader import health_at
from corral.domain.cluster.reader import (
    KUBERNETES_TAINT_KEYS,
    TAINT_KEYS,
    Placed,
    Reader,
    allocatable_at,
    labels_at,
    list_at,
    mapping_at,
    node_name,
    reject_unknown,
    require,
    taints_at,
)
from corral.domain.formats.documents import parse_document
from corral.domain.formats.json_paths import Path, format_path
from corral.domain.platform.nodes import Node

NODE_LIST_KINDS = ("List", "NodeList")

_TOP_KEYS = ("nodes", "generate")
_NODE_KEYS = ("name", "labels", "taints", "allocatable", "unschedulable", "conditions", "fabric")
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
    reader = Reader(text, source)
    if isinstance(document, Mapping) and "kind" in document:
        placed = _kubernetes_nodes(reader, document)
    else:
        placed = _corral_nodes(reader, document)
    _reject_duplicate_names(reader, placed)
    return Cluster(tuple(node for node, _ in placed))


# ------------------------------------------------------------------------ corral's own format


def _corral_nodes(reader: Reader, document: Any) -> list[Placed]:
    if not isinstance(document, Mapping):
        raise reader.error((), f"a cluster description must be a mapping; {_FORMATS}")
    reject_unknown(reader, document, (), _TOP_KEYS)
    placed: list[Placed] = []
    entries = document.get("nodes")
    if entries is not None:
        for index, entry in enumerate(list_at(reader, entries, ("nodes",), "`nodes`")):
            path: Path = ("nodes", index)
            placed.append((_corral_node(reader, entry, path), (*path, "name")))
    generators = document.get("generate")
    if generators is not None:
        placed += generated_nodes(reader, list_at(reader, generators, ("generate",), "`generate`"))
    if not placed:
        raise reader.error(
            (), "the cluster has no nodes; describe some under `nodes` or `generate`"
        )
    return placed


def _corral_node(reader: Reader, entry: Any, path: Path) -> Node:
    entry = mapping_at(reader, entry, path, "a node")
    reject_unknown(reader, entry, path, _NODE_KEYS)
    return Node(
        name=node_name(reader, require(reader, entry, path, "name"), (*path, "name")),
        labels=labels_at(reader, entry.get("labels"), (*path, "labels")),
        taints=taints_at(reader, entry.get("taints"), (*path, "taints"), TAINT_KEYS),
        allocatable=allocatable_at(reader, entry.get("allocatable"), (*path, "allocatable"), True),
        health=health_at(
            reader,
            entry.get("unschedulable"),
            entry.get("conditions"),
            entry.get("fabric"),
            ((*path, "unschedulable"), (*path, "conditions"), (*path, "fabric")),
        ),
    )


# ---------------------------------------------------------------------- Kubernetes NodeList


def _kubernetes_nodes(reader: Reader, document: Mapping[Any, Any]) -> list[Placed]:
    kind = document.get("kind")
    if kind == "Node":
        return [(_kubernetes_node(reader, document, ()), ("metadata", "name"))]
    if kind not in NODE_LIST_KINDS:
        raise reader.error(
            ("kind",),
            f"{kind!r} is not a node list; use kind List, NodeList or Node, or {_FORMATS}",
        )
    items = document.get("items")
    entries = [] if items is None else list_at(reader, items, ("items",), "`items`")
    placed: list[Placed] = []
    for index, entry in enumerate(entries):
        path: Path = ("items", index)
        entry = mapping_at(reader, entry, path, "an item")
        if entry.get("kind", "Node") != "Node":
            raise reader.error(
                (*path, "kind"), f"{entry.get('kind')!r} is not a Node; list only nodes"
            )
        placed.append((_kubernetes_node(reader, entry, path), (*path, "metadata", "name")))
    if not placed:
        raise reader.error(("items",), "the list has no nodes; a cluster needs at least one")
    return placed


def _kubernetes_node(reader: Reader, entry: Mapping[Any, Any], path: Path) -> Node:
    if entry.get("metadata") is None:
        raise reader.error(path, "`metadata` (with the node's `name`) is missing; add it")
    metadata = mapping_at(reader, entry["metadata"], (*path, "metadata"), "`metadata`")
    spec = _optional_mapping(reader, entry.get("spec"), (*path, "spec"))
    status = _optional_mapping(reader, entry.get("status"), (*path, "status"))
    where = (*path, "metadata")
    return Node(
        name=node_name(reader, require(reader, metadata, where, "name"), (*where, "name")),
        labels=labels_at(reader, metadata.get("labels"), (*where, "labels")),
        taints=taints_at(
            reader, spec.get("taints"), (*path, "spec", "taints"), KUBERNETES_TAINT_KEYS
        ),
        allocatable=allocatable_at(
            reader, status.get("allocatable"), (*path, "status", "allocatable"), False
        ),
        health=health_at(
            reader,
            spec.get("unschedulable"),
            status.get("conditions"),
            None,
            ((*path, "spec", "unschedulable"), (*path, "status", "conditions"), ()),
            kubernetes=True,
        ),
    )


def _optional_mapping(reader: Reader, value: Any, path: Path) -> Mapping[Any, Any]:
    return {} if value is None else mapping_at(reader, value, path, f"`{path[-1]}`")


# ------------------------------------------------------------------------------- uniqueness


def _reject_duplicate_names(reader: Reader, placed: list[Placed]) -> None:
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
