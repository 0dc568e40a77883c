"""The fake API server, checked through two independent real clients: lightkube and kubectl."""

from __future__ import annotations

import json
import queue
import shutil
import subprocess
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

warnings.filterwarnings("ignore", message=".*httpx2.*")
import httpx2  # noqa: E402
from lightkube import ApiError, Client, KubeConfig  # noqa: E402
from lightkube.generic_resource import (  # noqa: E402
    create_global_resource,
    create_namespaced_resource,
)
from lightkube.models.authorization_v1 import (  # noqa: E402
    ResourceAttributes,
    SelfSubjectAccessReviewSpec,
)
from lightkube.models.core_v1 import Container, PodSpec  # noqa: E402
from lightkube.models.meta_v1 import ObjectMeta  # noqa: E402
from lightkube.operators import not_equal  # noqa: E402
from lightkube.resources.authorization_v1 import SelfSubjectAccessReview  # noqa: E402
from lightkube.resources.core_v1 import Pod  # noqa: E402
from lightkube.types import PatchType  # noqa: E402

from tests.backends.kubernetes.fake_apiserver import FakeKubeServer  # noqa: E402

ComputeDomain = create_namespaced_resource(
    "resource.nvidia.com", "v1beta1", "ComputeDomain", "computedomains"
)
PodGroup = create_namespaced_resource("scheduling.run.ai", "v2alpha2", "PodGroup", "podgroups")
Topology = create_global_resource("kai.scheduler", "v1alpha1", "Topology", "topologies")
Queue = create_global_resource("scheduling.run.ai", "v2", "Queue", "queues")


@pytest.fixture
def client(kubeconfig: Path) -> Iterator[Client]:
    client = Client(KubeConfig.from_file(kubeconfig), field_manager=None)
    yield client
    client.close()


def pod(name: str, labels: dict[str, str] | None = None, image: Any = "busybox:1.36") -> Pod:
    return Pod(
        metadata=ObjectMeta(name=name, labels=labels),
        spec=PodSpec(containers=[Container(name="main", image=image)]),
    )


def compute_domain(name: str, finalizers: list[str] | None = None) -> Any:
    return ComputeDomain(
        metadata=ObjectMeta(name=name, finalizers=finalizers),
        spec={"channel": {"resourceClaimTemplate": {"name": f"{name}-channel"}}},
    )


def pod_group(name: str, min_member: Any = 2, labels: dict[str, str] | None = None) -> Any:
    return PodGroup(
        metadata=ObjectMeta(name=name, labels=labels),
        spec={"minMember": min_member, "queue": "team-a"},
    )


def topology(name: str, *labels: str) -> Any:
    return Topology(
        metadata=ObjectMeta(name=name),
        spec={"levels": [{"nodeLabel": label} for label in labels]},
    )


def status_of(error: pytest.ExceptionInfo[ApiError]) -> tuple[int, str, str]:
    status = error.value.status
    return status.code, status.reason, status.message


# --- CRUD -------------------------------------------------------------------------------------


def test_pod_create_get_list_replace_delete(client: Client, fake_kube: FakeKubeServer) -> None:
    created = client.create(pod("a", {"app": "x", "tier": "1"}))
    client.create(pod("b", {"app": "y"}))
    client.create(pod("c"))

    assert created.metadata.namespace == "default"
    assert created.metadata.uid and created.metadata.creationTimestamp
    assert created.status.phase == "Pending"
    assert client.get(Pod, "a").metadata.uid == created.metadata.uid
    names = {
        "app=x": ["a"],
        "app==x": ["a"],
        "app!=x": ["b", "c"],
        "app in (x,y)": ["a", "b"],
        "app notin (x)": ["b", "c"],
        "app": ["a", "b"],
        "!app": ["c"],
        "app,tier=1": ["a"],
    }
    assert [p.metadata.name for p in client.list(Pod)] == ["a", "b", "c"]
    for selector, expected in names.items():
        response = httpx2.get(
            f"{fake_kube.url}/api/v1/namespaces/default/pods", params={"labelSelector": selector}
        )
        assert [i["metadata"]["name"] for i in response.json()["items"]] == expected, selector
    assert [p.metadata.name for p in client.list(Pod, labels={"app": "x"})] == ["a"]

    created.metadata.labels["app"] = "z"
    replaced = client.replace(created)
    assert replaced.metadata.labels["app"] == "z"
    assert int(replaced.metadata.resourceVersion) > int(created.metadata.resourceVersion)
    assert replaced.metadata.generation == 1  # labels are not spec

    client.delete(Pod, "a")
    with pytest.raises(ApiError) as missing:
        client.get(Pod, "a")
    assert status_of(missing) == (404, "NotFound", 'pods "a" not found')
    assert [p.metadata.name for p in client.list(Pod, namespace="*")] == ["b", "c"]


def test_list_by_field_selector_and_delete_collection(
    client: Client, fake_kube: FakeKubeServer
) -> None:
    for name, node in (("a", "n1"), ("b", "n2"), ("c", "n1")):
        p = pod(name, {"job": "j"} if name != "c" else {"job": "k"})
        p.spec.nodeName = node
        client.create(p)
    fake_kube.update_status("v1", "Pod", "default", "b", {"phase": "Running"})

    on_n1 = client.list(Pod, fields={"spec.nodeName": "n1"})
    assert [p.metadata.name for p in on_n1] == ["a", "c"]
    assert [p.metadata.name for p in client.list(Pod, fields={"status.phase": "Running"})] == ["b"]
    not_running = client.list(Pod, namespace="*", fields={"status.phase": not_equal("Running")})
    assert [p.metadata.name for p in not_running] == ["a", "c"]

    response = httpx2.delete(  # lightkube's deletecollection takes no selector
        f"{fake_kube.url}/api/v1/namespaces/default/pods", params={"labelSelector": "job=j"}
    )
    assert response.status_code == 200
    assert [i["metadata"]["name"] for i in response.json()["items"]] == ["a", "b"]
    assert [p.metadata.name for p in client.list(Pod)] == ["c"]


def test_namespaced_crds_crud(client: Client, fake_kube: FakeKubeServer) -> None:
    domain = client.create(compute_domain("cd"))
    assert domain.spec["numNodes"] == 0  # the CRD's schema default was applied
    assert domain.spec["channel"]["allocationMode"] == "Single"
    client.create(pod_group("pg-1", labels={"workflow": "w1"}))
    client.create(pod_group("pg-2", labels={"workflow": "w2"}))

    assert client.get(ComputeDomain, "cd").metadata.uid == domain.metadata.uid
    listed = client.list(PodGroup, labels={"workflow": "w2"})
    assert [g.metadata.name for g in listed] == ["pg-2"]

    group = client.get(PodGroup, "pg-1")
    group.spec["minMember"] = 4
    replaced = client.replace(group)
    assert replaced.spec["minMember"] == 4
    assert replaced.metadata.generation == 2

    client.delete(ComputeDomain, "cd")
    client.delete(PodGroup, "pg-1")
    assert [g.metadata.name for g in client.list(PodGroup)] == ["pg-2"]
    assert fake_kube.objects("resource.nvidia.com/v1beta1", "ComputeDomain") == []


def test_cluster_scoped_crds_crud(client: Client, fake_kube: FakeKubeServer) -> None:
    client.create(topology("racks", "example.com/rack", "kubernetes.io/hostname"))
    client.create(Queue(metadata=ObjectMeta(name="team-a"), spec={"priority": 10}))

    assert client.get(Topology, "racks").metadata.namespace is None
    assert [q.metadata.name for q in client.list(Queue)] == ["team-a"]
    queue_obj = client.get(Queue, "team-a")
    queue_obj.spec["priority"] = 20
    assert client.replace(queue_obj).spec["priority"] == 20
    assert fake_kube.get_object("scheduling.run.ai/v2", "Queue", None, "team-a")["spec"] == {
        "priority": 20
    }

    client.delete(Topology, "racks")
    client.delete(Queue, "team-a")
    assert list(client.list(Topology)) == []
    assert list(client.list(Queue)) == []


def test_missing_crd_answers_404(client: Client, fake_kube: FakeKubeServer) -> None:
    client.create(pod_group("pg"))
    fake_kube.remove_crd("scheduling.run.ai", "podgroups")

    with pytest.raises(ApiError) as error:
        list(client.list(PodGroup))
    assert error.value.status.code == 404
    assert fake_kube.objects(kind="PodGroup") == []
    assert httpx2.get(f"{fake_kube.url}/apis/scheduling.run.ai/v2alpha2").status_code == 404
    (group,) = [
        g
        for g in httpx2.get(f"{fake_kube.url}/apis").json()["groups"]
        if g["name"] == "scheduling.run.ai"
    ]
    assert [v["version"] for v in group["versions"]] == ["v2"]  # Queue's version is still there

    fake_kube.reset()
    assert [g.metadata.name for g in client.list(PodGroup)] == []  # back after reset


# --- refusals ---------------------------------------------------------------------------------


def test_schema_invalid_objects_are_refused(client: Client, fake_kube: FakeKubeServer) -> None:
    with pytest.raises(ApiError) as bad_group:
        client.create(pod_group("pg", min_member=-1))
    code, reason, message = status_of(bad_group)
    assert (code, reason) == (422, "Invalid")
    assert message.startswith('PodGroup.scheduling.run.ai "pg" is invalid: spec.minMember')
    assert [c.field for c in bad_group.value.status.details.causes] == ["spec.minMember"]

    with pytest.raises(ApiError) as bad_pod:
        client.create(pod("p", image=5))
    assert status_of(bad_pod)[:2] == (422, "Invalid")
    assert [c.field for c in bad_pod.value.status.details.causes] == ["spec.containers[0].image"]

    with pytest.raises(ApiError) as bad_name:
        client.create(pod("Not_A_Name"))
    assert [c.field for c in bad_name.value.status.details.causes] == ["metadata.name"]
    assert fake_kube.journal == []


def test_conflicts_and_missing_namespace(client: Client) -> None:
    first = client.create(pod("a"))
    with pytest.raises(ApiError) as exists:
        client.create(pod("a"))
    assert status_of(exists) == (409, "AlreadyExists", 'pods "a" already exists')

    client.patch(Pod, "a", {"metadata": {"labels": {"x": "1"}}})
    with pytest.raises(ApiError) as stale:
        client.replace(first)  # carries the resourceVersion it was created with
    code, reason, message = status_of(stale)
    assert (code, reason) == (409, "Conflict")
    assert "the object has been modified" in message

    with pytest.raises(ApiError) as no_namespace:
        client.create(pod("b"), namespace="nope")
    assert status_of(no_namespace) == (404, "NotFound", 'namespaces "nope" not found')


def test_topology_levels_are_immutable(client: Client) -> None:
    client.create(topology("t", "example.com/rack", "kubernetes.io/hostname"))
    current = client.get(Topology, "t")
    current.spec["levels"][0]["nodeLabel"] = "example.com/block"
    with pytest.raises(ApiError) as error:
        client.replace(current)
    assert status_of(error)[:2] == (422, "Invalid")
    causes = error.value.status.details.causes
    assert [(c.field, c.message) for c in causes] == [
        ("spec.levels", "nodeLabel structure is immutable; only aliases may be edited")
    ]

    aliased = client.get(Topology, "t")
    aliased.spec["levels"][0]["alias"] = "rack"
    assert client.replace(aliased).spec["levels"][0]["alias"] == "rack"


def test_compute_domain_spec_is_immutable(client: Client) -> None:
    client.create(compute_domain("cd"))
    with pytest.raises(ApiError) as error:
        client.patch(ComputeDomain, "cd", {"spec": {"numNodes": 2}}, patch_type=PatchType.MERGE)
    assert [c.message for c in error.value.status.details.causes] == [
        "A computeDomain.spec is immutable"
    ]


# --- patches and server-side apply --------------------------------------------------------------


def test_patch_flavours(client: Client, fake_kube: FakeKubeServer) -> None:
    client.create(pod("a", {"keep": "1", "drop": "1"}))
    client.patch(Pod, "a", {"metadata": {"labels": {"drop": None, "new": "1"}}})
    client.patch(
        Pod,
        "a",
        {"spec": {"containers": [{"name": "main", "image": "busybox:1.37"}]}},
    )  # strategic: containers merge by name
    patched = client.patch(
        Pod,
        "a",
        [{"op": "add", "path": "/metadata/annotations", "value": {"a": "b"}}],
        patch_type=PatchType.JSON,
    )
    assert patched.metadata.labels == {"keep": "1", "new": "1"}
    assert [(c.name, c.image) for c in patched.spec.containers] == [("main", "busybox:1.37")]
    assert patched.metadata.annotations == {"a": "b"}

    client.create(pod_group("pg"))
    with pytest.raises(ApiError) as strategic_on_crd:
        client.patch(PodGroup, "pg", {"spec": {"minMember": 3}})  # lightkube's default type
    assert strategic_on_crd.value.status.code == 415
    merged = client.patch(PodGroup, "pg", {"spec": {"minMember": 3}}, patch_type=PatchType.MERGE)
    assert merged.spec == {"minMember": 3, "queue": "team-a"}
    assert [e.verb for e in fake_kube.journal] == [
        "create",
        "patch",
        "patch",
        "patch",
        "create",
        "patch",
    ]


def test_server_side_apply(client: Client, fake_kube: FakeKubeServer) -> None:
    applied = {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "labels": {"a": "1", "b": "1"}},
        "spec": {"minMember": 2, "queue": "team-a"},
    }
    created = client.apply(PodGroup.from_dict(applied), field_manager="corral")
    assert created.metadata.labels == {"a": "1", "b": "1"}
    (entry,) = created.metadata.managedFields
    assert (entry.manager, entry.operation, entry.fieldsType) == ("corral", "Apply", "FieldsV1")
    assert entry.fieldsV1 == {
        "f:metadata": {"f:labels": {"f:a": {}, "f:b": {}}},
        "f:spec": {"f:minMember": {}, "f:queue": {}},
    }

    applied["metadata"]["labels"] = {"a": "1"}
    applied["spec"]["minMember"] = 3
    updated = client.apply(PodGroup.from_dict(applied), field_manager="corral")
    assert updated.metadata.labels == {"a": "1"}  # no longer applied: removed
    assert updated.spec == {"minMember": 3, "queue": "team-a"}
    assert updated.metadata.generation == 2

    other = {**applied, "spec": {"minMember": 5}}
    with pytest.raises(ApiError) as conflict:
        client.apply(PodGroup.from_dict(other), field_manager="kai")
    code, reason, message = status_of(conflict)
    assert (code, reason) == (409, "Conflict")
    assert message == (
        'Apply failed with 1 conflict: conflict with "corral" using '
        "scheduling.run.ai/v2alpha2: .spec.minMember"
    )
    same_value = {**applied, "metadata": {"name": "pg"}, "spec": {"queue": "team-a"}}
    client.apply(PodGroup.from_dict(same_value), field_manager="kai")  # shared, no conflict

    forced = client.apply(PodGroup.from_dict(other), field_manager="kai", force=True)
    assert forced.spec["minMember"] == 5
    owners = {e.manager: e.fieldsV1 for e in forced.metadata.managedFields}
    assert owners["kai"]["f:spec"] == {"f:minMember": {}}
    assert owners["corral"]["f:spec"] == {"f:queue": {}}

    missing_manager = httpx2.patch(
        f"{fake_kube.url}/apis/scheduling.run.ai/v2alpha2/namespaces/default/podgroups/pg",
        content=json.dumps(applied),
        headers={"Content-Type": "application/apply-patch+yaml"},
    )
    assert missing_manager.status_code == 400
    assert [e.verb for e in fake_kube.journal] == ["apply", "apply", "apply", "apply"]


def test_finalizers_keep_an_object_until_removed(client: Client, fake_kube: FakeKubeServer) -> None:
    client.create(compute_domain("cd", finalizers=["corral.dev/cleanup"]))
    client.delete(ComputeDomain, "cd")

    kept = client.get(ComputeDomain, "cd")
    assert kept.metadata.deletionTimestamp is not None
    assert kept.metadata.finalizers == ["corral.dev/cleanup"]
    client.delete(ComputeDomain, "cd")  # deleting again changes nothing

    with pytest.raises(ApiError) as forbidden:
        client.patch(
            ComputeDomain,
            "cd",
            {"metadata": {"finalizers": ["corral.dev/cleanup", "other"]}},
            patch_type=PatchType.MERGE,
        )
    assert forbidden.value.status.code == 422

    client.patch(
        ComputeDomain, "cd", {"metadata": {"finalizers": None}}, patch_type=PatchType.MERGE
    )
    with pytest.raises(ApiError) as gone:
        client.get(ComputeDomain, "cd")
    assert gone.value.status.code == 404
    assert [e.verb for e in fake_kube.journal] == ["create", "delete", "patch", "finalize"]


def test_status_subresource(client: Client, fake_kube: FakeKubeServer) -> None:
    created = client.create(pod("a"))
    created.status.phase = "Running"
    assert client.replace(created).status.phase == "Pending"  # main endpoint ignores status

    client.patch(Pod.Status, "a", {"status": {"phase": "Running"}}, patch_type=PatchType.MERGE)
    assert client.get(Pod, "a").status.phase == "Running"
    assert fake_kube.get_object("v1", "Pod", "default", "a")["status"] == {"phase": "Running"}

    fake_kube.set_pod_log("default", "a", "line 1\nline 2\n")
    assert list(client.log("a")) == ["line 1\n", "line 2\n"]


# --- watch ----------------------------------------------------------------------------------------


def test_watch_replays_and_resumes(client: Client, fake_kube: FakeKubeServer) -> None:
    start = client.list(Pod)
    list(start)
    before = start.resourceVersion
    client.create(pod("a"))
    client.patch(Pod, "a", {"metadata": {"labels": {"x": "1"}}})
    client.delete(Pod, "a")

    events = []
    for kind, obj in client.watch(Pod, resource_version=before):
        events.append((kind, obj.metadata.name, obj.metadata.resourceVersion))
        if len(events) == 3:
            break
    assert [e[:2] for e in events] == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]

    client.create(pod("b"))
    kind, obj = next(iter(client.watch(Pod, resource_version=events[1][2])))
    assert (kind, obj.metadata.name) == ("DELETED", "a")


def test_watch_streams_live_events(client: Client, fake_kube: FakeKubeServer) -> None:
    client.create(pod("old", {"app": "x"}))
    received: queue.Queue[tuple[str, str]] = queue.Queue()

    def watch() -> None:
        for kind, obj in client.watch(Pod, labels={"app": "x"}, server_timeout=5):
            received.put((kind, obj.metadata.name))
            if obj.metadata.name == "new" and kind == "DELETED":
                return

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    assert received.get(timeout=5) == ("ADDED", "old")  # initial state
    fake_kube.put_object(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "other"},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
        }
    )
    client.create(pod("new", {"app": "x"}))
    client.patch(Pod, "new", {"metadata": {"labels": {"app": "y"}}})  # leaves the selection
    assert received.get(timeout=5) == ("ADDED", "new")
    assert received.get(timeout=5) == ("DELETED", "new")
    thread.join(timeout=5)
    assert received.empty()


def test_watch_from_an_expired_resource_version(client: Client, fake_kube: FakeKubeServer) -> None:
    client.create(pod("a"))
    fake_kube.compact()
    with pytest.raises(ApiError) as expired:
        next(iter(client.watch(Pod, resource_version="1")))
    assert expired.value.status.code == 410
    assert expired.value.status.reason == "Expired"


# --- authorization and faults ---------------------------------------------------------------------


def review(client: Client, verb: str, resource: str, namespace: str | None = None) -> bool:
    attributes = ResourceAttributes(verb=verb, resource=resource, namespace=namespace, group="")
    answer = client.create(
        SelfSubjectAccessReview(spec=SelfSubjectAccessReviewSpec(resourceAttributes=attributes))
    )
    return bool(answer.status.allowed)


def test_access_reviews_and_forbidden_requests(client: Client, fake_kube: FakeKubeServer) -> None:
    fake_kube.deny("create", "", "pods", namespace="locked")
    fake_kube.create_namespace("locked")

    assert review(client, "create", "pods", "default") is True
    assert review(client, "create", "pods", "locked") is False
    assert review(client, "list", "pods", "locked") is True
    with pytest.raises(ApiError) as forbidden:
        client.create(pod("a"), namespace="locked")
    assert status_of(forbidden) == (
        403,
        "Forbidden",
        'pods is forbidden: User "system:serviceaccount:corral:corral" cannot create resource '
        '"pods" in API group "" in the namespace "locked"',
    )
    client.create(pod("a"))

    fake_kube.allow_all()
    assert review(client, "create", "pods", "locked") is True
    client.create(pod("a"), namespace="locked")


def test_injected_failures_and_delays(kubeconfig: Path, fake_kube: FakeKubeServer) -> None:
    client = Client(KubeConfig.from_file(kubeconfig))
    fake_kube.inject_fault("create", kind="Pod", status=500)
    with pytest.raises(ApiError) as failed:
        client.create(pod("a"))
    assert failed.value.status.code == 500
    assert fake_kube.objects(kind="Pod") == []  # the fault struck before any effect
    client.create(pod("a"))  # only once

    impatient = Client(KubeConfig.from_file(kubeconfig), timeout=httpx2.Timeout(0.2))
    fake_kube.inject_fault("get", kind="Pod", name="a", delay=0.6)
    with pytest.raises(httpx2.TimeoutException):
        impatient.get(Pod, "a")
    assert impatient.get(Pod, "a").metadata.name == "a"


# --- kubectl ----------------------------------------------------------------------------------


def kubectl(*args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("kubectl")
    if binary is None:
        pytest.skip("kubectl not on PATH: the second-client checks need the real binary")
    return subprocess.run([binary, *args], check=False, capture_output=True, text=True, timeout=30)


def test_kubectl_reads_what_lightkube_wrote(
    client: Client, fake_kube: FakeKubeServer, kubeconfig: Path, tmp_path: Path
) -> None:
    fake_kube.create_namespace("work")
    client.create(pod("p1"), namespace="work")
    client.create(pod("p2"), namespace="work")
    client.create(pod_group("pg-a"))
    client.create(pod_group("pg-b"), namespace="work")
    client.create(topology("t", "kubernetes.io/hostname"))
    cache = str(tmp_path / "kubectl-cache")

    pods = kubectl("--server", fake_kube.url, "--cache-dir", cache, "get", "pods", "-n", "work")
    assert pods.returncode == 0, pods.stderr
    assert [line.split()[0] for line in pods.stdout.splitlines()[1:]] == ["p1", "p2"]

    groups = kubectl(
        "--kubeconfig",
        str(kubeconfig),
        "--cache-dir",
        cache,
        "get",
        "podgroups",
        "-A",
        "-o",
        "json",
    )
    assert groups.returncode == 0, groups.stderr
    items = json.loads(groups.stdout)["items"]
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in items] == [
        ("default", "pg-a"),
        ("work", "pg-b"),
    ]
    assert items[0]["spec"] == {"minMember": 2, "queue": "team-a"}

    topologies = kubectl("--server", fake_kube.url, "--cache-dir", cache, "get", "topologies")
    assert topologies.returncode == 0, topologies.stderr
    assert topologies.stdout.splitlines()[1].split()[0] == "t"

    deleted = kubectl(
        "--kubeconfig",
        str(kubeconfig),
        "--cache-dir",
        cache,
        "delete",
        "pod",
        "p1",
        "-n",
        "work",
        "--wait=false",
    )
    assert deleted.returncode == 0, deleted.stderr
    assert [p["metadata"]["name"] for p in fake_kube.objects(kind="Pod")] == ["p2"]
