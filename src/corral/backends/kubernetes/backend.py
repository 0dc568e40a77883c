"""The ``kubernetes`` backend: a group's stored manifests applied to a real cluster, the KAI
scheduler placing them, and the pods' states read back into task statuses (docs/kubernetes.md).

It offers the lifecycle controller the same operations as the embedded cluster — apply an
object, delete a group's objects by kind and label, run tasks — plus what only a real cluster
has: its scheduler's decisions, its permissions, its nodes and its queues.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import structlog

from corral.backends.execution import Exit, TaskRun, log_tail
from corral.backends.kubernetes.api import Kind, KubeApi, KubeError
from corral.backends.kubernetes.informer import Informer
from corral.backends.kubernetes.node_health import (
    COMPUTE_DOMAIN,
    COMPUTE_DOMAIN_GRACE,
    cordon_patch,
    imex_failures,
    node_health,
)
from corral.backends.kubernetes.pod_status import deleted_exit, node_of, pending_reason, pod_exit
from corral.backends.kubernetes.rbac import (
    COMPUTE_DOMAIN_READ_RULE,
    GROUP_TEMPLATE_VERBS,
    NODE_PATCH_RULE,
    group_template_rule,
)
from corral.backends.kubernetes.task_tokens import secret_name, token_secret, with_token
from corral.backends.port import (
    BackendError,
    BoundPod,
    GroupObjects,
    LiveCluster,
    Rule,
    deletion_order,
    extra_rbac_rules_yaml,
)
from corral.domain.labels import GROUP_UUID as GROUP_LABEL
from corral.domain.labels import NAMESPACE as NAMESPACE_LABEL
from corral.domain.labels import STOP_NOTICE
from corral.domain.labels import TASK_UUID as TASK_UUID_LABEL
from corral.domain.labels import WORKFLOW_UUID as WORKFLOW_LABEL
from corral.domain.platform.node_health import HEALTHY, Cordon, NodeHealth
from corral.domain.platform.nodes import Node, Taint
from corral.domain.topology.kai_objects import PRIORITY_CLASS_KIND, QUEUE_KIND, TOPOLOGY_KIND
from corral.domain.topology.podgroup import POD_GROUP
from corral.domain.workflows.notices import Acknowledgement, Notice

log = structlog.get_logger("corral.kubernetes")

#: Keeps a finished pod (and its exit code) until corral has read it and cleans up.
CLEANUP_FINALIZER = "corral.dev/cleanup"
POD = ("v1", "Pod")
NODE = ("v1", "Node")
_PERMISSION_TTL_S = 60.0
_RESYNC_S = 300.0
_ALLOCATABLE = ("cpu", "memory", "ephemeral-storage", "nvidia.com/gpu")
_IMMUTABLE_KINDS = ("Topology",)


#: Why corral does not bind or unbind a Kubernetes backend's pods.
_OWN_SCHEDULER = "backend {}: the cluster's own scheduler (KAI) {} its pods, not corral"


class KubernetesBackend:
    schedules_itself = True
    takes_task_tokens = True
    writes_in_transaction = False  # every write is a request to the API server, made at once

    def __init__(self, name: str, api: KubeApi, watch_api: KubeApi, namespace: str) -> None:
        self.name = name
        self.api = api
        self._watch_api = watch_api
        self.namespace = namespace
        self.pods = Informer(watch_api, api.kind(*POD), None)
        self.nodes_informer = Informer(watch_api, api.kind(*NODE), None)
        self.pod_groups = Informer(watch_api, api.kind(*POD_GROUP), namespace)
        #: The cluster's ComputeDomains, when the NVIDIA DRA driver's CRD is installed.
        self.compute_domains: Informer | None = None
        #: How long a ComputeDomain may stay NotReady before its NotReady nodes' fabric counts
        #: as failed.
        self.compute_domain_grace = COMPUTE_DOMAIN_GRACE
        self._nodes: tuple[tuple[Any, ...], tuple[Node, ...]] | None = None
        #: The backend's ``node_conditions.rules``: condition type -> healthy statuses.
        self.node_rules: Mapping[str, str] = {}
        self._permissions: dict[tuple[str, str, str, str], tuple[bool, float]] = {}
        self._priority_classes: dict[str, tuple[bool, float]] = {}
        self._synced_scheduler_objects: tuple[str, float] | None = None

    def start(self) -> None:
        self.compute_domains = self._compute_domain_informer()
        for informer in self._informers():
            informer.start()

    def _compute_domain_informer(self) -> Informer | None:
        """A watch of the ComputeDomains, when their CRD is installed and corral may read
        them (otherwise a warning names the rule: IMEX status is then not a health source)."""
        try:
            kind = self.api.kind(*COMPUTE_DOMAIN)
            allowed = all(self._allowed(verb, kind, None) for verb in ("list", "watch"))
        except KubeError:
            log.info("no ComputeDomain CRD: no IMEX status to read", backend=self.name)
            return None
        if not allowed:
            log.warning(
                "corral may not list and watch computedomains: IMEX status is not read",
                backend=self.name,
                add_rule=extra_rbac_rules_yaml([COMPUTE_DOMAIN_READ_RULE]),
            )
            return None
        return Informer(self._watch_api, kind, None)

    def close(self) -> None:
        """Stop the watches (each thread ends at its next event or reconnect; they are daemon
        threads, so nothing waits for them) and close both clients."""
        for informer in self._informers():
            informer.stop()
        self._watch_api.close()
        self.api.close()

    def wait_synced(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        return all(
            informer.wait_synced(max(deadline - time.monotonic(), 0.0))
            for informer in self._informers()
        )

    def _informers(self) -> tuple[Informer, ...]:
        domains = (self.compute_domains,) if self.compute_domains is not None else ()
        return (self.pods, self.nodes_informer, self.pod_groups, *domains)

    # -- a group's objects --------------------------------------------------------------------

    def apply(self, manifest: Mapping[str, Any], namespace: str) -> None:
        """Create (or leave as it is) one object; returns once the API server accepted it."""
        if (manifest["apiVersion"], manifest["kind"]) == POD:
            manifest = _with_finalizer(manifest, CLEANUP_FINALIZER)
        self.api.apply(manifest, namespace)

    def apply_all(
        self,
        manifests: Sequence[Mapping[str, Any]],
        namespace: str,
        task_tokens: Mapping[str, str] | None = None,
    ) -> None:
        """Apply each object in order; with ``task_tokens`` (task uuid -> token), first the
        group's token Secret, and each pod with its token mounted (``task_tokens.py``)."""
        tokens = task_tokens or {}
        pods = [m for m in manifests if (m["apiVersion"], m["kind"]) == POD]
        if tokens and pods:
            labels = pods[0]["metadata"]["labels"]
            group_uuid = labels[GROUP_LABEL]
            secret = token_secret(group_uuid, labels[WORKFLOW_LABEL], namespace, tokens)
            self.apply(secret, namespace)
        for manifest in manifests:
            given = (manifest["apiVersion"], manifest["kind"]) == POD and _task_uuid(
                manifest
            ) in tokens
            self.apply(with_token(manifest) if given else manifest, namespace)

    def bind(self, namespace: str, nodes: Mapping[str, str]) -> None:
        del namespace, nodes
        raise BackendError(_OWN_SCHEDULER.format(self.name, "binds"), transient=False)

    def unbind(self, group_uuids: Sequence[str]) -> None:
        del group_uuids
        raise BackendError(_OWN_SCHEDULER.format(self.name, "evicts"), transient=False)

    def delete_groups(self, groups: Sequence[GroupObjects]) -> list[str]:
        """Each group's objects kind by kind (pods first), by the group's labels."""
        done = []
        for group in groups:
            labels = {WORKFLOW_LABEL: group.workflow_uuid, GROUP_LABEL: group.uuid}
            try:
                for api_version, kind in deletion_order(group.kinds):
                    self.delete_collection(api_version, kind, group.namespace, labels)
                secrets = self.api.kind("v1", "Secret")
                self.api.delete(secrets, group.namespace, secret_name(group.uuid))
            except BackendError as err:
                log.warning("cleanup failed; retrying", group_uuid=group.uuid, error=err.message)
                continue
            done.append(group.uuid)
        return done

    def delete_collection(
        self, api_version: str, kind: str, namespace: str, labels: Mapping[str, str]
    ) -> int:
        """Delete every object of one kind with ``labels``, removing corral's finalizer first;
        how many there were. Objects already gone are not an error."""
        found = self.api.kind(api_version, kind)
        scope = namespace if found.namespaced else None
        items, _ = self.api.list(found, scope, labels)
        for item in items:
            name = item["metadata"]["name"]
            if CLEANUP_FINALIZER in (item["metadata"].get("finalizers") or []):
                self.api.remove_finalizer(found, scope, name, CLEANUP_FINALIZER)
            self.api.delete(found, scope, name)
        return len(items)

    # -- permissions --------------------------------------------------------------------------

    def missing_rules(self, kinds: Sequence[Sequence[str]], namespace: str) -> list[Rule]:
        """The RBAC rules corral lacks to create, list, patch and delete ``kinds`` in
        ``namespace`` (SelfSubjectAccessReview; answers are kept for a minute)."""
        missing = []
        for api_version, kind_name in kinds:
            kind = self.api.kind(api_version, kind_name)
            scope = namespace if kind.namespaced else None
            if not all(self._allowed(verb, kind, scope) for verb in GROUP_TEMPLATE_VERBS):
                missing.append(group_template_rule(kind.group, kind.plural))
        return missing

    def missing_priority_classes(self, names: Sequence[str]) -> list[str]:
        """The PriorityClasses of ``names`` the cluster lacks (answers kept for a minute)."""
        kind = self.api.kind(*PRIORITY_CLASS_KIND)
        now = time.monotonic()
        missing = []
        for name in names:
            cached = self._priority_classes.get(name)
            if cached is None or now - cached[1] >= _PERMISSION_TTL_S:
                cached = (self.api.get(kind, None, name) is not None, now)
                self._priority_classes[name] = cached
            if not cached[0]:
                missing.append(name)
        return missing

    def _allowed(self, verb: str, kind: Kind, namespace: str | None) -> bool:
        key = (verb, kind.group, kind.plural, namespace or "")
        now = time.monotonic()
        cached = self._permissions.get(key)
        if cached is not None and now - cached[1] < _PERMISSION_TTL_S:
            return cached[0]
        allowed = self.api.allowed(verb, kind.group, kind.plural, namespace)
        self._permissions[key] = (allowed, now)
        return allowed

    # -- what the cluster's scheduler did -----------------------------------------------------

    def placement(
        self, namespace: str, pod_names: Sequence[str], pod_group: str | None
    ) -> dict[str, str] | str | None:
        """Pod -> node once every pod of the group is bound; otherwise the scheduler's reason
        for waiting, or None when it has said nothing yet."""
        pods = [self.pods.get(namespace, name) for name in pod_names]
        nodes = {name: node_of(pod) for name, pod in zip(pod_names, pods, strict=True) if pod}
        if len(nodes) == len(pod_names) and all(nodes.values()):
            return {name: str(node) for name, node in nodes.items()}
        group = self.pod_groups.get(namespace, pod_group) if pod_group else None
        return pending_reason(group, [pod for pod in pods if pod is not None])

    # -- tasks --------------------------------------------------------------------------------

    def executor(self) -> KubernetesExecution:
        return KubernetesExecution(self)

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The pod from the watch, or from the API server when the watch has not shown it."""
        found = self.pods.get(namespace, name)
        if found is None:
            found = self.api.get(self.api.kind(*POD), namespace, name)
        return found

    # -- capacity -----------------------------------------------------------------------------

    def nodes(self) -> list[Node]:
        """The Nodes with their health, read again only when a watch saw a change, the
        rules changed, or a minute passed (a ComputeDomain's grace may have run out)."""
        domains = self.compute_domains
        key = (
            self.nodes_informer.changes,
            domains.changes if domains is not None else 0,
            tuple(sorted(self.node_rules.items())),
            self.compute_domain_grace,
            int(time.monotonic() // 60),
        )
        kept = self._nodes
        if kept is not None and kept[0] == key:
            return list(kept[1])
        items = domains.items() if domains is not None else []
        failures = imex_failures(items, datetime.now(UTC), self.compute_domain_grace)
        found = sorted(
            (
                node_from_object(item, node_health(item, self.node_rules, failures))
                for item in self.nodes_informer.items()
            ),
            key=_name,
        )
        self._nodes = (key, tuple(found))
        return found

    def set_cordon(self, node: str, cordon: Cordon | None) -> None:
        """Cordon (or drain) the Node, or uncordon it; a BackendError naming the rule to add
        when corral may not patch Nodes."""
        kind = self.api.kind(*NODE)
        if not self._allowed("patch", kind, None):
            raise BackendError(
                f"corral's service account on backend {self.name} may not patch nodes, which "
                "cordon, drain and uncordon need. Add this rule to its ClusterRole "
                f"(docs/deploy.md#permissions):\n{extra_rbac_rules_yaml([NODE_PATCH_RULE])}",
                transient=False,
            )
        try:
            self.api.merge_patch(kind, None, node, cordon_patch(cordon))
        except KubeError as err:
            raise BackendError(
                f"backend {self.name} refused to change node {node}: {err}",
                transient=err.status >= 500,
            ) from None

    def bound_pods(self) -> list[BoundPod]:
        bound = []
        for pod in self.pods.items():
            node = node_of(pod)
            phase = (pod.get("status") or {}).get("phase")
            if node is None or phase in ("Succeeded", "Failed"):
                continue
            metadata = pod["metadata"]
            bound.append(
                BoundPod(
                    metadata["name"],
                    metadata.get("namespace", ""),
                    node,
                    dict(metadata.get("labels") or {}),
                    pod,
                )
            )
        return bound

    def live_cluster(self, wait_seconds: float) -> LiveCluster:
        """Nodes and bound pods from the watches, after waiting up to ``wait_seconds`` for
        their first lists (what is known so far, with a warning, when they are late)."""
        if not all(
            informer.synced or informer.wait_synced(wait_seconds)
            for informer in (self.nodes_informer, self.pods)
        ):
            log.warning(
                "backend's nodes or pods not listed yet; counting what is known", backend=self.name
            )
        nodes = tuple(self.nodes())
        known = {node.name for node in nodes}
        running = tuple(pod for pod in self.bound_pods() if pod.node in known)
        return LiveCluster(nodes, running, self.namespace)

    # -- KAI queues and topologies ------------------------------------------------------------

    def sync_scheduler_objects(self, desired: Sequence[Mapping[str, Any]]) -> bool:
        """Make the cluster's Queues and Topologies labelled with this backend's namespace
        equal ``desired`` (docs/osmo-reference.md#kai-objects-per-pool); True if it talked to
        the cluster.

        Skipped while ``desired`` is what was synced less than five minutes ago."""
        fingerprint = hashlib.sha256(json.dumps(desired, sort_keys=True).encode()).hexdigest()
        last = self._synced_scheduler_objects
        if last is not None and last[0] == fingerprint and time.monotonic() - last[1] < _RESYNC_S:
            return False
        for api_version, kind in (QUEUE_KIND, TOPOLOGY_KIND):
            targets = [m for m in desired if m["kind"] == kind]
            self._sync_kind(api_version, kind, targets)
        self._synced_scheduler_objects = (fingerprint, time.monotonic())
        return True

    def _sync_kind(
        self, api_version: str, kind_name: str, targets: Sequence[Mapping[str, Any]]
    ) -> None:
        try:
            kind = self.api.kind(api_version, kind_name)
            existing, _ = self.api.list(kind, None, {NAMESPACE_LABEL: self.namespace})
        except KubeError as err:
            if not err.not_found:
                raise
            log.warning("scheduler kind not installed; not synced", kind=kind_name)
            return
        current = {item["metadata"]["name"]: item for item in existing}
        for target in targets:
            name = target["metadata"]["name"]
            found = current.get(name)
            if found is not None and kind_name in _IMMUTABLE_KINDS:
                if _same_immutable(found, target):
                    continue
                log.info("recreating changed immutable object", kind=kind_name, name=name)
                self.api.delete(kind, None, name)
            self.api.apply(target, None)
        wanted = {target["metadata"]["name"] for target in targets}
        for name in sorted(set(current) - wanted):
            log.info("deleting orphaned scheduler object", kind=kind_name, name=name)
            self.api.delete(kind, None, name)


class KubernetesExecution:
    """Tasks are the pods themselves: KAI binds them and the kubelet runs them, so starting is
    nothing; ending is reading the pod's container state; stopping is deleting the pod."""

    #: A pod's log goes with the pod: the lifecycle keeps it before the pod is deleted.
    keeps_logs = False

    def __init__(self, backend: KubernetesBackend) -> None:
        self.backend = backend

    def start(self, run: TaskRun) -> None:
        del run

    def next_check(self, run: TaskRun) -> datetime | None:
        del run  # only polling tells
        return None

    def poll(self, run: TaskRun, now: datetime) -> Exit | None:
        del now
        namespace, name = _pod_key(run)
        pod = self.backend.pod(namespace, name)
        if pod is None:
            return deleted_exit()
        return pod_exit(pod)

    def stop(self, run: TaskRun, grace_seconds: float | None = None) -> None:
        del grace_seconds  # the pod's own terminationGracePeriodSeconds applies
        namespace, name = _pod_key(run)
        kind = self.backend.api.kind(*POD)
        self.backend.api.remove_finalizer(kind, namespace, name, CLEANUP_FINALIZER)
        self.backend.api.delete(kind, namespace, name)

    def logs(self, run: TaskRun) -> str:
        namespace, name = _pod_key(run)
        return log_tail(self.backend.api.pod_log(namespace, name).encode())

    def notify(self, run: TaskRun, notice: Notice) -> None:
        """Annotate the pod with the notice (before it is deleted at the stop)."""
        namespace, name = _pod_key(run)
        kind = self.backend.api.kind(*POD)
        patch = {"metadata": {"annotations": {STOP_NOTICE: notice.to_json()}}}
        try:
            self.backend.api.merge_patch(kind, namespace, name, patch)
        except KubeError as err:
            if not err.not_found:  # a pod already gone needs no notice
                raise

    def acknowledgement(self, run: TaskRun) -> Acknowledgement | None:
        del run  # a pod answers through the API (docs/checkpoints.md)
        return None


def _pod_key(run: TaskRun) -> tuple[str, str]:
    metadata = run.pod["metadata"]
    return str(metadata.get("namespace") or ""), str(metadata["name"])


def _task_uuid(pod: Mapping[str, Any]) -> str | None:
    return (pod["metadata"].get("labels") or {}).get(TASK_UUID_LABEL)


def _with_finalizer(manifest: Mapping[str, Any], finalizer: str) -> dict[str, Any]:
    metadata = dict(manifest.get("metadata") or {})
    finalizers = list(metadata.get("finalizers") or [])
    if finalizer not in finalizers:
        finalizers.append(finalizer)
    metadata["finalizers"] = finalizers
    return {**manifest, "metadata": metadata}


def _same_immutable(found: Mapping[str, Any], target: Mapping[str, Any]) -> bool:
    """OSMO's equality for immutable kinds: apiVersion, kind and spec equal, and every target
    label present with the same value (server metadata and extra labels ignored)."""
    labels = (found.get("metadata") or {}).get("labels") or {}
    wanted = (target.get("metadata") or {}).get("labels") or {}
    return (
        found.get("apiVersion") == target.get("apiVersion")
        and found.get("kind") == target.get("kind")
        and found.get("spec") == target.get("spec")
        and all(labels.get(key) == value for key, value in wanted.items())
    )


def node_from_object(item: Mapping[str, Any], health: NodeHealth = HEALTHY) -> Node:
    """A Kubernetes Node object as corral's :class:`Node` (scheduling resources and
    ``health``)."""
    metadata = item.get("metadata") or {}
    spec = item.get("spec") or {}
    allocatable = (item.get("status") or {}).get("allocatable") or {}
    return Node(
        name=str(metadata["name"]),
        labels=dict(metadata.get("labels") or {}),
        taints=tuple(
            Taint(str(t["key"]), str(t["effect"]), str(t.get("value") or ""))
            for t in spec.get("taints") or []
        ),
        allocatable={key: str(allocatable[key]) for key in _ALLOCATABLE if key in allocatable},
        health=health,
    )


def _name(node: Node) -> str:
    return node.name
