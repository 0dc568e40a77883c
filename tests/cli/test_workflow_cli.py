"""``corral workflow submit/validate/query/list`` end to end: the real command against a real
``corral server --demo`` (example configs, example cluster)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.cli.results import failed, succeeded
from tests.cli.test_pool_cli import table_row, together
from tests.conftest import REPO, LiveServer

EXAMPLES = REPO / "examples" / "workflows"
ONE_ZONE = str(EXAMPLES / "nvl72-one-zone.yaml")
T = "osmo-pool-default-nvl72-topology"


def manifests_of(text: str) -> list[dict[str, Any]]:
    """The YAML documents a text dry run printed (its ``#`` lines are comments)."""
    return [doc for doc in yaml.safe_load_all(text) if doc]


def test_dry_run_prints_every_object_per_group_in_creation_order(live_server: LiveServer) -> None:
    as_text, as_json = together(
        live_server,
        ["workflow", "submit", ONE_ZONE, "--pool", "nvl72", "--dry-run"],
        ["workflow", "submit", ONE_ZONE, "--pool", "nvl72", "--dry-run", "--format", "json"],
    )
    text = succeeded(as_text)
    assert text.startswith("# Workflow one-zone-two-cliques-1 (dry run: nothing was stored)\n")
    assert "# group group1 (11 objects, in creation order)" in text
    objects = manifests_of(text)
    assert [o["kind"] for o in objects] == ["ComputeDomain", "PodGroup", *["Pod"] * 8, "Service"]
    assert objects[1]["spec"]["topologyConstraint"] == {
        "topology": T,
        "requiredTopologyLevel": "topology.kubernetes.io/zone",
    }
    document = json.loads(succeeded(as_json))
    [group] = document["groups"]
    assert [m["kind"] for m in group["manifests"]] == [o["kind"] for o in objects]
    assert [s["name"] for s in group["manifests"][1]["spec"]["subGroups"]] == [
        "workflow-group-model-1-group",
        "workflow-group-model-2-group",
    ]
    listed = json.loads(succeeded(live_server.cli("workflow", "list", "--format", "json")))
    assert listed == {"workflows": [], "more_entries": False}


def found_status(query_text: str) -> str:
    """The workflow status a text query printed."""
    line = next(line for line in query_text.splitlines() if line.startswith("Status      : "))
    return line.removeprefix("Status      : ")


def test_submit_query_and_list(live_server: LiveServer) -> None:
    submitted = succeeded(live_server.cli("workflow", "submit", ONE_ZONE, "--pool", "nvl72"))
    assert submitted.splitlines() == [
        "Workflow submit successful.",
        "Workflow ID        - one-zone-two-cliques-1",
        f"Workflow Overview  - {live_server.url}/ui/workflows/one-zone-two-cliques-1",
    ]
    query, query_json, listed, validated = together(
        live_server,
        ["workflow", "query", "one-zone-two-cliques-1"],
        ["workflow", "query", "one-zone-two-cliques-1", "--format", "json"],
        ["workflow", "list"],
        ["workflow", "validate", ONE_ZONE, "--pool", "nvl72"],
    )
    text = succeeded(query)
    assert "Workflow ID : one-zone-two-cliques-1" in text
    status = found_status(text)
    assert status in ("PENDING", "RUNNING", "COMPLETED")
    # The lifecycle controller may have moved the statuses on already.
    assert table_row(text, "group1")
    assert table_row(text, "model1-shard1", "group1")
    assert table_row(text, "model2-shard4", "group1")
    found = json.loads(succeeded(query_json))
    assert [t["name"] for t in found["groups"][0]["tasks"]][:2] == [
        "model1-shard1",
        "model1-shard2",
    ]
    listed_text = succeeded(listed)
    assert any(
        table_row(listed_text, "one-zone-two-cliques-1", "nvl72", s, "NORMAL")
        for s in ("PENDING", "RUNNING", "COMPLETED")
    )
    assert succeeded(validated) == "Workflow validation succeeded.\n"


def test_pool_comes_from_the_default_pool_else_fails_with_the_choices(
    live_server: LiveServer,
) -> None:
    file = str(EXAMPLES / "nvl72-single-rack.yaml")
    message = failed(live_server.cli("workflow", "submit", file, "--dry-run"))
    assert message.startswith("error: No default pool set. Set one with `corral profile set-pool")
    assert "nvl72" in message
    response = httpx.put(
        f"{live_server.url}/api/profile/settings",
        json={"pool": "nvl72"},
        headers={"Authorization": f"Bearer {live_server.token}"},
    )
    assert response.status_code == 200, response.text
    dry = succeeded(live_server.cli("workflow", "submit", file, "--dry-run"))
    assert "pool nvl72, namespace default, priority NORMAL" in dry


def test_errors_point_into_the_file(live_server: LiveServer) -> None:
    broken = live_server.home / "broken.yaml"
    broken.write_text(
        "workflow:\n  name: broken\n  tasks:\n  - name: a\n    image: busybox\n    command: []\n"
    )
    missing, bad_spec, too_big = together(
        live_server,
        ["workflow", "submit", "nope.yaml", "--pool", "nvl72"],
        ["workflow", "submit", str(broken), "--pool", "nvl72"],
        [
            "workflow",
            "submit",
            str(EXAMPLES / "nvl72-single-rack.yaml"),
            "--pool",
            "heterogeneous_pool",
        ],
    )
    assert failed(missing) == "error: The file/path nope.yaml does not exist!"
    assert failed(bad_spec).startswith(f"{broken}:6:5: workflow.tasks[0].command: ")
    message = failed(too_big)
    assert "Topology key" in message and "heterogeneous_pool" in message


def test_a_pool_that_is_not_yours_names_the_pools_you_may_use(live_server: LiveServer) -> None:
    server = live_server
    admin = {"Authorization": f"Bearer {server.token}"}
    usable = httpx.get(f"{server.url}/api/profile/settings", headers=admin).json()["pools"]
    refused = server.cli("workflow", "submit", ONE_ZONE, "--pool", "nvl27")
    assert failed(refused) == (
        f"error: Pool nvl27 not found. The pools you may use: {', '.join(usable)}."
    )


def test_unused_set_names_and_low_priority_are_warned_about(live_server: LiveServer) -> None:
    """Issue 14: a misspelled --set was silently ignored, and LOW promised preemption that the
    embedded backend does not do."""
    done = live_server.cli(
        "workflow",
        "validate",
        str(EXAMPLES / "compute-domain.yaml"),
        "--pool",
        "nvl72",
        "--set",
        "trays=4",
        "--set",
        "trayz=8",
        "--priority",
        "LOW",
    )
    assert (done.returncode, done.stdout) == (0, "Workflow validation succeeded.\n")
    assert done.stderr == (
        "WARNING: --set trayz: the workflow file never uses this name, so setting it changes "
        "nothing (check its spelling).\n"
        "WARNING: LOW priority: the workflow does not count against the pool's GPU guarantee "
        "and runs on GPUs others leave idle; HIGH and NORMAL work may preempt it (and reclaim "
        "what its pool borrows above its guarantee).\n"
    )


def test_a_dry_run_of_what_could_never_run_prints_the_objects_then_the_verdict(
    live_server: LiveServer, tmp_path: Path
) -> None:
    """Issue 25, item 18: it used to refuse without showing what it would have made."""
    file = tmp_path / "big.yaml"  # 19 tasks of 4 GPUs: 76, over nvl72's maximum of 72
    task = "    - {{name: t{}, image: busybox, command: [sleep, '1'], resource: big, lead: {}}}\n"
    tasks = "".join(task.format(i, i == 0) for i in range(19))
    file.write_text(
        f"workflow:\n  name: big\n  groups:\n  - name: g\n    tasks:\n{tasks}"
        "  resources:\n    big: {gpu: 4, cpu: 1, memory: 1Gi, storage: 1Gi}\n"
    )
    shown = live_server.cli(
        "workflow", "submit", str(file), "--pool", "nvl72", "--dry-run", "--priority", "LOW"
    )
    assert shown.returncode == 1, shown.stderr
    kinds = [o["kind"] for o in manifests_of(shown.stdout)]
    assert kinds == ["ComputeDomain", "PodGroup", *["Pod"] * 19, "Service"]
    assert shown.stderr.splitlines()[-1] == (
        "error: Group g needs 76 GPUs at once, more than pool nvl72's maximum of 72: it could "
        "never run. Use fewer GPUs in the group, or ask an admin to raise the pool's "
        "resources.gpu.maximum. (a submission would be refused)"
    )
    refused = live_server.cli("workflow", "submit", str(file), "--pool", "nvl72")
    assert refused.returncode == 1 and refused.stdout == ""
