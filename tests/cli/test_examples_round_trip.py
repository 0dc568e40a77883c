"""Every example config: `config update` then `config show` gives equivalent JSON."""

from __future__ import annotations

import json
from pathlib import Path

from tests.api.test_config_api import BUNDLE_FILES, is_deep_subset
from tests.conftest import REPO, LiveServer, start_server

EXAMPLES = REPO / "examples" / "configs"


def test_update_then_show_round_trips_every_example(tmp_path: Path) -> None:
    live_server = start_server(tmp_path)  # without --demo: every update really writes
    try:
        _round_trip_all(live_server)
    finally:
        live_server.stop()


def _round_trip_all(live_server: LiveServer) -> None:
    for filename, ctype in [*BUNDLE_FILES.items(), ("workflow.json", None)]:
        type_name = ctype.value if ctype else "WORKFLOW"
        path = EXAMPLES / filename
        updated = live_server.cli("config", "update", type_name, "--file", str(path))
        assert updated.returncode == 0, updated.stderr
        # The example workflow config is the built-in default, so writing it changes nothing.
        expected = "WORKFLOW unchanged (revision 1)" if ctype is None else f"{type_name} updated"
        assert updated.stdout.startswith(expected), updated.stdout
        shown = live_server.cli("config", "show", type_name)
        assert shown.returncode == 0, shown.stderr
        given, current = json.loads(path.read_text()), json.loads(shown.stdout)
        if ctype is not None and ctype.bundle_key in given:
            given = given[ctype.bundle_key]
        if type_name == "ROLE":
            current = {role["name"]: role for role in current}
        elif type_name == "BACKEND":
            current = {backend["name"]: backend for backend in current["backends"]}
        elif type_name == "POOL":
            current = current["pools"]
        assert is_deep_subset(given, current), filename
