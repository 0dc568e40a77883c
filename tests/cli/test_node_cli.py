"""``corral node``: cordon, fail, heal, uncordon and the history, against a real server."""

from __future__ import annotations

import json
import re

from corral.domain.cluster.description import parse_cluster
from tests.cli.results import failed
from tests.conftest import REPO, LiveServer

AT = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"


def test_node_verbs_print_the_audited_change_and_the_history(live_server: LiveServer) -> None:
    text = (REPO / "examples" / "clusters" / "example.yaml").read_text()
    node = parse_cluster(text).nodes[0].name
    done = live_server.cli("node", "cordon", node, "--reason", "PSU swap")
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(
        rf"{AT} admin cordon {node}: 'PSU swap' \(now: Ready, cordoned\)\n", done.stdout
    ), done.stdout
    listed = live_server.cli("resource", "list", "--all").stdout.splitlines()
    assert f"{node} takes no new work: cordoned by admin: 'PSU swap'" in listed
    info = live_server.cli("resource", "info", node).stdout.splitlines()
    assert info[1] == "Takes no new work: cordoned by admin: 'PSU swap'"
    failed_tray = json.loads(
        live_server.cli("node", "fail", node, "--fabric", "--format", "json").stdout
    )
    assert failed_tray["after"]["fabric"] == "failed" and failed_tray["after"]["cordoned"]
    for verb in ("heal", "uncordon"):
        assert live_server.cli("node", verb, node).returncode == 0
    history = live_server.cli("node", "history", node).stdout.splitlines()
    assert [re.sub(AT, "AT", line) for line in history] == [
        f"AT admin uncordon {node} (now: Ready)",
        f"AT admin heal {node} (now: Ready, cordoned)",
        f"AT admin fail {node} (now: Ready, cordoned, fabric failed)",
        f"AT admin cordon {node}: 'PSU swap' (now: Ready, cordoned)",
    ]
    unknown = live_server.cli("node", "cordon", "no-such-node")
    assert failed(unknown) == (
        "error: Node no-such-node is not a node of the embedded cluster or of a Kubernetes "
        "backend; `corral resource list` "
        "lists the nodes."
    )
