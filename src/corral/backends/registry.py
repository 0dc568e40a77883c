"""Which cluster each BACKEND config names: the embedded one (the default), or a real
Kubernetes cluster when the backend has a ``kubernetes`` section (docs/kubernetes.md).

Kubernetes backends are connected once and kept (their watches run in the background); a
change of the backend's access settings or namespace reconnects it. The services see every
backend through the port (``backends/port.py``) only.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from functools import partial

import structlog
from sqlalchemy import Connection

from corral.backends.cluster_writes import ClusterWrites
from corral.backends.embedded.backend import EmbeddedBackend
from corral.backends.embedded.objects import ClusterObjectStore
from corral.backends.execution import TaskExecutor
from corral.backends.kubernetes.api import connect
from corral.backends.kubernetes.backend import KubernetesBackend
from corral.backends.port import BackendError, ClusterBackend
from corral.domain.configs.backend_models import KubernetesAccess
from corral.domain.configs.snapshot import Configs
from corral.domain.topology.kai_objects import backend_namespace
from corral.errors import UserError
from corral.scheduler.records import BoundPodOnNode

log = structlog.get_logger("corral.backends")


def kubernetes_backends(configs: Configs) -> set[str]:
    """The configured backends with a ``kubernetes`` section."""
    return {name for name in configs.backend_names() if configs.backend(name).kubernetes}


Connector = Callable[[str, KubernetesAccess, str], KubernetesBackend]


def connect_backend(name: str, access: KubernetesAccess, namespace: str) -> KubernetesBackend:
    """A started backend for the cluster ``access`` names (two clients: one for requests, one
    whose blocked watches are ended by closing it)."""
    backend = KubernetesBackend(
        name, connect(access, namespace), connect(access, namespace), namespace
    )
    backend.start()
    return backend


class Backends:
    """The backends of the current configuration, built on demand."""

    def __init__(
        self,
        configs: Callable[[], Configs],
        objects: ClusterObjectStore,
        embedded_executor: Callable[[str], TaskExecutor],
        connector: Connector = connect_backend,
    ) -> None:
        self._state = configs
        self._objects = objects
        self._embedded_executor = embedded_executor
        self._connector = connector
        self._connected: dict[str, tuple[str, KubernetesBackend]] = {}
        self._lock = threading.Lock()

    def get(
        self, name: str, configs: Configs | None = None, writes: ClusterWrites | None = None
    ) -> ClusterBackend:
        """The backend named ``name``; :class:`BackendError` if its cluster cannot be used.
        ``writes``: a tick's, where a backend that ``writes_in_transaction`` records its writes
        (``write_in_transaction`` writes them); without, every write is made at once."""
        configs = self._state() if configs is None else configs
        config = configs.backend(name)
        access = config.kubernetes
        if access is None:
            executor = self._embedded_executor(name)
            return EmbeddedBackend(name, self._objects, executor, writes)
        backend = self._kubernetes(name, access, backend_namespace(configs, name))
        backend.node_rules = dict(config.node_conditions.rules or {})  # as the config says now
        return backend

    def kubernetes(self, configs: Configs) -> list[ClusterBackend]:
        """Every backend of ``state`` that is a Kubernetes cluster, connected."""
        found: list[ClusterBackend] = []
        for name in sorted(kubernetes_backends(configs)):
            try:
                backend = self.get(name, configs)
            except BackendError as err:
                log.warning("backend unavailable", backend=name, error=err.message)
                continue
            found.append(backend)
        return found

    def placed_pods(self) -> list[BoundPodOnNode]:
        """Every pod bound on the clusters corral's scheduling pass places (the embedded
        ones), for the scheduler's cache."""
        return [
            BoundPodOnNode(
                pod.name, pod.node, pod.group_uuid, pod.labels, pod.body.get("spec") or {}
            )
            for pod in self._objects.bound_pods()
            if pod.node is not None
        ]

    def write_in_transaction(self, writes: ClusterWrites) -> Callable[[Connection], None]:
        """The write of ``writes`` (recorded by backends that ``writes_in_transaction``) inside
        the caller's transaction."""
        return partial(self._objects.write, writes=writes)

    def _kubernetes(self, name: str, access: KubernetesAccess, namespace: str) -> KubernetesBackend:
        key = json.dumps([access.model_dump(), namespace], sort_keys=True)
        with self._lock:
            known = self._connected.get(name)
            if known is not None and known[0] == key:
                return known[1]
            if known is not None:
                known[1].close()
                del self._connected[name]
            try:
                backend = self._connector(name, access, namespace)
            except UserError as err:
                raise BackendError(f"backend {name}: {err}", transient=False) from None
            self._connected[name] = (key, backend)
            return backend

    def close(self) -> None:
        with self._lock:
            for _, backend in self._connected.values():
                backend.close()
            self._connected.clear()
