"""The kubernetes backend when the API server misbehaves, corral restarts, or permissions are
missing: groups retry or fail cleanly, and nothing is left behind or made twice."""

from __future__ import annotations

import time
from collections import Counter

from corral.backends.kubernetes.backend import KubernetesBackend
from corral.services.lifecycle.creation_errors import MAX_CREATE_ATTEMPTS
from corral.services.runtime import open_runtime
from tests.backends.kubernetes.kube_world import BACKEND, NAMESPACE, KubeWorld

GROUP_KINDS = ("ComputeDomain", "PodGroup", "Pod", "Service", "Secret")


def _applies(w: KubeWorld) -> Counter[tuple[str, str]]:
    return Counter((j.kind, j.name) for j in w.fake.journal if j.verb in ("apply", "create"))


def _run_to_completion(w: KubeWorld, workflow_id: str) -> None:
    w.run_cycles(
        lambda: w.workflow(workflow_id).status == "COMPLETED" and not w.group_objects(),
        code_of=lambda _pod: 0,
    )


def test_a_create_refused_midway_is_retried_and_nothing_is_duplicated(
    kube_world: KubeWorld,
) -> None:
    w = kube_world
    workflow_id = w.submit_example("nvl72-single-rack.yaml")
    w.fake.inject_fault("apply", kind="Pod", status=500, times=2)

    w.controller.tick()  # ComputeDomain and PodGroup made, the first pod refused
    [group] = w.workflow(workflow_id).groups
    assert group.status == "WAITING"
    assert sorted(o["kind"] for o in w.group_objects()) == ["ComputeDomain", "PodGroup"]
    w.controller.tick()  # refused again
    w.controller.tick()  # goes through
    [group] = w.workflow(workflow_id).groups
    assert group.status == "SCHEDULING"
    assert sorted(o["kind"] for o in w.group_objects()) == [
        "ComputeDomain",
        "Pod",
        "Pod",
        "Pod",
        "Pod",
        "PodGroup",
        "Service",
    ]
    _run_to_completion(w, workflow_id)
    pods = [name for (kind, name) in _applies(w) if kind == "Pod"]
    assert len(pods) == 4 and len(set(pods)) == 4


def test_a_create_that_times_out_is_retried_without_a_duplicate(kube_world: KubeWorld) -> None:
    w = kube_world
    workflow_id = w.submit_example("nvl72-single-rack.yaml")
    # Longer than the backend's api_timeout (2s): the client gives up, the server still makes
    # the pod a moment later, and the retry finds it there.
    w.fake.inject_fault("apply", kind="Pod", delay=2.5, times=1)
    w.controller.tick()
    [group] = w.workflow(workflow_id).groups
    assert group.status == "WAITING"
    assert w.runtime.lifecycle  # the controller survived the timeout
    deadline = time.monotonic() + 10
    while not w.fake.objects("v1", "Pod"):  # the late create lands (real time)
        assert time.monotonic() < deadline, "the delayed create never landed"
        time.sleep(0.05)
    w.controller.tick()
    [group] = w.workflow(workflow_id).groups
    assert group.status == "SCHEDULING"
    _run_to_completion(w, workflow_id)
    assert sorted(o["kind"] for o in w.fake.objects("v1", "Pod")) == []
    names = [o for o in _applies(w) if o[0] == "Pod"]
    assert len({name for _, name in names}) == 4


def test_a_create_refused_for_good_fails_the_group_and_cleans_up(kube_world: KubeWorld) -> None:
    w = kube_world
    workflow_id = w.submit_example("nvl72-single-rack.yaml")
    w.fake.inject_fault("apply", kind="Pod", status=503, times=100)
    for _ in range(MAX_CREATE_ATTEMPTS):
        w.controller.tick()
    [group] = w.workflow(workflow_id).groups
    assert group.status == "FAILED_BACKEND_ERROR"
    assert {t.status for t in group.tasks} == {"FAILED_BACKEND_ERROR"}
    assert group.tasks[0].message is not None
    assert group.tasks[0].message.startswith(
        f"The cluster refused the group's objects after {MAX_CREATE_ATTEMPTS} attempts: "
    )
    w.controller.tick()  # cleanup
    assert w.group_objects() == []
    assert w.workflow(workflow_id).status == "FAILED_BACKEND_ERROR"


def test_an_invalid_object_fails_the_group_at_once(kube_world: KubeWorld) -> None:
    w = kube_world
    workflow_id = w.submit_example("nvl72-single-rack.yaml")
    w.fake.inject_fault("apply", kind="PodGroup", status=422, times=1)
    w.controller.tick()
    [group] = w.workflow(workflow_id).groups
    assert group.status == "FAILED_BACKEND_ERROR"
    assert group.tasks[0].message is not None
    assert group.tasks[0].message.startswith("The cluster refused the group's objects: ")
    w.controller.tick()
    assert w.group_objects() == []


def test_a_failed_delete_is_retried_until_nothing_is_left(kube_world: KubeWorld) -> None:
    w = kube_world
    workflow_id = w.submit_example("nvl72-single-rack.yaml")
    w.run_cycles(lambda: w.workflow(workflow_id).status == "RUNNING")
    w.fake.inject_fault("delete", kind="Pod", status=500, times=2)
    [group] = w.workflow(workflow_id).groups
    lead = next(t for t in group.tasks if t.lead)
    w.kubelet.finish(only=lambda pod: pod["metadata"]["name"] == lead.pod_name)
    w.settle()
    # The lead's end stops its siblings (deletes their pods): refused, the step is redone on
    # the next tick; then the group's cleanup deletes what is left.
    w.controller.tick()
    assert w.workflow(workflow_id).status == "RUNNING"
    assert len(w.fake.objects("v1", "Pod")) == 4
    for _ in range(5):
        w.controller.tick()
    assert w.workflow(workflow_id).status == "COMPLETED"
    assert w.group_objects() == []


def test_a_restarted_corral_reattaches_to_running_pods(kube_world: KubeWorld) -> None:
    w = kube_world
    workflow_id = w.submit_example("nvl72-two-instances.yaml")
    w.run_cycles(lambda: w.workflow(workflow_id).status == "RUNNING")
    made = _applies(w)
    w.runtime.backends.close()  # corral stops; the pods go on running

    url = w.runtime.engine.url.render_as_string(hide_password=False)
    restarted = open_runtime(url)
    try:
        controller = restarted.lifecycle(w.clock)
        before = len(w.fake.journal)
        controller.tick()
        assert [j for j in w.fake.journal[before:] if j.kind in GROUP_KINDS] == []
        w.kubelet.finish()
        backend = restarted.backends.get(BACKEND)
        assert isinstance(backend, KubernetesBackend)
        for _ in range(20):
            w.settle(backend)  # the new watches see the ends before the tick reads them
            controller.tick()
            if restarted.workflows.get(workflow_id).status == "COMPLETED" and not w.group_objects():
                break
            w.clock.advance(2.0)
        stored = restarted.workflows.get(workflow_id)
        assert stored.status == "COMPLETED"
        assert w.group_objects() == []
        after = _applies(w)
        assert {k: v for k, v in after.items() if k[0] in GROUP_KINDS} == {
            k: v for k, v in made.items() if k[0] in GROUP_KINDS
        }
    finally:
        restarted.backends.close()
        restarted.engine.dispose()


def test_a_missing_permission_is_refused_with_the_rule_before_any_object(
    kube_world: KubeWorld,
) -> None:
    w = kube_world
    w.fake.deny("patch", "resource.nvidia.com", "computedomains", NAMESPACE)
    workflow_id = w.submit_example("nvl72-single-rack.yaml")
    w.controller.tick()
    [group] = w.workflow(workflow_id).groups
    assert group.status == "FAILED_BACKEND_ERROR"
    assert group.tasks[0].message == (
        "corral's service account on backend default may not create, delete, list and patch "
        "resource.nvidia.com computedomains in namespace default. Add these rules to its Role "
        "(extraRBACRules; see docs/deploy.md#permissions):\n"
        "- apiGroups: [resource.nvidia.com]\n"
        "  resources: [computedomains]\n"
        "  verbs: [create, delete, list, patch]\n"
    )
    assert [j for j in w.fake.journal if j.kind in GROUP_KINDS] == []
    w.controller.tick()
    assert w.workflow(workflow_id).status == "FAILED_BACKEND_ERROR"
    assert w.group_objects() == []


def test_missing_priority_classes_are_refused_before_any_object(kube_world: KubeWorld) -> None:
    """Every PodGroup names osmo-<priority>; without that PriorityClass KAI would schedule the
    group without its priority (issue 13, item 13)."""
    w = kube_world
    w.fake.store.delete(
        w.fake.store.type_of("scheduling.k8s.io/v1", "PriorityClass"), "", "osmo-low"
    )
    workflow_id = w.submit_example("nvl72-single-rack.yaml", priority="LOW")
    w.controller.tick()
    [group] = w.workflow(workflow_id).groups
    assert group.status == "FAILED_BACKEND_ERROR"
    assert group.tasks[0].message == (
        "PriorityClass osmo-low does not exist on backend default: KAI would schedule the group "
        "without its priority. Create corral's PriorityClasses: kubectl apply -f "
        "deploy/kubernetes/base/priorityclasses.yaml (docs/deploy.md#priority-classes)."
    )
    assert [j for j in w.fake.journal if j.kind in GROUP_KINDS] == []
    normal = w.submit_example("nvl72-single-rack.yaml")
    w.settle()  # the watches have seen the fake's writes before the tick reads them
    w.controller.tick()
    assert w.workflow(normal).groups[0].status in ("SCHEDULING", "INITIALIZING")
