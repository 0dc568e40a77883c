"""Cost of the template engine: rendering a task's pod, and checking node rules.

1. Rendering: for every platform of the example configs, resolve the platform once, then per
   task build the variable table, render the merged pod template and build the Pod. Baseline,
   same input and run: ``copy.deepcopy`` of the merged template (the least any renderer does).
2. Node rules: a task that fits no node (the worst case: every node is evaluated) against
   100, 1,000 and 10,000 nodes of one platform, with the four default rule sets. Baseline, same
   nodes: a plain Python loop comparing the request to each node's capacity (no templates).

    .venv/bin/python benchmarks/template_engine.py [--tasks 2000]
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import statistics
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

from corral.domain.configs.bundles import parse_bundle
from corral.domain.configs.snapshot import Configs
from corral.domain.configs.types import ConfigType
from corral.domain.platform.manifests import PodTask, build_pod, render_pod_template
from corral.domain.platform.nodes import Node, validation_capacity
from corral.domain.platform.resolved_pool import ResolvedPlatform, resolve_platform
from corral.domain.platform.task_validation import TaskRequest, validate_task
from corral.domain.platform.variables import (
    GroupIdentity,
    ResourceRequest,
    TaskIdentity,
    task_variables,
)
from corral.errors import UserError
from corral.files import read_bundle_directory

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "configs"
NODE_COUNTS = (100, 1_000, 10_000)
GROUP = GroupIdentity(
    workflow_id="bench-1",
    workflow_uuid="0" * 32,
    group_name="bench",
    group_uuid="1" * 32,
    submitted_by="bench",
    pool="default",
)


def _per_second(count: int, run: Callable[[], None]) -> float:
    start = time.perf_counter()
    for _ in range(count):
        run()
    return count / (time.perf_counter() - start)


def _platforms(state: Configs) -> list[ResolvedPlatform]:
    pools = state[ConfigType.POOL]
    return [
        resolve_platform(state, pool, name) for pool in pools for name in pools[pool]["platforms"]
    ]


def bench_rendering(state: Configs, tasks: int) -> None:
    platforms = _platforms(state)
    counter = iter(range(10**9))

    def render() -> None:
        resolved = platforms[next(counter) % len(platforms)]
        task = TaskIdentity(name="worker", uuid="2" * 32, platform=resolved.platform_name)
        variables = task_variables(ResourceRequest(gpu=1), resolved.default_variables, GROUP, task)
        template = render_pod_template(resolved.pod_template, variables)
        build_pod(PodTask(identity=task, image="busybox"), GROUP, template)

    def baseline() -> None:
        copy.deepcopy(platforms[next(counter) % len(platforms)].pod_template.value)

    rate = _per_second(tasks, render)
    base = _per_second(tasks, baseline)
    print(f"rendering ({len(platforms)} example platforms, {tasks} tasks)")
    print(f"  engine:   {rate:10,.0f} pods/s   ({1e6 / rate:7.1f} us per pod)")
    print(f"  baseline: {base:10,.0f} deep copies/s ({1e6 / base:7.1f} us per copy)")


def _nodes(count: int, *, distinct: bool) -> list[Node]:
    """Identical nodes (racks of one model), or every node with its own memory size."""
    return [
        Node(f"node-{i}", {}, (), _allocatable(512 + (i if distinct else 0))) for i in range(count)
    ]


def _allocatable(memory_gi: int) -> dict[str, str]:
    return {
        "cpu": "64",
        "memory": f"{memory_gi}Gi",
        "ephemeral-storage": "1Ti",
        "nvidia.com/gpu": "8",
    }


def bench_node_rules(state: Configs) -> None:
    resolved = resolve_platform(state, "default")
    too_big = TaskRequest("big", ResourceRequest(cpu=1, gpu=16, memory="1Gi", storage="1Gi"))
    print("node rules, a task that fits no node (every node evaluated)")
    for distinct in (False, True):
        for count in NODE_COUNTS:
            nodes = _nodes(count, distinct=distinct)
            times = []
            for _ in range(3):
                start = time.perf_counter()
                with contextlib.suppress(UserError):
                    validate_task(resolved, too_big, nodes)
                times.append(time.perf_counter() - start)
            baseline = _baseline_seconds(nodes)
            print(
                f"  {count:>6} {'distinct' if distinct else 'identical'} nodes: engine "
                f"{statistics.median(times) * 1000:8.1f} ms   baseline {baseline * 1000:6.1f} ms"
            )


def _baseline_seconds(nodes: list[Node]) -> float:
    """The same decision without templates: compare numbers per node."""
    from corral.domain.platform.nodes import Resources

    control = Resources(Decimal("0.25"), Decimal(2**30), Decimal(3 * 2**30))
    start = time.perf_counter()
    fits = False
    for node in nodes:
        capacity = validation_capacity(node, control)
        fits = fits or (capacity.cpu >= 1 and capacity.gpu >= 16 and capacity.memory >= 2**30)
    assert not fits
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=2000)
    args = parser.parse_args()
    state = Configs(parse_bundle(read_bundle_directory(EXAMPLES)[0]).items)
    bench_rendering(state, args.tasks)
    bench_node_rules(state)


if __name__ == "__main__":
    main()
