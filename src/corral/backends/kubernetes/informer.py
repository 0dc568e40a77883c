"""A local copy of one kind's objects, kept current with list + watch (the client-go informer
pattern): the controller reads nodes, pods and PodGroups from memory on every tick instead of
asking the API server.

A watch that fails (history expired, connection lost) is followed by a fresh list, so the copy
converges to the server's state; until the first list succeeded the copy is not ``synced`` and
readers must not conclude that an object is absent.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import structlog

from corral.backends.kubernetes.api import Kind, KubeApi, KubeError

log = structlog.get_logger("corral.kubernetes")

_RETRY_SECONDS = (0.2, 1.0, 5.0)


class Informer:
    def __init__(
        self,
        api: KubeApi,
        kind: Kind,
        namespace: str | None,
        labels: Mapping[str, str] | None = None,
        *,
        watch_timeout_s: int = 60,
    ) -> None:
        self._api = api
        self.kind = kind
        self._namespace = namespace
        self._labels = dict(labels or {})
        self._watch_timeout_s = watch_timeout_s
        self._objects: dict[tuple[str, str], dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._synced = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: Grows with every change seen (a list or an event): what was read from the items
        #: may be kept until it grows.
        self.changes = 0

    # -- reading ------------------------------------------------------------------------------

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    def wait_synced(self, timeout_s: float) -> bool:
        return self._synced.wait(timeout_s)

    def items(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._objects.values())

    def get(self, namespace: str | None, name: str) -> dict[str, Any] | None:
        with self._lock:
            return self._objects.get((namespace or "", name))

    # -- running ------------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is None:
            name = f"informer-{self.kind.kind.lower()}"
            self._thread = threading.Thread(target=self._run, name=name, daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Ask the thread to end; the owner closes the API client to end a blocked watch."""
        self._stop.set()

    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                version = self._relist()
                failures = 0
                self._follow(version)
            except KubeError as err:
                if self._stop.is_set():
                    return
                delay = _RETRY_SECONDS[min(failures, len(_RETRY_SECONDS) - 1)]
                failures += 1
                log.info(
                    "watch interrupted; listing again",
                    kind=self.kind.kind,
                    status=err.status,
                    reason=err.reason,
                    retry_in_s=delay,
                )
                self._stop.wait(delay)
            except Exception:
                if self._stop.is_set():  # the client was closed under a blocked read
                    return
                log.exception("informer failed; listing again", kind=self.kind.kind)
                self._stop.wait(_RETRY_SECONDS[-1])

    def _relist(self) -> str:
        items, version = self._api.list(self.kind, self._namespace, self._labels)
        with self._lock:
            self._objects = {_key(item): item for item in items}
            self.changes += 1
        self._synced.set()
        return version

    def _follow(self, version: str) -> None:
        events = self._api.watch(
            self.kind, self._namespace, version, self._labels, self._watch_timeout_s
        )
        for event in events:
            if self._stop.is_set():
                return
            with self._lock:
                self.changes += 1
                if event.type == "DELETED":
                    self._objects.pop(_key(event.object), None)
                elif event.type in ("ADDED", "MODIFIED"):
                    self._objects[_key(event.object)] = event.object


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    metadata = obj.get("metadata") or {}
    return (str(metadata.get("namespace") or ""), str(metadata.get("name")))
