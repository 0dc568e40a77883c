"""The small port corral uses to talk to a Kubernetes API server, and its lightkube adapter.

Everything is plain dictionaries (manifests as stored), so the rest of the backend never sees a
client library type. Writes are server-side apply with the field manager ``corral``: applying
the same manifest twice changes nothing, which makes a re-run after a crash safe.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import httpx2
from lightkube import ApiError, Client, KubeConfig
from lightkube.core.exceptions import ConfigError
from lightkube.core.generic_client import ALL_NS
from lightkube.generic_resource import (
    GenericGlobalResource,
    GenericNamespacedResource,
    create_api_info,
)
from lightkube.models.authorization_v1 import ResourceAttributes, SelfSubjectAccessReviewSpec
from lightkube.resources.authorization_v1 import SelfSubjectAccessReview
from lightkube.types import PatchType

from corral.backends.port import BackendError
from corral.domain.configs.backend_models import KubernetesAccess
from corral.domain.formats.durations import parse_duration
from corral.domain.topology.podgroup import POD_GROUP
from corral.errors import UserError

FIELD_MANAGER = "corral"

#: Kinds every backend uses, so they need no discovery request.
_KNOWN_PLURALS: dict[tuple[str, str], tuple[str, bool]] = {
    ("v1", "Pod"): ("pods", True),
    ("v1", "Service"): ("services", True),
    ("v1", "Secret"): ("secrets", True),
    ("v1", "ConfigMap"): ("configmaps", True),
    ("v1", "Node"): ("nodes", False),
    ("v1", "Namespace"): ("namespaces", False),
    POD_GROUP: ("podgroups", True),
    ("scheduling.run.ai/v2", "Queue"): ("queues", False),
    ("kai.scheduler/v1alpha1", "Topology"): ("topologies", False),
    ("resource.nvidia.com/v1beta1", "ComputeDomain"): ("computedomains", True),
}


@dataclass(frozen=True)
class Kind:
    """A resource kind as the API server serves it."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]


class KubeError(BackendError):
    """A request the API server refused or that did not reach it (``status`` 0).

    Transient: server errors, throttling, timeouts, no connection; anything else (invalid
    object, forbidden, unknown kind) fails the same way again."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message, transient=status == 0 or status == 429 or status >= 500)
        self.status = status
        self.reason = reason

    @property
    def not_found(self) -> bool:
        return self.status == 404


@dataclass(frozen=True)
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED
    object: dict[str, Any]


class KubeApi(Protocol):
    """What the backend needs from an API server."""

    namespace: str

    def kind(self, api_version: str, kind: str) -> Kind: ...

    def apply(self, manifest: Mapping[str, Any], namespace: str | None) -> dict[str, Any]: ...

    def get(self, kind: Kind, namespace: str | None, name: str) -> dict[str, Any] | None: ...

    def list(
        self, kind: Kind, namespace: str | None, labels: Mapping[str, str] | None = None
    ) -> tuple[list[dict[str, Any]], str]: ...

    def delete(self, kind: Kind, namespace: str | None, name: str) -> None: ...

    def remove_finalizer(
        self, kind: Kind, namespace: str | None, name: str, finalizer: str
    ) -> None: ...

    def merge_patch(
        self, kind: Kind, namespace: str | None, name: str, patch: Mapping[str, Any]
    ) -> dict[str, Any]: ...

    def watch(
        self,
        kind: Kind,
        namespace: str | None,
        resource_version: str,
        labels: Mapping[str, str] | None = None,
        timeout_s: int = 60,
    ) -> Iterator[WatchEvent]: ...

    def allowed(self, verb: str, group: str, resource: str, namespace: str | None) -> bool: ...

    def pod_log(self, namespace: str, name: str) -> str: ...

    def close(self) -> None: ...


def connect(access: KubernetesAccess, namespace: str) -> LightkubeApi:
    """A client for the cluster ``access`` names, defaulting to ``namespace``."""
    try:
        if access.in_cluster:
            config = KubeConfig.from_service_account()
        else:
            config = KubeConfig.from_file(access.kubeconfig)
        single = config.get(context_name=access.context or None)
    except (ConfigError, OSError, KeyError, ValueError) as err:
        source = "the service account" if access.in_cluster else access.kubeconfig
        raise UserError(f"cannot load the Kubernetes configuration from {source}: {err}") from None
    timeout = httpx2.Timeout(parse_duration(access.api_timeout).total_seconds())
    client = Client(single, namespace=namespace, timeout=timeout, field_manager=FIELD_MANAGER)
    return LightkubeApi(client, namespace)


class LightkubeApi:
    """:class:`KubeApi` over lightkube, with generic (dictionary) resources for every kind."""

    def __init__(self, client: Client, namespace: str) -> None:
        self._client = client
        self.namespace = namespace
        self._kinds: dict[tuple[str, str], Kind] = {}
        self._classes: dict[Kind, type[Any]] = {}

    # -- kinds --------------------------------------------------------------------------------

    def kind(self, api_version: str, kind: str) -> Kind:
        """``kind`` of ``api_version`` with its plural and scope, from API discovery."""
        key = (api_version, kind)
        found = self._kinds.get(key)
        if found is None:
            known = _KNOWN_PLURALS.get(key)
            if known is not None:
                found = Kind(api_version, kind, *known)
            else:
                found = self._discover(api_version, kind)
            self._kinds[key] = found
        return found

    def _discover(self, api_version: str, kind: str) -> Kind:
        path = f"api/{api_version}" if "/" not in api_version else f"apis/{api_version}"
        document = self._raw_get(path)
        for resource in document.get("resources") or []:
            if resource.get("kind") == kind and "/" not in str(resource.get("name")):
                return Kind(api_version, kind, resource["name"], bool(resource["namespaced"]))
        raise KubeError(
            404,
            "NotFound",
            f"the cluster does not serve {kind} in {api_version}; install its CRD first",
        )

    def _raw_get(self, path: str) -> dict[str, Any]:
        # lightkube has no call for discovery documents; its HTTP client is configured with
        # the cluster's address and credentials, so ask it directly.
        http: httpx2.Client = self._client._client._client
        try:
            response = http.get(path)
        except httpx2.HTTPError as err:
            raise KubeError(0, "Unreachable", f"GET /{path}: {err}") from None
        if response.status_code == 404:
            raise KubeError(404, "NotFound", f"the cluster does not serve /{path}")
        if response.status_code >= 400:
            raise KubeError(response.status_code, "Error", f"GET /{path}: {response.text[:200]}")
        result: dict[str, Any] = response.json()
        return result

    def _resource(self, kind: Kind) -> type[Any]:
        found = self._classes.get(kind)
        if found is None:
            base = GenericNamespacedResource if kind.namespaced else GenericGlobalResource
            info = create_api_info(kind.group, kind.version, kind.kind, kind.plural)
            # Not registered in lightkube's global registry: core kinds have model classes
            # there already, and a dictionary-shaped class per client is all corral needs.
            found = type(kind.kind, (base,), {"_api_info": info})
            self._classes[kind] = found
        return found

    # -- requests -----------------------------------------------------------------------------

    def apply(self, manifest: Mapping[str, Any], namespace: str | None) -> dict[str, Any]:
        kind = self.kind(manifest["apiVersion"], manifest["kind"])
        resource = self._resource(kind)
        body = dict(manifest)
        metadata = dict(body.get("metadata") or {})
        if kind.namespaced:  # as OSMO's worker does: every group object in the backend's namespace
            metadata["namespace"] = namespace or self.namespace
        else:
            metadata.pop("namespace", None)
        body["metadata"] = metadata
        with _translated():
            result = self._client.apply(
                resource.from_dict(body),
                field_manager=FIELD_MANAGER,
                force=True,
            )
        return _plain(result)

    def get(self, kind: Kind, namespace: str | None, name: str) -> dict[str, Any] | None:
        try:
            with _translated():
                found = self._client.get(self._resource(kind), name, **_ns(kind, namespace))
        except KubeError as err:
            if err.not_found:
                return None
            raise
        return _plain(found)

    def list(
        self, kind: Kind, namespace: str | None, labels: Mapping[str, str] | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        with _translated():
            found = self._client.list(
                self._resource(kind), labels=dict(labels or {}) or None, **_list_ns(kind, namespace)
            )
            items = [_plain(item) for item in found]
            version = found.resourceVersion
        return items, version

    def delete(self, kind: Kind, namespace: str | None, name: str) -> None:
        try:
            with _translated():
                self._client.delete(self._resource(kind), name, **_ns(kind, namespace))
        except KubeError as err:
            if not err.not_found:
                raise

    def remove_finalizer(
        self, kind: Kind, namespace: str | None, name: str, finalizer: str
    ) -> None:
        found = self.get(kind, namespace, name)
        finalizers = ((found or {}).get("metadata") or {}).get("finalizers") or []
        if finalizer not in finalizers:
            return
        patch = [
            # The test makes the removal fail instead of dropping someone else's finalizer when
            # the list changed since it was read.
            {"op": "test", "path": "/metadata/finalizers", "value": finalizers},
            {
                "op": "replace",
                "path": "/metadata/finalizers",
                "value": [f for f in finalizers if f != finalizer],
            },
        ]
        try:
            with _translated():
                self._client.patch(
                    self._resource(kind),
                    name,
                    patch,
                    patch_type=PatchType.JSON,
                    **_ns(kind, namespace),
                )
        except KubeError as err:
            if not err.not_found:
                raise

    def merge_patch(
        self, kind: Kind, namespace: str | None, name: str, patch: Mapping[str, Any]
    ) -> dict[str, Any]:
        """A JSON merge patch (a null value removes the key)."""
        with _translated():
            result = self._client.patch(
                self._resource(kind),
                name,
                dict(patch),
                patch_type=PatchType.MERGE,
                **_ns(kind, namespace),
            )
        return _plain(result)

    def watch(
        self,
        kind: Kind,
        namespace: str | None,
        resource_version: str,
        labels: Mapping[str, str] | None = None,
        timeout_s: int = 60,
    ) -> Iterator[WatchEvent]:
        """Events after ``resource_version``, reconnecting whenever the server ends a stream
        (every ``timeout_s``); a 410 (history expired) raises :class:`KubeError`: list again.
        :meth:`close` from another thread ends a blocked watch."""
        with _translated():
            events = self._client.watch(
                self._resource(kind),
                labels=dict(labels or {}) or None,
                resource_version=resource_version,
                server_timeout=timeout_s,
                **_list_ns(kind, namespace),
            )
            for event_type, obj in events:
                yield WatchEvent(str(event_type), _plain(obj))

    def allowed(self, verb: str, group: str, resource: str, namespace: str | None) -> bool:
        """Whether this client may ``verb`` ``resource`` (SelfSubjectAccessReview)."""
        review = SelfSubjectAccessReview(
            spec=SelfSubjectAccessReviewSpec(
                resourceAttributes=ResourceAttributes(
                    verb=verb, group=group, resource=resource, namespace=namespace
                )
            )
        )
        with _translated():
            answer = self._client.create(review)
        return bool(answer.status and answer.status.allowed)

    def pod_log(self, namespace: str, name: str) -> str:
        try:
            with _translated():
                return "".join(
                    line if line.endswith("\n") else line + "\n"
                    for line in self._client.log(name, namespace=namespace)
                )
        except KubeError as err:
            if err.not_found or err.status == 400:
                return ""
            raise

    def close(self) -> None:
        self._client.close()


# -- helpers ----------------------------------------------------------------------------------


def _ns(kind: Kind, namespace: str | None) -> dict[str, Any]:
    return {"namespace": namespace} if kind.namespaced else {}


def _list_ns(kind: Kind, namespace: str | None) -> dict[str, Any]:
    if not kind.namespaced:
        return {}
    return {"namespace": ALL_NS if namespace is None else namespace}


def _plain(obj: Any) -> dict[str, Any]:
    result: dict[str, Any] = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
    return result


class _translated:
    """Turns lightkube's and httpx's errors into :class:`KubeError`."""

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, _tb: Any
    ) -> None:
        if err is None or isinstance(err, KubeError):
            return
        if isinstance(err, ApiError):
            status = err.status
            raise KubeError(
                int(status.code or 500), str(status.reason or "Error"), str(status.message or err)
            ) from None
        if isinstance(err, httpx2.HTTPError):
            raise KubeError(0, "Unreachable", f"{type(err).__name__}: {err}") from None
