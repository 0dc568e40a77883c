"""``corral pool render`` and ``corral config show POOL --verbose`` end to end: the real command
against a real ``corral server --demo``.

One server per test; the independent CLI calls of a test run at the same time.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from tests.cli.results import failed, succeeded
from tests.conftest import LiveServer

A100_TOLERATION = {
    "key": "nvidia.com/gpu.product",
    "operator": "Equal",
    "value": "NVIDIA-A100",
    "effect": "NoSchedule",
}


def together(server: LiveServer, *calls: Sequence[str]) -> list[subprocess.CompletedProcess[str]]:
    """Run independent ``corral`` calls at the same time (each is a new process)."""
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        return list(pool.map(lambda args: server.cli(*args), calls))


def api(server: LiveServer, path: str, **params: Any) -> Any:
    response = httpx.get(
        f"{server.url}{path}", params=params, headers={"Authorization": f"Bearer {server.token}"}
    )
    response.raise_for_status()
    return response.json()


def table_row(text: str, *cells: str) -> bool:
    """Whether a table line of ``text`` holds exactly ``cells``, in order."""
    for line in text.splitlines():
        found = [cell.strip() for cell in re.split(r"[│┃|]", line)[1:-1]]
        if found[: len(cells)] == list(cells):
            return True
    return False


def test_pool_render(live_server: LiveServer) -> None:
    server = live_server
    as_json, as_text, with_gpus, default_platform, grouped = together(
        server,
        ["pool", "render", "heterogeneous_pool", "--platform", "a100_platform", "--format", "json"],
        ["pool", "render", "heterogeneous_pool", "--platform", "a100_platform"],
        [
            "pool",
            "render",
            "heterogeneous_pool",
            "-p",
            "a100_platform",
            "--set",
            "USER_GPU=8",
            "--set",
            "USER_CPU=4",
            "-t",
            "json",
        ],
        ["pool", "render", "heterogeneous_pool", "--format", "json"],
        ["pool", "render", "nvl72"],
    )
    body = json.loads(succeeded(as_json))
    assert body == api(server, "/api/pool/heterogeneous_pool/render", platform="a100_platform")
    assert (body["pool"], body["platform"]) == ("heterogeneous_pool", "a100_platform")
    assert body["node_selector"] == {"nvidia.com/gpu.product": "NVIDIA-A100"}
    assert body["tolerations"] == [A100_TOLERATION]
    user = body["pod_template"]["spec"]["containers"][0]
    assert user["resources"]["limits"] == {
        "cpu": 1,
        "memory": "1Gi",
        "nvidia.com/gpu": 0,
        "ephemeral-storage": "1Gi",
    }
    selector = next(p for p in body["provenance"] if p["path"][:2] == ["spec", "nodeSelector"])
    assert (selector["set_by"], selector["value"]) == ("a100", "NVIDIA-A100")

    text = succeeded(as_text)
    assert text.startswith("Pool heterogeneous_pool, platform a100_platform\n")
    for title in (
        "Pod template (rendered)",
        "Where each field comes from",
        "Default variables",
        "Node selector",
        "Tolerations",
        "Resource validation rules",
        "Group templates (rendered)",
    ):
        assert f"\n{title}\n" in text, title
    assert "  nodeSelector:\n    nvidia.com/gpu.product: NVIDIA-A100\n" in text  # YAML
    assert table_row(text, 'spec.nodeSelector["nvidia.com/gpu.product"]', "NVIDIA-A100", "a100", "")
    assert table_row(text, "spec.containers[0].resources.limits.cpu", "1", "default_user", "")
    assert table_row(text, "USER_MEMORY", "1Gi")
    assert table_row(text, "nvidia.com/gpu.product", "Equal", "NVIDIA-A100", "NoSchedule")
    assert table_row(text, "default_cpu", "LE", "{{USER_CPU}}", "{{K8_CPU}}")

    limits = json.loads(succeeded(with_gpus))["pod_template"]["spec"]["containers"][0]
    assert limits["resources"]["limits"]["nvidia.com/gpu"] == 8
    assert limits["resources"]["limits"]["cpu"] == 4

    assert json.loads(succeeded(default_platform))["platform"] == "l40s_platform"

    grouped_text = succeeded(grouped)
    assert "# from compute-domain\napiVersion: resource.nvidia.com/v1beta1\n" in grouped_text
    assert "kind: ComputeDomain" in grouped_text


def test_pool_render_errors(live_server: LiveServer) -> None:
    server = live_server
    no_pool, no_platform, bad_set = together(
        server,
        ["pool", "render", "nowhere"],
        ["pool", "render", "heterogeneous_pool", "--platform", "h100", "--format", "json"],
        ["pool", "render", "heterogeneous_pool", "--set", "bad"],
    )
    assert failed(no_pool) == "error: Pool nowhere not found."
    assert failed(no_platform) == (
        "error: Platform h100 does not exist in pool heterogeneous_pool! Its platforms: "
        "l40s_platform, a100_platform"
    )
    assert failed(bad_set).startswith("error: --set 'bad' must look like NAME=VALUE")
    elsewhere = server.cli(
        "pool", "render", "heterogeneous_pool", extra_env={"CORRAL_URL": "http://127.0.0.1:9"}
    )
    assert failed(elsewhere).startswith("error: cannot reach corral at http://127.0.0.1:9")
    usage = server.cli("pool", "render")
    assert usage.returncode == 2


def test_config_show_pool_verbose(live_server: LiveServer) -> None:
    server = live_server
    one, platform, labels, everything, plain, other_type, revision = together(
        server,
        ["config", "show", "POOL", "heterogeneous_pool", "--verbose", "--format", "json"],
        ["config", "show", "POOL", "heterogeneous_pool", "platforms", "a100_platform", "--verbose"],
        [
            "config",
            "show",
            "POOL",
            "heterogeneous_pool",
            "platforms",
            "a100_platform",
            "labels",
            "--verbose",
        ],
        ["config", "show", "POOL", "--verbose"],
        ["config", "show", "POOL", "heterogeneous_pool"],
        ["config", "show", "ROLE", "--verbose"],
        ["config", "show", "POOL:1", "--verbose"],
    )
    pool = json.loads(succeeded(one))
    assert pool == api(server, "/api/configs/pool/heterogeneous_pool", verbose="true")
    assert pool["parsed_pod_template"]["spec"]["containers"][1]["name"] == "osmo-ctrl"
    assert len(pool["parsed_resource_validations"]) == 6
    a100 = json.loads(succeeded(platform))
    assert a100 == pool["platforms"]["a100_platform"]
    assert a100["labels"] == {"nvidia.com/gpu.product": "NVIDIA-A100"}
    assert a100["tolerations"] == [A100_TOLERATION]
    assert a100["default_mounts"] == []
    assert succeeded(labels) == '{\n  "nvidia.com/gpu.product": "NVIDIA-A100"\n}\n'  # docs/cli.md
    assert json.loads(succeeded(everything))["pools"]["heterogeneous_pool"] == pool
    assert "parsed_pod_template" not in json.loads(succeeded(plain))
    assert failed(other_type) == "error: --verbose is only for POOL, not ROLE"
    assert failed(revision) == (
        "error: --verbose shows the current pools; it cannot be combined with POOL:REV"
    )


def test_pool_topology(live_server: LiveServer) -> None:
    as_json, as_text, flat = together(
        live_server,
        ["pool", "topology", "nvl72", "--format", "json"],
        ["pool", "topology", "nvl72"],
        ["pool", "topology", "heterogeneous_pool"],
    )
    assert json.loads(succeeded(as_json)) == api(live_server, "/api/pool/nvl72/topology")
    text = succeeded(as_text)
    assert table_row(text, "1", "zone", "topology.kubernetes.io/zone")
    assert table_row(text, "4", "gpu-clique", "nvidia.com/gpu-clique")
    assert succeeded(flat).strip() == (
        "Pool heterogeneous_pool has no topology keys; its workflows cannot use topology."
    )
