"""The topology page's picture of a pool: panels per zone and spine, in each the racks or cliques
(the pool's finest topology level) as grids of nodes, coloured by free GPUs (docs/dashboard.md).

Pure: it takes the nodes, what is used on them and who owns it, and returns what the template
draws. A pool with more than :data:`AGGREGATE_ABOVE` nodes is drawn one cell per finest domain
instead of one per node, so that the page stays readable (and small) at thousands of nodes; a
domain's link narrows the page to it, where its nodes are drawn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from corral.domain.platform.node_health import closed_reason
from corral.domain.platform.nodes import Node
from corral.domain.views.capacity import DomainCapacity, PoolCapacity, fits_words

#: Above this many nodes (after a drill-down), each finest domain is one cell.
AGGREGATE_ABOVE = 400
#: The label of a node that lacks a topology label.
UNLABELLED = "(none)"
#: The capacity model's key of such nodes' domain (``scheduler/capacity.py``).
UNLABELLED_KEY = "(none)"


#: What a closed node's cell says before its figures (docs/health.md): colour is never the only cue.
CLOSED_MARK = "✕"


@dataclass(frozen=True)
class NodeCell:
    name: str
    gpus: int
    #: Free GPUs that new work may use: none on a closed node.
    free: int
    #: The workflows with pods on the node, sorted.
    owners: tuple[str, ...]
    #: Why the node takes no new pod ("": it may), ``node_health.closed_reason``.
    closed: str = ""

    @property
    def shade(self) -> str:
        """The CSS class of the node's colour: how much of it is free, or closed."""
        return "shade-closed" if self.closed else shade(self.free, self.gpus)

    @property
    def label(self) -> str:
        """What the cell says, so that colour is never the only cue."""
        figures = f"{self.free}/{self.gpus}" if self.gpus else "cpu"
        return f"{CLOSED_MARK} {figures}" if self.closed else figures


@dataclass
class Block:
    """One domain of the finest level (a rack or clique), or one group of unlabelled nodes."""

    #: The node label of the level ("" without topology keys).
    level: str
    value: str
    nodes: list[NodeCell] = field(default_factory=list)
    #: The value of the domain around it (its panel's finest), which ``short`` leaves out.
    parent: str = ""
    #: Its path: every level's value, coarsest first, joined by "." (``DomainCapacity.key``).
    key: str = ""
    #: What the scheduler would place in it now (``domain/views/capacity.py``); None: not
    #: known (a picture drawn without the model).
    capacity: DomainCapacity | None = None
    #: The words of ``capacity`` ("" without it).
    fits: str = ""

    @property
    def short(self) -> str:
        """The value without its parent's, where it repeats it (``rack-0-gpu-clique-0`` for
        ``zone-a-spine-0-rack-0-gpu-clique-0`` in spine ``zone-a-spine-0``)."""
        for separator in ("-", ".", "/", "_"):
            prefix = self.parent + separator
            if self.parent and self.value.startswith(prefix) and len(self.value) > len(prefix):
                return self.value[len(prefix) :]
        return self.value

    def owner_nodes(self) -> list[tuple[str, int]]:
        """Each workflow with pods here and on how many of the domain's nodes, most first."""
        counts: dict[str, int] = {}
        for node in self.nodes:
            for owner in node.owners:
                counts[owner] = counts.get(owner, 0) + 1
        return sorted(counts.items(), key=lambda item: (-item[1], item[0]))

    @property
    def gpus(self) -> int:
        return sum(node.gpus for node in self.nodes)

    @property
    def free(self) -> int:
        return sum(node.free for node in self.nodes)

    @property
    def shade(self) -> str:
        return shade(self.free, self.gpus)

    @property
    def largest_gang(self) -> int:
        """How many whole-node tasks one gang requiring the domain is placed with now (the
        capacity model's: the quota and the fabric included; 0 when not known)."""
        return self.capacity.fits if self.capacity is not None else 0

    @property
    def owners(self) -> tuple[str, ...]:
        return tuple(sorted({owner for node in self.nodes for owner in node.owners}))


@dataclass
class Panel:
    """The nodes under one zone and spine (the two coarsest levels that are not the finest)."""

    title: str
    blocks: list[Block] = field(default_factory=list)

    @property
    def gpus(self) -> int:
        return sum(block.gpus for block in self.blocks)

    @property
    def free(self) -> int:
        return sum(block.free for block in self.blocks)


@dataclass(frozen=True)
class Level:
    """A pool's topology level: the name workflows use and the node label behind it."""

    key: str
    label: str


@dataclass(frozen=True)
class TopologyPicture:
    levels: tuple[Level, ...]
    panels: tuple[Panel, ...]
    #: One cell per finest domain instead of one per node.
    aggregated: bool
    nodes: int
    gpus: int
    free: int


def shade(free: int, gpus: int) -> str:
    if gpus == 0:
        return "shade-none"
    if free == 0:
        return "shade-full"
    if free == gpus:
        return "shade-free"
    return "shade-part"


def picture(
    nodes: Sequence[Node],
    levels: Sequence[Level],
    gpus: Mapping[str, int],
    used_gpus: Mapping[str, int],
    owners: Mapping[str, Sequence[str]],
    within: tuple[str, str] | None = None,
    capacity: PoolCapacity | None = None,
) -> TopologyPicture:
    """``nodes`` (a pool's, with their ``gpus``) grouped by ``levels`` (coarsest first);
    ``within=(label, value)`` keeps the nodes with that label value; ``capacity`` (the
    pool's, from the capacity model) says what fits in each domain now."""
    fitting = {d.key: d for d in capacity.domains} if capacity is not None else {}
    if within is not None:
        label, value = within
        nodes = [node for node in nodes if node.labels.get(label, UNLABELLED) == value]
    finest = levels[-1].label if levels else ""
    outer = levels[:-1][:2]
    panels: dict[tuple[str, ...], Panel] = {}
    blocks: dict[tuple[str, ...], Block] = {}
    total = free = 0
    for node in nodes:
        has = gpus.get(node.name, 0)
        closed = closed_reason(node.health) or ""
        cell = NodeCell(
            node.name,
            has,
            0 if closed else max(has - used_gpus.get(node.name, 0), 0),
            tuple(sorted(owners.get(node.name, ()))),
            closed,
        )
        total += cell.gpus
        free += cell.free
        path = tuple(node.labels.get(level.label, UNLABELLED) for level in outer)
        panel = panels.get(path)
        if panel is None:
            title = " / ".join(f"{lv.key} {value}" for lv, value in zip(outer, path, strict=True))
            panel = panels[path] = Panel(title or "all nodes")
        value = node.labels.get(finest, UNLABELLED) if finest else UNLABELLED
        key = _key(node, levels)
        block = blocks.get((*path, key))
        if block is None:
            found = fitting.get(key)
            block = blocks[(*path, key)] = Block(
                finest,
                value,
                parent=path[-1] if path else "",
                key=key,
                capacity=found,
                fits=fits_words(found, capacity.quota) if found and capacity else "",
            )
            panel.blocks.append(block)
        block.nodes.append(cell)
    ordered = tuple(panels[key] for key in sorted(panels))
    for panel in ordered:
        panel.blocks.sort(key=lambda block: block.value)
    return TopologyPicture(
        tuple(levels), ordered, len(nodes) > AGGREGATE_ABOVE, len(nodes), total, free
    )


def _key(node: Node, levels: Sequence[Level]) -> str:
    """The path of the node's finest domain, as the scheduler's snapshot names it; the
    capacity model's ``UNLABELLED`` for a node that lacks a level's label."""
    values = [node.labels.get(level.label) for level in levels]
    if not levels or any(value is None for value in values):
        return UNLABELLED_KEY
    return ".".join(str(value) for value in values)
