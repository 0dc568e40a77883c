"""The embedded cluster's bound pods as the capacity views read them (``services/capacity.py``)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from corral.backends.embedded.objects import ClusterObjectStore
from corral.backends.port import BoundPod
from corral.domain.platform.nodes import Node


class BoundPodCache:
    """The embedded cluster's bound pods, read incrementally: each call reads only (id, node)
    of every bound pod, and the rest of a pod only when it is new; a pod read before is the
    same :class:`BoundPod` (its demand computed once) while its node stays the same. The
    dashboard and the pool views read every bound pod on each request: at 9,000 pods, reading
    and parsing every body took a second."""

    def __init__(self, objects: ClusterObjectStore) -> None:
        self._objects = objects
        self._known: dict[int, BoundPod] = {}
        self._placed: list[tuple[int, str]] = []
        #: The last answer: the nodes asked about and their pods.
        self._last: tuple[Sequence[Node], tuple[BoundPod, ...]] | None = None
        self._lock = threading.Lock()

    def on(self, nodes: Sequence[Node]) -> tuple[BoundPod, ...]:
        """The bound pods on ``nodes``: the same tuple while neither changes."""
        placed = self._objects.bound_pod_nodes()
        with self._lock:
            last = self._last if placed == self._placed else None
        if last is not None and last[0] is nodes:
            return last[1]
        known = {node.name for node in nodes}
        found = tuple(pod for pod in self._read(placed) if pod.node in known)
        with self._lock:
            self._last = (nodes, found)
        return found

    def _read(self, placed: list[tuple[int, str]]) -> list[BoundPod]:
        with self._lock:
            known = dict(self._known)
        new = [pod_id for pod_id, node in placed if pod_id not in known]
        for found in self._objects.by_ids(new):
            known[found.id] = BoundPod(
                found.name, found.namespace, found.node or "", found.labels, found.body
            )
        result: dict[int, BoundPod] = {}
        for pod_id, node in placed:
            pod = known.get(pod_id)
            if pod is None:
                continue  # deleted between the two reads
            if pod.node != node:
                pod = BoundPod(pod.name, pod.namespace, node, pod.labels, pod.body)
            result[pod_id] = pod
        with self._lock:
            self._known = result
            self._placed = placed
        return list(result.values())
