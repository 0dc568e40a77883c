from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corral.domain.platform.nodes import (
    Node,
    NodeCapacity,
    Resources,
    Taint,
    belongs_to,
    control_requests,
    node_variables,
    tolerates,
    validation_capacity,
)
from corral.errors import CorralError, UserError

GI = 2**30
GPU_TAINT = Taint("nvidia.com/gpu", "NoSchedule", "present")


@pytest.mark.parametrize(
    "toleration, taint, expected",
    [
        ({"operator": "Exists"}, GPU_TAINT, True),  # no key: tolerates everything
        ({"operator": "Exists", "key": ""}, Taint("a", "NoExecute"), True),
        ({"operator": "Exists", "effect": "NoSchedule"}, GPU_TAINT, True),
        ({"operator": "Exists", "effect": "NoExecute"}, GPU_TAINT, False),  # wrong effect
        ({"operator": "Exists", "key": "nvidia.com/gpu"}, GPU_TAINT, True),
        ({"operator": "Exists", "key": "other"}, GPU_TAINT, False),
        ({"operator": "Equal", "key": "nvidia.com/gpu", "value": "present"}, GPU_TAINT, True),
        ({"key": "nvidia.com/gpu", "value": "present"}, GPU_TAINT, True),  # Equal by default
        ({"key": "nvidia.com/gpu", "value": "absent"}, GPU_TAINT, False),
        ({"key": "nvidia.com/gpu"}, GPU_TAINT, False),
        ({"key": "dedicated"}, Taint("dedicated", "NoSchedule"), True),
        ({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}, GPU_TAINT, True),
        ({"key": "nvidia.com/gpu", "value": "present", "effect": "NoExecute"}, GPU_TAINT, False),
        ({"key": "nvidia.com/gpu", "value": "present", "effect": ""}, GPU_TAINT, True),
        ({"operator": None, "key": "nvidia.com/gpu", "value": "present"}, GPU_TAINT, True),
    ],
)
def test_tolerates(toleration: dict[str, Any], taint: Taint, expected: bool) -> None:
    assert tolerates(toleration, taint) is expected


@pytest.mark.parametrize(
    "toleration, message",
    [
        ({"operator": "In", "key": "a"},
         "toleration operator 'In' is not supported; use Exists or Equal in the pod template's "
         "tolerations"),
        ("Exists",
         "a toleration must be an object with key, operator, value and effect, not 'Exists'; "
         "fix the pod template"),
    ],
)  # fmt: skip
def test_bad_tolerations(toleration: Any, message: str) -> None:
    with pytest.raises(UserError) as caught:
        tolerates(toleration, GPU_TAINT)
    assert caught.value.message == message


def _node(labels: dict[str, str] | None = None, *taints: Taint, **allocatable: str) -> Node:
    return Node("n1", labels or {}, tuple(taints), allocatable)


@pytest.mark.parametrize(
    "node, selector, tolerations, expected",
    [
        (_node(), {}, [], True),  # no labels, empty selector: OSMO says no, Kubernetes yes
        (_node({"pool": "a"}), {}, [], True),
        (_node({"pool": "a"}), {"pool": "a"}, [], True),
        (_node({"pool": "a", "gpu": "h100"}), {"pool": "a", "gpu": "h100"}, [], True),
        (_node({"pool": "a"}), {"pool": "b"}, [], False),
        (_node({"pool": "a"}), {"pool": "a", "gpu": "h100"}, [], False),
        (_node({}, GPU_TAINT), {}, [], False),
        (_node({}, GPU_TAINT), {}, [{"operator": "Exists"}], True),
        (_node({}, GPU_TAINT), {}, [{"key": "x"}, {"key": "nvidia.com/gpu", "value": "present"}],
         True),
        (_node({}, Taint("soft", "PreferNoSchedule")), {}, [], True),  # ignored
        (_node({}, Taint("soft", "PreferNoSchedule"), GPU_TAINT), {}, [], False),
        (_node({}, GPU_TAINT, Taint("b", "NoExecute")), {},
         [{"key": "nvidia.com/gpu", "operator": "Exists"}], False),
        (_node({"pool": "a"}, GPU_TAINT), {"pool": "b"}, [{"operator": "Exists"}], False),
    ],
)  # fmt: skip
def test_belongs_to(
    node: Node, selector: dict[str, str], tolerations: list[dict[str, Any]], expected: bool
) -> None:
    assert belongs_to(node, selector, tolerations) is expected


def _template(*containers: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"containers": list(containers)}}


def _ctrl(resources: Any) -> dict[str, Any]:
    return {"name": "osmo-ctrl", "resources": resources}


DEFAULT = Resources(cpu=Decimal("0.25"), memory=Decimal(GI), storage=Decimal(3 * GI))


@pytest.mark.parametrize(
    "template, expected",
    [
        ({}, DEFAULT),
        (_template({"name": "main"}), DEFAULT),
        (_template({"name": "osmo-ctrl"}), DEFAULT),
        (_template(_ctrl({})), DEFAULT),
        (_template(_ctrl({"limits": {"cpu": "1"}})), DEFAULT),
        (_template(_ctrl({"requests": {}})), Resources(Decimal(0), Decimal(0), Decimal(GI))),
        (_template({"name": "main"}, _ctrl({"requests": {"cpu": "500m", "memory": "2Gi",
                                                         "ephemeral-storage": "10G"}})),
         Resources(Decimal("0.5"), Decimal(2 * GI), Decimal(10**10))),
        (_template(_ctrl({"requests": {"cpu": 2, "nvidia.com/gpu": 1}, "claims": [{"name": "x"}]})),
         Resources(Decimal(2), Decimal(0), Decimal(GI))),
        (_template(_ctrl({"requests": {"cpu": None, "memory": "1Mi"}})),
         Resources(Decimal(0), Decimal(2**20), Decimal(GI))),
    ],
)  # fmt: skip
def test_control_requests(template: dict[str, Any], expected: Resources) -> None:
    assert control_requests(template) == expected


@pytest.mark.parametrize(
    "template, message",
    [
        (_template({"name": "main"}, _ctrl({"requests": {"cpu": "1 core"}})),
         "spec.containers[1].resources.requests.cpu: invalid quantity '1 core': write a number "
         "(4, 1.5, .5) with an optional suffix (Ki Mi Gi Ti Pi Ei KiB MiB GiB TiB PiB n u m k M "
         "G T P E B) or exponent (1e3); fix the osmo-ctrl container of the pod template"),
        (_template(_ctrl({"requests": {"memory": "1K"}})),
         "spec.containers[0].resources.requests.memory: invalid quantity '1K': use k (10^3) or "
         "Ki (2^10); fix the osmo-ctrl container of the pod template"),
        (_template(_ctrl({"requests": {"cpu": True}})),
         "spec.containers[0].resources.requests.cpu: True is not a Kubernetes quantity; write a "
         "string such as '250m' or '1Gi' in the osmo-ctrl container of the pod template"),
        (_template(_ctrl({"requests": {"cpu": "-1"}})),
         "spec.containers[0].resources.requests.cpu: '-1' is negative; a request must be 0 or "
         "more"),
        (_template(_ctrl({"requests": "lots"})),
         "spec.containers[0].resources.requests of the pod template must be an object, not "
         "'lots'"),
        (_template(_ctrl(["x"])),
         "spec.containers[0].resources of the pod template must be an object, not ['x']"),
        ({"spec": {"containers": {"name": "osmo-ctrl"}}},
         "spec.containers of the pod template must be a list, not {'name': 'osmo-ctrl'}"),
        ({"spec": []}, "spec of the pod template must be an object, not []"),
    ],
)  # fmt: skip
def test_control_request_errors(template: dict[str, Any], message: str) -> None:
    with pytest.raises(UserError) as caught:
        control_requests(template)
    assert caught.value.message == message


_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=12),
    st.sampled_from(["250m", "1Gi", "1K", "-1", "1e1001", "1E", ".5", ""]),
    st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers()),
)  # fmt: skip
_TEMPLATES = st.recursive(
    _VALUES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.sampled_from(["spec", "containers", "name", "resources", "requests", "cpu",
                             "memory", "ephemeral-storage", "osmo-ctrl"]),
            inner, max_size=4),
        st.builds(lambda r: _template(_ctrl(r)), inner),
        st.builds(lambda r: _template(_ctrl({"requests": r})), inner),
    ),
    max_leaves=12,
)  # fmt: skip


@given(_TEMPLATES)
def test_control_requests_fuzz(template: Any) -> None:
    try:
        result = control_requests(template)
    except CorralError:
        return
    assert min(result.cpu, result.memory, result.storage) >= 0


def test_validation_capacity_is_exact() -> None:
    node = Node(
        "dgx-1",
        {},
        (),
        {"cpu": "64", "memory": "256Gi", "ephemeral-storage": "1Ti", "nvidia.com/gpu": "8"},
    )
    capacity = validation_capacity(node, DEFAULT)
    assert capacity == NodeCapacity(
        "dgx-1", Decimal("63.75"), Decimal(255 * GI), Decimal(2**40 - 3 * GI), 8
    )
    assert node_variables(capacity) == {
        "K8_CPU": "63.75",
        "K8_GPU": "8",
        "K8_MEMORY": "255Gi",
        "K8_STORAGE": "1021Gi",
    }


def test_capacity_floors_at_zero_and_missing_is_zero() -> None:
    node = Node("tiny", {}, (), {"cpu": "100m", "memory": "1000Ki"})
    capacity = validation_capacity(node, DEFAULT)
    assert capacity == NodeCapacity("tiny", Decimal(0), Decimal(0), Decimal(0), 0)
    assert node_variables(capacity) == {
        "K8_CPU": "0", "K8_GPU": "0", "K8_MEMORY": "0", "K8_STORAGE": "0"
    }  # fmt: skip


def test_capacity_keeps_milli_and_decimal_units() -> None:
    node = Node("n", {}, (), {"cpu": "7800m", "memory": "64G", "ephemeral-storage": "100G"})
    control = Resources(Decimal("0.05"), Decimal(10**9), Decimal(0))
    capacity = validation_capacity(node, control)
    assert node_variables(capacity) == {
        "K8_CPU": "7.75",
        "K8_GPU": "0",
        "K8_MEMORY": "63000000000",
        "K8_STORAGE": "97656250Ki",  # 10^11 is a multiple of 1024
    }


@pytest.mark.parametrize(
    "allocatable, message",
    [
        ({"memory": "lots"},
         "node n: allocatable memory is not a Kubernetes quantity (invalid quantity 'lots': write "
         "a number (4, 1.5, .5) with an optional suffix (Ki Mi Gi Ti Pi Ei KiB MiB GiB TiB PiB n "
         "u m k M G T P E B) or exponent (1e3)); check what the backend reports for this node"),
        ({"cpu": None},
         "node n: allocatable cpu is not a Kubernetes quantity (None is not a quantity); check "
         "what the backend reports for this node"),
        ({"nvidia.com/gpu": "1.5"},
         "node n: allocatable nvidia.com/gpu '1.5' is not a whole number of GPUs up to 1000000; "
         "check the node's device plugin"),
        ({"nvidia.com/gpu": "1E"},
         "node n: allocatable nvidia.com/gpu '1E' is not a whole number of GPUs up to 1000000; "
         "check the node's device plugin"),
    ],
)  # fmt: skip
def test_capacity_errors(allocatable: dict[str, Any], message: str) -> None:
    with pytest.raises(UserError) as caught:
        validation_capacity(Node("n", {}, (), allocatable), DEFAULT)
    assert caught.value.message == message


@given(st.integers(0, 2**50), st.integers(0, 2**50), st.integers(0, 10**6), st.integers(0, 10**6))
def test_capacity_arithmetic(
    memory_ki: int, storage_ki: int, cpu_milli: int, ctrl_milli: int
) -> None:
    node = Node("n", {}, (), {"memory": f"{memory_ki}Ki", "ephemeral-storage": f"{storage_ki}Ki",
                              "cpu": f"{cpu_milli}m"})  # fmt: skip
    capacity = validation_capacity(
        node, Resources(Decimal(ctrl_milli) / 1000, Decimal(GI), Decimal(0))
    )
    assert capacity.memory == max(0, memory_ki * 1024 - GI)
    assert capacity.storage == storage_ki * 1024
    assert capacity.cpu * 1000 == max(0, cpu_milli - ctrl_milli)
