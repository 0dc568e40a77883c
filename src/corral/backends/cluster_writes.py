"""Writes to a cluster whose objects live in corral's own database (a backend that
``writes_in_transaction``: the embedded cluster), recorded as values while a tick works and
written in the transaction that records their result (``services/lifecycle/unit.py``): a
group's objects and its SCHEDULING status, a pod's binding and its task's node, are stored
together or not at all. A backend that writes to a real API server writes at once instead."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Create:
    """Create ``manifests`` (unless they exist) in ``namespace`` of ``backend``."""

    backend: str
    manifests: tuple[Mapping[str, Any], ...]
    namespace: str


@dataclass(frozen=True)
class Bind:
    """Bind pod ``pod`` of ``namespace`` of ``backend`` to ``node``."""

    backend: str
    namespace: str
    pod: str
    node: str


#: A mark to roll back to: how many creates, deletes, binds and unbinds there were.
Mark = tuple[int, int, int, int]


@dataclass
class ClusterWrites:
    """The writes recorded so far, in order, by kind."""

    creates: list[Create] = field(default_factory=list)
    #: Groups (by uuid) whose every object is deleted.
    deletes: list[str] = field(default_factory=list)
    binds: list[Bind] = field(default_factory=list)
    #: Groups (by uuid) whose pods are unbound (evicted).
    unbinds: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.creates or self.deletes or self.binds or self.unbinds)

    def create(self, backend: str, manifests: Sequence[Mapping[str, Any]], namespace: str) -> None:
        self.creates.append(Create(backend, tuple(manifests), namespace))

    def bind(self, backend: str, namespace: str, nodes: Mapping[str, str]) -> None:
        self.binds.extend(Bind(backend, namespace, pod, node) for pod, node in nodes.items())

    def mark(self) -> Mark:
        return len(self.creates), len(self.deletes), len(self.binds), len(self.unbinds)

    def take(self) -> ClusterWrites:
        """Everything recorded, leaving this empty (it stays the tick's, for the next commit)."""
        taken = ClusterWrites(self.creates, self.deletes, self.binds, self.unbinds)
        self.creates, self.deletes, self.binds, self.unbinds = [], [], [], []
        return taken

    def rollback(self, mark: Mark) -> None:
        """Forget what was recorded after ``mark`` (a step that failed half-way)."""
        del self.creates[mark[0] :]
        del self.deletes[mark[1] :]
        del self.binds[mark[2] :]
        del self.unbinds[mark[3] :]
