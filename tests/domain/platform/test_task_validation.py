"""A task checked against the example heterogeneous pool and a few nodes."""

from __future__ import annotations

from typing import Any

import pytest

from corral.domain.configs.bundles import parse_bundle
from corral.domain.configs.snapshot import Configs
from corral.domain.configs.types import ConfigType
from corral.domain.platform.nodes import Node, Taint
from corral.domain.platform.resolved_pool import resolve_platform
from corral.domain.platform.task_validation import TaskRequest, platform_nodes, validate_task
from corral.domain.platform.variables import ResourceRequest
from corral.errors import UserError
from corral.files import read_bundle_directory
from tests.conftest import REPO

A100_TAINT = (Taint("nvidia.com/gpu.product", "NoSchedule", "NVIDIA-A100"),)


def _node(name: str, product: str, cpu: str, memory: str, storage: str, gpus: str) -> Node:
    return Node(
        name,
        {"nvidia.com/gpu.product": product},
        A100_TAINT if product == "NVIDIA-A100" else (),
        {"cpu": cpu, "memory": memory, "ephemeral-storage": storage, "nvidia.com/gpu": gpus},
    )


NODES = [
    _node("l40s-1", "NVIDIA-L40S", "64", "512Gi", "1Ti", "8"),
    _node("a100-small", "NVIDIA-A100", "16", "128Gi", "500Gi", "4"),
    _node("a100-big", "NVIDIA-A100", "96", "1Ti", "2Ti", "8"),
]


@pytest.fixture(scope="module")
def state() -> Configs:
    return Configs(parse_bundle(read_bundle_directory(REPO / "examples" / "configs")[0]).items)


def _check(state: dict[ConfigType, Any], request: ResourceRequest, **flags: Any) -> None:
    resolved = resolve_platform(state, "heterogeneous_pool", "a100_platform")
    validate_task(resolved, TaskRequest("train", request, **flags), NODES)


def test_the_platform_has_the_nodes_with_its_labels_whose_taints_it_tolerates(
    state: dict[ConfigType, Any],
) -> None:
    a100 = resolve_platform(state, "heterogeneous_pool", "a100_platform")
    l40s = resolve_platform(state, "heterogeneous_pool", "l40s_platform")
    assert [n.name for n in platform_nodes(a100, NODES)] == ["a100-small", "a100-big"]
    assert [n.name for n in platform_nodes(l40s, NODES)] == ["l40s-1"]


def test_node_rules_pass_when_one_node_fits(state: dict[ConfigType, Any]) -> None:
    _check(state, ResourceRequest(cpu=32, memory="256Gi", storage="1Ti"))


def test_no_node_fits_lists_every_platform_node_with_capacity_and_reason(
    state: dict[ConfigType, Any],
) -> None:
    with pytest.raises(UserError) as raised:
        _check(state, ResourceRequest(cpu=200))
    # capacity = allocatable minus the control container (250m, 1Gi, 3Gi)
    assert raised.value.message == (
        "Resource validation failed for task: train\n"
        "node        cpu    memory  storage  gpu  reason\n"
        "----------  -----  ------  -------  ---  --------------------------\n"
        "a100-small  15.75  127Gi   497Gi    4    Value 200 too high for CPU\n"
        "a100-big    95.75  1023Gi  2045Gi   8    Value 200 too high for CPU\n"
        'Please check available resources with "corral resource list".'
    )


def test_excluded_nodes_do_not_count(state: dict[ConfigType, Any]) -> None:
    with pytest.raises(UserError) as raised:
        _check(state, ResourceRequest(cpu=32, nodes_excluded=("a100-big",)))
    assert "a100-big" not in raised.value.message
    assert "a100-small  15.75  127Gi   497Gi    4    Value 32 too high for CPU" in (
        raised.value.message
    )


def test_static_rules_come_first(state: dict[ConfigType, Any]) -> None:
    with pytest.raises(UserError) as raised:
        _check(state, ResourceRequest(cpu=0))
    assert raised.value.message == (
        "Resource validation failed for task: train\n"
        "Assertion failed for task train: Value 0 needs to be greater than 0 for CPU"
    )


def test_privileged_needs_the_platform_to_allow_it(state: dict[ConfigType, Any]) -> None:
    with pytest.raises(UserError) as raised:
        _check(state, ResourceRequest(cpu=1), privileged=True)
    assert raised.value.message == (
        "Task with platform: a100_platform does not have privileged flag enabled. Task train"
    )
