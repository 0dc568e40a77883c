"""The cluster description: corral's nodes and generators, Kubernetes NodeLists, and errors."""

from __future__ import annotations

import contextlib
import re
import textwrap
from collections import defaultdict
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corral.domain.cluster.description import Cluster, parse_cluster
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

TOPOLOGY = (
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/spine",
    "topology.kubernetes.io/rack",
    "nvidia.com/gpu-clique",
)


def _parse(text: str, source: str = "cluster.yaml") -> Cluster:
    return parse_cluster(textwrap.dedent(text), source=source)


def _error(text: str, source: str = "cluster.yaml") -> str:
    with pytest.raises(UserError) as raised:
        _parse(text, source)
    return raised.value.message


# ---------------------------------------------------------------------------- corral's nodes


def test_explicit_nodes_keep_their_fields_and_order() -> None:
    cluster = _parse(
        """
        nodes:
          - name: a100-1
            labels: {nvidia.com/gpu.product: NVIDIA-A100, rank: 3}
            taints:
              - {key: nvidia.com/gpu.product, value: NVIDIA-A100, effect: NoSchedule}
              - {key: maintenance, effect: PreferNoSchedule}
            allocatable: {cpu: 64, memory: 512Gi, ephemeral-storage: 1Ti, nvidia.com/gpu: "8"}
          - name: bare
        """
    )
    assert cluster.nodes == (
        Node(
            "a100-1",
            {"nvidia.com/gpu.product": "NVIDIA-A100", "rank": "3"},
            (
                Taint("nvidia.com/gpu.product", "NoSchedule", "NVIDIA-A100"),
                Taint("maintenance", "PreferNoSchedule"),
            ),
            {"cpu": "64", "memory": "512Gi", "ephemeral-storage": "1Ti", "nvidia.com/gpu": "8"},
        ),
        Node("bare", {}, (), {}),
    )
    assert cluster.node("bare") == Node("bare", {}, (), {})
    assert cluster.node("missing") is None


def test_json_is_accepted_too() -> None:
    cluster = _parse('{"nodes": [{"name": "n1"}]}', source="cluster.json")
    assert [node.name for node in cluster.nodes] == ["n1"]


# ------------------------------------------------------------------------------- generators


RACKS = """
generate:
  - prefix: gb200
    count: 3
    levels:
      - {label: topology.kubernetes.io/zone, values: [zone-a, zone-b]}
      - {label: topology.kubernetes.io/spine, count: 2}
      - {label: topology.kubernetes.io/rack, count: 2}
      - {label: nvidia.com/gpu-clique, count: 1}
    labels: {nvidia.com/gpu.product: NVIDIA-GB200, kubernetes.io/arch: arm64}
    taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
    allocatable: {cpu: "144", memory: 480Gi, ephemeral-storage: 1Ti, nvidia.com/gpu: "4"}
"""


def test_a_generator_multiplies_its_levels_coarsest_first() -> None:
    nodes = _parse(RACKS).nodes
    assert len(nodes) == 2 * 2 * 2 * 1 * 3
    assert [node.name for node in nodes[:7]] == [
        "gb200-zone-a-s0-r0-g0-0",
        "gb200-zone-a-s0-r0-g0-1",
        "gb200-zone-a-s0-r0-g0-2",
        "gb200-zone-a-s0-r1-g0-0",
        "gb200-zone-a-s0-r1-g0-1",
        "gb200-zone-a-s0-r1-g0-2",
        "gb200-zone-a-s1-r0-g0-0",
    ]
    assert nodes[-1].name == "gb200-zone-b-s1-r1-g0-2"
    assert nodes[-1].labels == {
        "nvidia.com/gpu.product": "NVIDIA-GB200",
        "kubernetes.io/arch": "arm64",
        "topology.kubernetes.io/zone": "zone-b",
        "topology.kubernetes.io/spine": "zone-b-spine-1",
        "topology.kubernetes.io/rack": "zone-b-spine-1-rack-1",
        "nvidia.com/gpu-clique": "zone-b-spine-1-rack-1-gpu-clique-0",
    }
    assert nodes[-1].taints == (Taint("nvidia.com/gpu", "NoSchedule", "present"),)
    assert nodes[-1].allocatable == {
        "cpu": "144",
        "memory": "480Gi",
        "ephemeral-storage": "1Ti",
        "nvidia.com/gpu": "4",
    }


def test_generated_level_values_belong_to_one_parent() -> None:
    nodes = _parse(RACKS).nodes
    for child, parent in zip(TOPOLOGY[1:], TOPOLOGY, strict=False):
        parents: dict[str, set[str]] = defaultdict(set)
        for node in nodes:
            parents[node.labels[child]].add(node.labels[parent])
        assert all(len(values) == 1 for values in parents.values()), child
    assert len({node.labels["topology.kubernetes.io/rack"] for node in nodes}) == 8
    assert len({node.name for node in nodes}) == len(nodes)


def test_counted_top_level_and_no_levels() -> None:
    cluster = _parse(
        """
        nodes: [{name: login}]
        generate:
          - {prefix: cpu, count: 12}
          - prefix: l40s
            count: 2
            levels: [{label: topology.kubernetes.io/rack, count: 2}]
        """
    )
    names = [node.name for node in cluster.nodes]
    assert names[:4] == ["login", "cpu-00", "cpu-01", "cpu-02"]
    assert names[12:] == ["cpu-11", "l40s-r0-0", "l40s-r0-1", "l40s-r1-0", "l40s-r1-1"]
    assert cluster.node("l40s-r1-0") == Node(
        "l40s-r1-0", {"topology.kubernetes.io/rack": "rack-1"}, (), {}
    )


# ------------------------------------------------------------------------ Kubernetes formats


NODE_LIST = """
apiVersion: v1
kind: List
metadata: {resourceVersion: ""}
items:
  - apiVersion: v1
    kind: Node
    metadata:
      name: ip-10-0-1-17.ec2.internal
      labels: {kubernetes.io/arch: amd64, nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
      annotations: {node.alpha.kubernetes.io/ttl: "0"}
      uid: 1b1c
    spec:
      podCIDR: 10.244.1.0/24
      taints:
        - {key: nvidia.com/gpu, value: present, effect: NoSchedule, timeAdded: null}
    status:
      allocatable: {cpu: 191450m, memory: 2097152Ki, ephemeral-storage: "1800000000000",
                    nvidia.com/gpu: "8", pods: "110", hugepages-1Gi: "0"}
      capacity: {cpu: "192"}
      conditions: [{type: Ready, status: "True"}]
  - kind: Node
    metadata: {name: cpu-node}
"""


def test_a_kubectl_node_list_is_read_as_is() -> None:
    cluster = _parse(NODE_LIST)
    assert cluster.nodes == (
        Node(
            "ip-10-0-1-17.ec2.internal",
            {"kubernetes.io/arch": "amd64", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            (Taint("nvidia.com/gpu", "NoSchedule", "present"),),
            {
                "cpu": "191450m",
                "memory": "2097152Ki",
                "ephemeral-storage": "1800000000000",
                "nvidia.com/gpu": "8",
                "pods": "110",
                "hugepages-1Gi": "0",
            },
        ),
        Node("cpu-node", {}, (), {}),
    )


def test_a_node_list_kind_and_a_single_node() -> None:
    listed = _parse("kind: NodeList\nitems: [{metadata: {name: n1}}]")
    single = _parse("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {}")
    assert listed.nodes == single.nodes == (Node("n1", {}, (), {}),)


# ------------------------------------------------------------------------------------ errors


ERRORS: list[tuple[str, str]] = [
    (
        "",
        "cluster.yaml: a cluster description must be a mapping; write corral's "
        "format (a mapping with `nodes` and/or `generate`) or paste the output "
        "of `kubectl get nodes -o yaml`",
    ),
    (
        "- a\n- b\n",
        "cluster.yaml: a cluster description must be a mapping; write corral's "
        "format (a mapping with `nodes` and/or `generate`) or paste the output "
        "of `kubectl get nodes -o yaml`",
    ),
    (
        "nodes: [\n",
        "cluster.yaml:2:1: invalid YAML: expected the node content, but found '<stream end>'; "
        "the text ends inside a [ or {; close it",
    ),
    (
        "nodes: []\n",
        "cluster.yaml: the cluster has no nodes; describe some under `nodes` or `generate`",
    ),
    (
        "nodes: [{name: n1}]\nextra: 1\n",
        "cluster.yaml:2:1: extra: unknown field 'extra'; the fields here are nodes, generate.",
    ),
    (
        "nodes: {name: n1}\n",
        "cluster.yaml:1:1: nodes: `nodes` must be a list, not a mapping",
    ),
    (
        "nodes:\n  - name: n1\n    label: {}\n",
        "cluster.yaml:3:5: nodes[0].label: unknown field 'label' (did you mean 'labels'?); the "
        "fields here are name, labels, taints, allocatable, unschedulable, conditions, fabric.",
    ),
    (
        "nodes:\n  - labels: {}\n",
        "cluster.yaml:2:5: nodes[0]: `name` is missing; add it",
    ),
    (
        "nodes:\n  - name: N_1\n",
        "cluster.yaml:2:5: nodes[0].name: 'N_1' is not a valid node name: use "
        "at most 253 lowercase letters, digits, '-' and '.', starting and "
        "ending with a letter or digit",
    ),
    (
        "nodes:\n  - name: 12\n",
        "cluster.yaml:2:5: nodes[0].name: a node name must be a string, not a number",
    ),
    (
        "nodes:\n  - name: n1\n  - name: n2\n  - name: n1\n",
        "cluster.yaml:4:5: nodes[2].name: node name 'n1' is already used by "
        "nodes[0].name (cluster.yaml:2:5); node names must be unique, rename "
        "one of them",
    ),
    (
        "nodes:\n  - name: n1\n    labels: {bad key: x}\n",
        "cluster.yaml:3:14: nodes[0].labels[\"bad key\"]: 'bad key' is not a "
        "valid Kubernetes label key: the name part 'bad key' must start and "
        "end with a letter or digit and contain only letters, digits, '-', '_' "
        "or '.'",
    ),
    (
        "nodes:\n  - name: n1\n    labels: {a: -bad}\n",
        "cluster.yaml:3:14: nodes[0].labels.a: not a valid Kubernetes label "
        "value: '-bad' must start and end with a letter or digit and contain "
        "only letters, digits, '-', '_' or '.'",
    ),
    (
        "nodes:\n  - name: n1\n    labels: {a: true}\n",
        "cluster.yaml:3:14: nodes[0].labels.a: a label value must be a string, "
        "not a boolean; put it in quotes",
    ),
    (
        "nodes:\n  - name: n1\n    taints: [{key: k, effect: Never}]\n",
        "cluster.yaml:3:23: nodes[0].taints[0].effect: 'Never' is not a taint "
        "effect; use one of NoSchedule, PreferNoSchedule, NoExecute",
    ),
    (
        "nodes:\n  - name: n1\n    taints: [{key: k}]\n",
        "cluster.yaml:3:14: nodes[0].taints[0]: `effect` is missing; add it",
    ),
    (
        "nodes:\n  - name: n1\n    taints: [{key: k, effect: NoSchedule, timeAdded: x}]\n",
        "cluster.yaml:3:43: nodes[0].taints[0].timeAdded: unknown field "
        "'timeAdded'; the fields here are key, value, effect.",
    ),
    (
        "nodes:\n  - name: n1\n    allocatable: {cpu: lots}\n",
        "cluster.yaml:3:19: nodes[0].allocatable.cpu: invalid quantity 'lots': "
        "write a number (4, 1.5, .5) with an optional suffix (Ki Mi Gi Ti Pi "
        "Ei KiB MiB GiB TiB PiB n u m k M G T P E B) or exponent (1e3)",
    ),
    (
        "nodes:\n  - name: n1\n    allocatable: {memory: -1Gi}\n",
        "cluster.yaml:3:19: nodes[0].allocatable.memory: '-1Gi' is negative; "
        "allocatable resources are 0 or more",
    ),
    (
        "nodes:\n  - name: n1\n    allocatable: {nvidia.com/gpu: '1.5'}\n",
        "cluster.yaml:3:19: nodes[0].allocatable[\"nvidia.com/gpu\"]: '1.5' is "
        "not a whole number of GPUs up to 1000000",
    ),
    (
        "nodes:\n  - name: n1\n    allocatable: {gpu: 1}\n",
        "cluster.yaml:3:19: nodes[0].allocatable.gpu: unknown field 'gpu'; the "
        "fields here are cpu, memory, ephemeral-storage, nvidia.com/gpu, pods.",
    ),
    (
        "nodes:\n  - name: n1\n    allocatable: {cpu: [1]}\n",
        "cluster.yaml:3:19: nodes[0].allocatable.cpu: must be a Kubernetes "
        'quantity such as "64" or "512Gi", not a list',
    ),
    (
        "generate:\n  - {prefix: GPU, count: 2}\n",
        "cluster.yaml:2:6: generate[0].prefix: 'GPU' is not a valid name "
        "prefix: use at most 40 lowercase letters, digits and '-', starting "
        "and ending with a letter or digit",
    ),
    (
        "generate:\n  - {prefix: gpu, count: 0}\n",
        "cluster.yaml:2:19: generate[0].count: must be a whole number, 1 or more, not 0",
    ),
    (
        "generate:\n  - {prefix: gpu}\n",
        "cluster.yaml:2:5: generate[0]: `count` is missing; add it",
    ),
    (
        "generate:\n  - {prefix: gpu, count: 1000, levels: [{label: rack, count: 101}]}\n",
        "cluster.yaml:2:5: generate[0]: makes more than 100000 nodes; lower "
        "`count` or the levels' `count` or `values`",
    ),
    (
        "generate:\n  - {prefix: gpu, count: 60000}\n  - {prefix: cpu, count: 50000}\n",
        "cluster.yaml:3:5: generate[1]: makes more than 100000 nodes with the "
        "generators before it; lower `count` or the levels' `count` or `values`",
    ),
    (
        "generate:\n  - {prefix: gpu, count: 1, levels: [{label: rack}]}\n",
        "cluster.yaml:2:38: generate[0].levels[0]: give either `values` (the "
        "label values) or `count` (how many values)",
    ),
    (
        "generate:\n  - {prefix: gpu, count: 1, levels: [{label: rack, values: []}]}\n",
        "cluster.yaml:2:52: generate[0].levels[0].values: is empty; give at least one value",
    ),
    (
        "generate:\n  - {prefix: gpu, count: 1, levels: [{label: rack, values: [a, a]}]}\n",
        "cluster.yaml:2:64: generate[0].levels[0].values[1]: 'a' appears "
        "twice; list each value once",
    ),
    (
        "generate:\n  - {prefix: gpu, count: 1, levels: [{label: rack, count: "
        "1}, {label: rack, count: 2}]}\n",
        "cluster.yaml:2:64: generate[0].levels[1].label: 'rack' is already a level; name it once",
    ),
    (
        "generate:\n  - prefix: gpu\n    count: 1\n    levels: [{label: rack, "
        "count: 1}]\n    labels: {rack: r}\n",
        "cluster.yaml:5:14: generate[0].labels.rack: this label is set per "
        "node by `levels`; remove it from `labels`",
    ),
    (
        "generate:\n  - prefix: gpu\n    count: 1\n    levels:\n      - {label: "
        "zone, count: 2}\n      - {label: rack, values: [r1, r2]}\n",
        "cluster.yaml:6:9: generate[0].levels[1]: rack=r1 would be under both "
        "zone=zone-0 (generate[0]) and zone=zone-1; a domain belongs to one "
        "parent, so use `count` (its values start with the parent's value) or "
        "distinct `values`",
    ),
    (
        "generate:\n  - prefix: gpu\n    count: 1\n    levels:\n      - {label: "
        "zone, values: [Zone_A]}\n",
        "cluster.yaml:2:5: generate[0]: makes node name 'gpu-Zone_A-0', which "
        "is not a valid name: use at most 63 lowercase letters, digits and '-' "
        "in all (shorten `prefix` or the levels' `values`, and write the "
        "values in lowercase)",
    ),
    (
        "generate:\n  - prefix: gpu\n    count: 1\n    levels:\n      - {label: "
        "zone, values: [zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"
        "zzz]}\n      - {label: rack, count: 1}\n",
        "cluster.yaml:6:9: generate[0].levels[1]: makes the value of 'rack' "
        "invalid: 'zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz-r"
        "ack-0' is longer than 63 characters; give the coarser levels shorter "
        "`values`",
    ),
    (
        "generate:\n  - {prefix: gpu, count: 2}\n  - {prefix: gpu, count: 3}\n",
        "cluster.yaml:3:5: generate[1]: node name 'gpu-0' is already used by "
        "generate[0] (cluster.yaml:2:5); node names must be unique, rename one "
        "of them",
    ),
    (
        "nodes: [{name: gpu-0}]\ngenerate:\n  - {prefix: gpu, count: 2}\n",
        "cluster.yaml:3:5: generate[0]: node name 'gpu-0' is already used by "
        "nodes[0].name (cluster.yaml:1:10); node names must be unique, rename "
        "one of them",
    ),
    (
        "kind: Pod\n",
        "cluster.yaml:1:1: kind: 'Pod' is not a node list; use kind List, "
        "NodeList or Node, or write corral's format (a mapping with `nodes` "
        "and/or `generate`) or paste the output of `kubectl get nodes -o yaml`",
    ),
    (
        "kind: List\nitems: []\n",
        "cluster.yaml:2:1: items: the list has no nodes; a cluster needs at least one",
    ),
    (
        "kind: List\nitems:\n  - kind: Pod\n",
        "cluster.yaml:3:5: items[0].kind: 'Pod' is not a Node; list only nodes",
    ),
    (
        "kind: List\nitems:\n  - metadata: {labels: {}}\n",
        "cluster.yaml:3:5: items[0].metadata: `name` is missing; add it",
    ),
    (
        "kind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {pods: many}}\n",
        "cluster.yaml:3:24: status.allocatable.pods: invalid quantity 'many': "
        "write a number (4, 1.5, .5) with an optional suffix (Ki Mi Gi Ti Pi "
        "Ei KiB MiB GiB TiB PiB n u m k M G T P E B) or exponent (1e3)",
    ),
    (
        "kind: Node\nmetadata: {name: n1}\nspec: [1]\n",
        "cluster.yaml:3:1: spec: `spec` must be a mapping, not a list",
    ),
    (
        "kind: Node\n",
        "cluster.yaml: `metadata` (with the node's `name`) is missing; add it",
    ),
    (
        "kind: List\nitems:\n  - metadata: {name: n1}\n  - metadata: {name: n1}\n",
        "cluster.yaml:4:16: items[1].metadata.name: node name 'n1' is already "
        "used by items[0].metadata.name (cluster.yaml:3:16); node names must "
        "be unique, rename one of them",
    ),
]


@pytest.mark.parametrize(("text", "message"), ERRORS)
def test_rejections_say_where_and_what_to_do(text: str, message: str) -> None:
    assert _error(text) == message


# ------------------------------------------------------------------------------------- fuzz

_scalars = st.none() | st.booleans() | st.integers(-5, 30) | st.text(max_size=12)
_keys = st.sampled_from(
    [
        "nodes", "generate", "name", "labels", "taints", "allocatable", "key", "value",
        "effect", "prefix", "count", "levels", "label", "values", "kind", "items", "metadata",
        "spec", "status", "cpu", "memory", "nvidia.com/gpu", "NoSchedule", "zone", "List",
    ]
) | st.text(max_size=6)  # fmt: skip
_trees = st.recursive(
    _scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_keys, children, max_size=4),
    max_leaves=25,
)


def _parses_or_says_why(text: str) -> None:
    with contextlib.suppress(UserError):
        parse_cluster(text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=200))
def test_any_text_gives_a_cluster_or_a_user_error(text: str) -> None:
    _parses_or_says_why(text)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_trees)
def test_any_document_gives_a_cluster_or_a_user_error(tree: Any) -> None:
    _parses_or_says_why(yaml.safe_dump(tree))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_mutated_examples_give_a_cluster_or_a_user_error(data: st.DataObject) -> None:
    base = data.draw(st.sampled_from([RACKS, NODE_LIST]))
    position = data.draw(st.integers(0, len(base)))
    inserted = data.draw(st.text(alphabet=" -:{}[]\n0aZ/.,'\"#&*!", max_size=5))
    _parses_or_says_why(base[:position] + inserted + base[position + 1 :])


# --------------------------------------------------------------------------- example cluster


@pytest.fixture(scope="module")
def example() -> Cluster:
    path = REPO / "examples" / "clusters" / "example.yaml"
    return parse_cluster(path.read_text(), source=str(path))


@pytest.fixture(scope="module")
def state() -> Configs:
    return Configs(parse_bundle(read_bundle_directory(REPO / "examples" / "configs")[0]).items)


def _platforms(state: dict[ConfigType, Any]) -> list[tuple[str, str]]:
    pools = state[ConfigType.POOL]
    return [(pool, platform) for pool in pools for platform in pools[pool].get("platforms", {})]


def test_every_example_platform_has_nodes(example: Cluster, state: dict[ConfigType, Any]) -> None:
    platforms = _platforms(state)
    assert len(platforms) >= 15
    for pool, platform in platforms:
        resolved = resolve_platform(state, pool, platform)
        assert platform_nodes(resolved, example.nodes), (pool, platform)


def test_every_example_platform_accepts_a_task_with_the_defaults(
    example: Cluster, state: dict[ConfigType, Any]
) -> None:
    for pool, platform in _platforms(state):
        resolved = resolve_platform(state, pool, platform)
        validate_task(resolved, TaskRequest("task", ResourceRequest()), example.nodes)


def test_every_example_pool_accepts_a_task_on_its_default_platform(
    example: Cluster, state: dict[ConfigType, Any]
) -> None:
    pools = [name for name, pool in state[ConfigType.POOL].items() if pool.get("platforms")]
    assert {"default", "heterogeneous_pool", "shared_simulation_training_pool", "nvl72"} <= set(
        pools
    )
    for pool in pools:
        resolved = resolve_platform(state, pool)
        validate_task(resolved, TaskRequest("task", ResourceRequest()), example.nodes)


def test_the_example_nvl72_racks(example: Cluster) -> None:
    trays = [node for node in example.nodes if node.name.startswith("gb200-")]
    assert len(trays) == 90
    assert all(node.allocatable["nvidia.com/gpu"] == "4" for node in trays)
    racks: dict[tuple[str, ...], int] = defaultdict(int)
    for node in trays:
        racks[tuple(node.labels[label] for label in TOPOLOGY)] += 1
    assert set(racks.values()) == {18}
    zones = [zone for zone, *_ in racks]
    assert zones.count("zone-a") == 4
    assert zones.count("zone-b") == 1
    spines_a = {spine for zone, spine, *_ in racks if zone == "zone-a"}
    assert spines_a == {"zone-a-spine-0", "zone-a-spine-1"}


@pytest.mark.parametrize(
    "page", [REPO / "docs" / "cluster.md", REPO / "examples" / "clusters" / "README.md"]
)
def test_the_documented_examples_parse(page: Any) -> None:
    blocks = re.findall(r"```yaml\n(.*?)```", page.read_text(), re.DOTALL)
    assert blocks
    for block in blocks:
        assert parse_cluster(block).nodes


def test_a_cluster_file_nested_30000_deep_is_refused_not_a_crash() -> None:
    with pytest.raises(UserError) as refused:
        parse_cluster("nodes: " + "[" * 30_000, source="deep.yaml")
    assert refused.value.message == (
        "deep.yaml:1:71: lists and mappings are nested more than 64 levels deep here; "
        "flatten the document"
    )


def test_pods_and_extended_resources_are_allocatable_in_corrals_format() -> None:
    text = (
        "nodes:\n  - name: n1\n    allocatable: {pods: '110', nvidia.com/mig-1g.10gb: '7', "
        "rdma/ib: '1', hugepages-2Mi: 1Gi}\n"
    )
    (found,) = parse_cluster(text, source="cluster.yaml").nodes
    assert dict(found.allocatable) == {
        "pods": "110",
        "nvidia.com/mig-1g.10gb": "7",
        "rdma/ib": "1",
        "hugepages-2Mi": "1Gi",
    }
