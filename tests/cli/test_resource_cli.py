# ruff: noqa: E501 - the expected tables are as wide as the real ones
"""``corral pool list`` (OSMO's quota table) and ``corral resource list|info`` against a real
``corral server --demo``: the exact text, the JSON, and the empty and error cases."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from corral.cli.client import Client
from tests.cli.results import failed, succeeded
from tests.conftest import LiveServer

JETSON = "robotics-inference-jetson"

POOL_USED = """\
Pool                        Description                                            Status   GPU [#]
                                                                                            Quota Used   Quota Limit   Total Usage   Total Capacity   Healthy   Maximum   Borrowed   Preempted 24h
==================================================================================================================================================================================================
my-pool                     OSMO's topology example, on the GB200 racks of nvl72   ONLINE   0            360           0             360              360       360       0          0
robotics-inference-jetson   NVIDIA Jetsons pool for model inference                ONLINE   0            4             0             4                4         4         0          0
==================================================================================================================================================================================================
                                                                                            0            364           0             364              364       364       0          0

Quota Limit is each pool's guarantee: its HIGH and NORMAL work runs within it. Maximum caps all
of its work; LOW work (--priority LOW) may borrow idle GPUs above the guarantee, up to the
maximum (Borrowed). A pool without a guarantee or maximum shows its capacity there. Healthy
counts the GPUs of nodes that take new work (`corral resource list` says why the others do not).
"""
POOL_FREE = """\
Pool                        Status   GPU [#]
                                     Quota Free   Total Free
============================================================
robotics-inference-jetson   ONLINE   4            4
============================================================
                                     4            4
"""
RESOURCES_USED = """\
Node     Pool                        Platform               Type       Storage [Gi]   CPU [#]   Memory [Gi]   GPU [#]
=====================================================================================================================
thor-0   robotics-inference-jetson   jetson-thor-platform   RESERVED   0/900          0/14      0/120         0/1
thor-1   robotics-inference-jetson   jetson-thor-platform   RESERVED   0/900          0/14      0/120         0/1
thor-2   robotics-inference-jetson   jetson-thor-platform   RESERVED   0/900          0/14      0/120         0/1
thor-3   robotics-inference-jetson   jetson-thor-platform   RESERVED   0/900          0/14      0/120         0/1
=====================================================================================================================
                                                                       0/3600         0/56      0/480         0/4

robotics-inference-jetson: GPUs guaranteed none, maximum none; 0 in use, 0 borrowed above the guarantee, 0 preempted in the last 24 h
"""
RESOURCES_FREE_TAIL = """\
thor-3   robotics-inference-jetson   jetson-thor-platform   RESERVED   900            14        120           1
=====================================================================================================================
                                                                       3600           56        480           4

robotics-inference-jetson: GPUs guaranteed none, maximum none; 0 in use, 0 borrowed above the guarantee, 0 preempted in the last 24 h
"""
SHARED_ROWS = """\
a100-0   heterogeneous_pool                a100_platform   SHARED   0/1800         0/64      0/500         0/4
         shared_simulation_training_pool   a100_platform            0/1800         0/64      0/500         0/4
"""
INFO = """\
Node thor-0 (RESERVED)

Pool                        Platform
================================================
robotics-inference-jetson   jetson-thor-platform

Resource       Used   Capacity   Free
=====================================
Storage [Gi]   0      900        900
CPU [#]        0      14         14
Memory [Gi]    0      120        120
GPU [#]        0      1          1

Platform jetson-thor-platform of pool robotics-inference-jetson
  Host network allowed: no
  Privileged allowed:   no
  Default mounts:       -
  Allowed mounts:       -
"""


def together(server: LiveServer, *calls: Sequence[str]) -> list[subprocess.CompletedProcess[str]]:
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        return list(pool.map(lambda args: server.cli(*args), calls))


def api(server: LiveServer, path: str, **params: Any) -> Any:
    response = httpx.get(
        f"{server.url}{path}", params=params, headers={"Authorization": f"Bearer {server.token}"}
    )
    response.raise_for_status()
    return response.json()


def test_pool_list_and_resource_views(live_server: LiveServer) -> None:
    server = live_server
    admin = {"Authorization": f"Bearer {server.token}"}
    nowhere = {"spec": {"nodeSelector": {"example.com/rack": "none"}}}
    pool = {"backend": "default", "default_platform": "x", "platforms": {"x": {}}}
    pool["common_pod_template"] = ["default_ctrl", "default_user", "nowhere"]
    pool["common_default_variables"] = {"USER_CPU": 1, "USER_GPU": 0}
    pool["common_default_variables"] |= {"USER_MEMORY": "1Gi", "USER_STORAGE": "1Gi"}
    for path, body in (("pod_template/nowhere", nowhere), ("pool/nowhere-pool", pool)):
        made = httpx.put(f"{server.url}/api/configs/{path}", json={"configs": body}, headers=admin)
        assert made.status_code == 200, made.text
    (
        used,
        free,
        as_json,
        missing,
        partly,
        resources,
        resources_free,
        resources_json,
        shared,
        empty,
        info,
        info_json,
    ) = together(
        server,
        ["pool", "list", "-p", JETSON, "--pool", "my-pool", "--wide"],
        ["pool", "list", "-p", JETSON, "--mode", "free"],
        ["pool", "list", "-p", JETSON, "--format", "json"],
        ["pool", "list", "-p", "nope", "-p", "other"],
        ["pool", "list", "-p", JETSON, "-p", "nope", "-m", "free"],
        ["resource", "list", "-p", JETSON],
        ["resource", "list", "--pool", JETSON, "--mode", "free"],
        ["resource", "list", "-p", JETSON, "-pl", "jetson-thor-platform", "--format", "json"],
        ["resource", "list", "-p", "heterogeneous_pool", "-p", "shared_simulation_training_pool"],
        ["resource", "list", "-p", "nowhere-pool"],
        ["resource", "info", "thor-0"],
        ["resource", "info", "a100-0", "-p", "heterogeneous_pool", "--format", "json"],
    )
    assert succeeded(used) == POOL_USED
    assert succeeded(free) == POOL_FREE
    body = json.loads(succeeded(as_json))
    assert body == api(server, "/api/pool_quota", pools=[JETSON])
    assert body["node_sets"][0]["pools"][0]["resource_usage"]["total_capacity"] == "4"
    # issue 14: an error on stderr with exit 1 (it was printed on stdout with exit 0)
    yours = api(server, "/api/profile/settings")["pools"]
    assert len(yours) == 11  # the demo's ten and nowhere-pool: the error names ten of them
    usable = f"{', '.join(yours[:10])} and 1 more (corral pool list shows them)"
    assert failed(missing) == (
        f"error: Pools nope, other not found, or not yours to use; pools you may use: {usable}"
    )
    assert succeeded(partly) == POOL_FREE
    assert partly.stderr == (
        f"WARNING: Pool nope not found, or not yours to use; pools you may use: {usable}\n"
    )

    assert succeeded(resources) == RESOURCES_USED
    assert succeeded(resources_free).endswith(RESOURCES_FREE_TAIL)
    assert json.loads(succeeded(resources_json)) == api(
        server, "/api/resources", pools=[JETSON], platforms=["jetson-thor-platform"]
    )
    assert SHARED_ROWS in succeeded(shared)
    assert succeeded(empty) == "There are no available resources.\n"
    assert succeeded(info) == INFO
    found = json.loads(succeeded(info_json))
    assert [p["pool"] for p in found["pools"]] == ["heterogeneous_pool"]
    assert found["type"] == "SHARED"


def test_resource_errors(live_server: LiveServer) -> None:
    unknown_pool, unknown_node, unknown_platform = together(
        live_server,
        ["resource", "list", "-p", "nope"],
        ["resource", "info", "nope"],
        ["resource", "list", "-p", JETSON, "--platform", "h100"],
    )
    assert failed(unknown_pool) == (
        "error: Pool nope does not exist! `corral pool list` shows the pools you may use."
    )
    assert failed(unknown_node) == (
        "error: Node nope does not exist! `corral resource list --all` lists the nodes."
    )
    assert failed(unknown_platform) == (
        "error: Platform h100 does not exist in the pools listed! Their platforms: "
        "jetson-thor-platform"
    )


def test_pool_and_resource_lists_say_which_page_they_show(live_server: LiveServer) -> None:
    server = live_server
    pools = api(server, "/api/pool_quota", limit=1)["page"]["total"]
    with_nodes = api(server, "/api/resources", limit=1)["page"]["total"]
    first, last, past, nodes, as_json = together(
        server,
        ["pool", "list", "--limit", "2"],
        ["pool", "list", "--offset", str(pools - 1)],
        ["pool", "list", "--offset", str(pools + 5)],
        ["resource", "list", "--limit", "1", "--mode", "free"],
        ["pool", "list", "--limit", "2", "--format", "json"],
    )
    assert succeeded(first).endswith(
        f"\nPools 1 to 2 of {pools}; corral pool list --offset 2 --limit 2 shows the next 2.\n"
    )
    assert succeeded(last).endswith(f"\nPools {pools} to {pools} of {pools}.\n")
    assert succeeded(past) == (
        f"No pools available\nNo pools from {pools + 6} on: there are {pools}.\n"
    )
    assert succeeded(nodes).endswith(
        f"\n\nPools 1 to 1 of {with_nodes}; corral resource list --offset 1 --limit 1 "
        "shows the next 1.\n"
    )
    body = json.loads(succeeded(as_json))
    assert body == api(server, "/api/pool_quota", limit=2)
    assert body["page"] == {"offset": 0, "limit": 2, "total": pools, "next_offset": 2}


def test_an_error_names_ten_usable_pools_and_counts_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    profile = {"pools": [f"team-{index:02d}" for index in range(25)]}
    monkeypatch.setattr(Client, "get", lambda self, path, **params: profile)
    assert Client("http://127.0.0.1:1", token="t").usable_pools_text() == (
        "pools you may use: team-00, team-01, team-02, team-03, team-04, team-05, team-06, "
        "team-07, team-08, team-09 and 15 more (corral pool list shows them)"
    )
