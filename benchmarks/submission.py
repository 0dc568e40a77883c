"""Cost of a submission's pool-dependent work: checks, rendering and schema checks per task.

For workflows of 8, 32 and 100 tasks (one task group in the ``nvl72`` pool, two model
instances with a required clique each inside one required zone, against the example cluster's
127 nodes), time ``plan_workflow`` (topology, platforms, resource rules, security, the objects of
the group, the schema check of every object) in the server's process and, as the server runs it,
in a sandbox worker process (``plan_in_sandbox``: the same work plus sending the configs, spec
and nodes to the worker and the plan back), and separately the parse of the rendered spec.
Baseline, same run and input: ``yaml.safe_load`` of the same spec plus ``copy.deepcopy`` of the
resulting objects, i.e. reading the spec and copying what comes out.

    .venv/bin/python benchmarks/submission.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from corral.domain.cluster.description import parse_cluster
from corral.domain.configs.bundles import parse_bundle
from corral.domain.configs.snapshot import Configs
from corral.domain.configs.types import ConfigType
from corral.domain.platform.nodes import Node
from corral.domain.workflows.plan import Submitter, WorkflowPlan
from corral.domain.workflows.planner import plan_workflow
from corral.domain.workflows.spec_parser import parse_workflow_spec
from corral.files import read_bundle_directory
from corral.services.submission import plan_in_sandbox

REPO = Path(__file__).resolve().parent.parent
SIZES = (8, 32, 100)


def spec_text(tasks: int) -> str:
    """Two instances of ``tasks / 2`` shards; each instance in a clique, all in one zone."""
    lines = [
        "workflow:",
        f"  name: bench-{tasks}",
        "  resources:",
    ]
    for model in (1, 2):
        lines += [
            f"    model-{model}:",
            "      gpu: 1",  # 50 shards of an instance fit one 18-tray clique
            "      topology:",
            f"      - {{key: gpu-clique, group: model-{model}}}",
            "      - {key: zone, group: all}",
        ]
    lines += ["  groups:", "  - name: group1", "    tasks:"]
    for index in range(tasks):
        model = 1 + index * 2 // tasks
        lead = "true" if index == 0 else "false"
        lines.append(
            f"    - {{name: shard-{index}, lead: {lead}, resource: model-{model}, "
            f'image: busybox, command: [sh, -c, "echo {{{{workflow_id}}}}"]}}'
        )
    return "\n".join(lines) + "\n"


def median_ms(repeat: int, run: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    bundle = parse_bundle(read_bundle_directory(REPO / "examples" / "configs")[0])
    data: dict[ConfigType, Any] = {ctype: bundle.items.get(ctype, {}) for ctype in ConfigType}
    data[ConfigType.WORKFLOW] = {**(bundle.workflow or {}), "max_num_tasks": max(SIZES)}
    # no quota: 100 GPUs at once would be over the example pool's maximum of 72, which a
    # submission refuses before planning counts
    data[ConfigType.POOL] = {
        **data[ConfigType.POOL],
        "nvl72": {**data[ConfigType.POOL]["nvl72"], "resources": {"gpu": None}},
    }
    state = Configs(data)
    nodes = parse_cluster((REPO / "examples" / "clusters" / "example.yaml").read_text()).nodes
    print(f"{len(nodes)} nodes; median of {args.repeat} runs per figure")
    print(
        f"{'tasks':>6} {'parse ms':>9} {'plan ms':>9} {'per task ms':>12} {'sandboxed ms':>13} "
        f"{'baseline ms':>12}"
    )
    for size in SIZES:
        parse_ms, plan_ms, sandboxed_ms, baseline_ms = measure(size, state, nodes, args.repeat)
        print(
            f"{size:>6} {parse_ms:>9.1f} {plan_ms:>9.1f} {plan_ms / size:>12.2f} "
            f"{sandboxed_ms:>13.1f} {baseline_ms:>12.1f}"
        )


def measure(
    size: int, state: Configs, nodes: Sequence[Node], repeat: int
) -> tuple[float, float, float, float]:
    """Median ms of parsing, of planning in-process and in a sandbox worker, and of the
    baseline, for a workflow of ``size`` tasks."""
    text = spec_text(size)
    spec = parse_workflow_spec(text)
    submitter = Submitter(f"bench-{size}-1", uuid.uuid4().hex, "bench", "nvl72")

    def plan() -> WorkflowPlan:
        return plan_workflow(state, spec, submitter, nodes, lambda: uuid.uuid4().hex)

    def sandboxed() -> WorkflowPlan:
        return plan_in_sandbox(state, spec, submitter, nodes)

    objects = [manifest for group in plan().groups for manifest in group.manifests]
    sandboxed()  # the workers start once, with the server
    return (
        median_ms(repeat, lambda: parse_workflow_spec(text)),
        median_ms(repeat, plan),
        median_ms(repeat, sandboxed),
        median_ms(repeat, lambda: (yaml.safe_load(text), copy.deepcopy(objects))),
    )


if __name__ == "__main__":
    main()
