"""What a waiting group asks for, as the queue shows it (``domain/views/requested_shape.py``)."""

from __future__ import annotations

from corral.domain.views.requested_shape import RequestedShape
from corral.scheduler.podgroup import requested_shape
from tests.scheduler.helpers import pod, pod_group

CLIQUE = {
    "topology": "t",
    "requiredTopologyLevel": "nvidia.com/gpu-clique",
    "preferredTopologyLevel": "topology.kubernetes.io/rack",
}


def test_alike_pods_with_a_constraint_read_as_count_times_gpus() -> None:
    found = requested_shape([pod_group(4, CLIQUE), *(pod(f"p{i}", gpu=4) for i in range(4))])
    assert found == RequestedShape(4, 16, 4, "required gpu-clique; preferred rack")
    assert found.text == "4 x 4 GPUs, required gpu-clique; preferred rack"


def test_pods_of_different_sizes_read_as_their_total() -> None:
    found = requested_shape([pod_group(2), pod("a", gpu=8), pod("b", gpu=0)])
    assert found is not None and found.text == "2 pods, 8 GPUs"


def test_objects_without_a_pod_group_have_no_shape() -> None:
    assert requested_shape([pod("a")]) is None
    assert requested_shape([pod_group(1)]) is None
