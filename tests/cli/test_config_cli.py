"""``corral config ...`` end to end: the real command against a real ``corral server --demo``.

Each test starts one server (1-2 s) and groups the assertions of one workflow, because every CLI
call is a new Python process.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from tests.cli.results import failed, succeeded
from tests.conftest import REPO, LiveServer

EXAMPLES = REPO / "examples" / "configs"

# Seed 001's A100 pod template, as OSMO's docs print it: the tolerations list is closed with
# `}` where `]` belongs.
A100_TEXT = """\
{
  "a100": {
    "spec": {
      "nodeSelector": {
        "nvidia.com/gpu.product": "NVIDIA-A100"
      },
      "tolerations": [
        {
          "key": "nvidia.com/gpu.product",
          "operator": "Equal",
          "value": "NVIDIA-A100",
          "effect": "NoSchedule"
        }
      }
    }
  }
}
"""

# Seed 004's role: OSMO's legacy {base, path, method} actions at the top level of the role.
SHARED_ROLE = {
    "name": "osmo-shared",
    "description": "Role for shared simulation training pool",
    "actions": [
        {"base": "http", "path": "/api/pool/shared_simulation_training_pool*", "method": "post"},
        {"base": "http", "path": "http:/api/profile/*", "method": "*"},
    ],
}


# ------------------------------------------------------------------------------- helpers


def config(
    server: LiveServer, *args: str, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return server.cli("config", *args, extra_env=extra_env)


def ok(server: LiveServer, *args: str) -> str:
    return succeeded(config(server, *args))


def error(server: LiveServer, *args: str, extra_env: dict[str, str] | None = None) -> str:
    return failed(config(server, *args, extra_env=extra_env))


def together(server: LiveServer, *calls: Sequence[str]) -> list[subprocess.CompletedProcess[str]]:
    """Run independent ``corral config`` calls at the same time (each is a new process)."""
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        return list(pool.map(lambda args: config(server, *args), calls))


def show(server: LiveServer, *args: str) -> Any:
    return json.loads(ok(server, "show", *args))


def api(server: LiveServer, path: str, **params: Any) -> Any:
    """Read the server's state directly (to check what a CLI call did, without another CLI)."""
    response = httpx.get(
        f"{server.url}{path}", params=params, headers={"Authorization": f"Bearer {server.token}"}
    )
    response.raise_for_status()
    return response.json()


def heads(server: LiveServer) -> dict[str, int]:
    return {h["config_type"]: h["revision"] for h in api(server, "/api/configs")["configs"]}


def write(server: LiveServer, name: str, content: Any) -> str:
    """Write a file in the CLI's working directory; returns its (relative) name."""
    path = server.home / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content if isinstance(content, str) else json.dumps(content, indent=2))
    return name


def position(text: str, needle: str) -> str:
    """``LINE:COL`` (1-based) of the first occurrence of ``needle`` in ``text``."""
    offset = text.index(needle)
    line = text.count("\n", 0, offset) + 1
    return f"{line}:{offset - text.rfind(chr(10), 0, offset)}"


def run_in(
    server: LiveServer, args: list[str], stdin: int, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """``corral config ARGS`` with ``stdin`` as its standard input (a pipe or a terminal)."""
    return subprocess.run(
        [sys.executable, "-m", "corral", "config", *args],
        stdin=stdin,
        capture_output=True,
        text=True,
        env={**server.env, **env},
        cwd=server.home,
        timeout=30,
    )


# --------------------------------------------------------------------------------- tests


def test_list_show_and_json_output(live_server: LiveServer) -> None:
    server = live_server
    (
        table,
        listed,
        pools,
        platforms,
        first_template,
        role,
        missing_item,
        missing_revision,
        bad_revision,
        history,
        diff,
    ) = together(
        server,
        ["list"],
        ["list", "--format-type", "json"],
        ["show", "POOL"],
        ["get", "pool", "default", "platforms"],
        ["show", "POOL", "default", "common_pod_template", "0"],
        ["show", "ROLE", "osmo-admin"],
        ["show", "POOL", "nope"],
        ["show", "POOL:999"],
        ["show", "POOL:x"],
        ["history", "POOL", "--format", "json"],
        ["diff", "POOL:1", "-t", "json"],
    )
    header = succeeded(table).splitlines()[1]
    for column in ("Config Type", "Revision", "Username", "Created At", "Description"):
        assert column in header
    current = json.loads(succeeded(listed))
    assert current == api(server, "/api/configs")
    for head in current["configs"]:
        assert head["config_type"] in table.stdout

    shown = json.loads(succeeded(pools))["pools"]
    example_pools = json.loads((EXAMPLES / "pools.json").read_text())["pools"]
    assert set(example_pools) <= set(shown)
    assert json.loads(succeeded(platforms)) == shown["default"]["platforms"]
    assert json.loads(succeeded(first_template)) == shown["default"]["common_pod_template"][0]
    # ROLE is a list of named objects: a name picks one of them.
    assert json.loads(succeeded(role))["name"] == "osmo-admin"

    assert failed(missing_item) == f"error: POOL has no item 'nope'. Items: {', '.join(shown)}"
    assert failed(missing_revision) == (
        "error: No config history entry found for type POOL at revision 999"
    )
    assert failed(bad_revision).startswith("error: Invalid revision 'x' in 'POOL:x'")

    entries = json.loads(succeeded(history))["configs"]
    assert {e["config_type"] for e in entries} == {"POOL"} and "data" in entries[0]
    assert set(json.loads(succeeded(diff))) >= {"first_data", "second_data"}


def test_update_history_diff_rollback_tag(live_server: LiveServer) -> None:
    server = live_server
    start = heads(server)["POOL"]

    # OSMO's form: a map holding the item, `config update POOL NAME --file F`.
    pool = {"backend": "default", "description": "first"}
    write(server, "cli-pool.json", {"cli-pool": pool})
    assert ok(server, "update", "POOL", "cli-pool", "--file", "cli-pool.json") == (
        f"POOL updated to revision {start + 1}\n"
    )
    first = show(server, "POOL", "cli-pool")
    assert {k: first[k] for k in pool} == pool and first["name"] == "cli-pool"
    assert ok(server, "update", "POOL", "cli-pool", "-f", "cli-pool.json") == (
        f"POOL unchanged (revision {start + 1})\n"
    )

    # Round trip: what `show` prints, edited, is what the server holds after the update.
    second = {**first, "description": "second"}
    write(server, "second.json", second)
    assert ok(
        server,
        "update",
        "POOL",
        "cli-pool",
        "--file",
        "second.json",
        "--description",
        "make it second",
        "--tags",
        "t1,t2",
    ) == (f"POOL updated to revision {start + 2}\n")
    assert api(server, "/api/configs/pool/cli-pool") == second

    (
        history,
        table,
        before_2000,
        after_2000,
        bad_time,
        diff,
        to_current,
        no_diff,
        mixed,
        spaced_diff,
        bare_number,
        three,
    ) = together(
        server,
        ["history", "POOL", "--format", "json", "--count", "2"],  # newest first
        ["history", "POOL", "--name", "cli-pool"],
        ["history", "POOL", "--created-before", "2000-01-01"],
        ["history", "POOL", "--name", "cli-pool", "--created-after", "2000-01-01T00:00:00"],
        ["history", "--at-timestamp", "yesterday"],
        ["diff", f"POOL:{start + 1}", f"POOL:{start + 2}"],
        ["diff", f"POOL:{start + 1}"],
        ["diff", f"POOL:{start + 2}"],
        ["diff", "POOL:1", "ROLE:1"],
        ["diff", "POOL", str(start + 1), str(start + 2)],  # issue 25: the spaced form
        ["diff", "2", "3"],
        ["diff", "POOL", "1", "2", "3"],
    )
    entries = json.loads(succeeded(history))["configs"]
    assert [(e["revision"], e["name"]) for e in entries] == [
        (start + 2, "cli-pool"),
        (start + 1, "cli-pool"),
    ]
    assert entries[0]["description"] == "make it second"
    assert entries[0]["tags"] == ["t1", "t2"]
    text = succeeded(table)
    assert "Config Type" in text and "Tags" in text
    rows = [line for line in text.splitlines() if "cli-pool" in line]
    assert len(rows) == 2 and "make it second" in rows[0] and "t1, t2" in rows[0]  # newest first
    assert "cli-pool" not in succeeded(before_2000)
    assert [line for line in succeeded(after_2000).splitlines() if "cli-pool" in line] == rows
    assert failed(bad_time).startswith("error: --at-timestamp: invalid time 'yesterday'")

    lines = succeeded(diff).splitlines()
    assert lines[:2] == [f"--- POOL:r{start + 1}", f"+++ POOL:r{start + 2}"]
    changed = [line for line in lines[2:] if line[:1] in "+-"]
    assert [line[0] + line[1:].strip() for line in changed] == [
        '-"description": "first",',
        '+"description": "second",',
    ]
    assert succeeded(to_current).splitlines()[:2] == [f"--- POOL:r{start + 1}", "+++ POOL:current"]
    assert succeeded(no_diff) == "No differences.\n"
    assert failed(mixed) == (
        "error: both sides of a diff must be the same config type, not POOL and ROLE"
    )
    assert succeeded(spaced_diff) == succeeded(diff)
    assert (
        failed(bare_number)
        == "error: '2' names no config type; write TYPE:2 (e.g. POOL:2) or TYPE 2"
    )
    assert failed(three) == "error: 'POOL 1 2 3' names 3 revisions; give at most 2, e.g. POOL:2"

    assert ok(server, "rollback", "POOL", str(start + 1)) == (
        f"POOL rolled back to r{start + 1}: now revision {start + 3}\n"
    )
    assert show(server, "POOL", "cli-pool") == first
    assert ok(server, "tag", "POOL", "--set", "good") == f"POOL r{start + 3} tags: good\n"
    assert ok(server, "tag", f"POOL:{start + 2}", "--delete", "t1") == (
        f"POOL r{start + 2} tags: t2\n"
    )

    assert ok(server, "delete", f"POOL:{start + 2}") == f"Deleted revision {start + 2} of POOL\n"
    deleted, current = together(
        server, ["show", f"POOL:{start + 2}"], ["delete", f"POOL:{start + 3}"]
    )
    assert failed(deleted).startswith("error: No config history entry found")
    assert failed(current) == (
        f"error: Cannot delete the current revision {start + 3} for config type POOL"
    )
    assert ok(server, "delete", "POOL", "cli-pool") == (
        f"POOL cli-pool deleted (revision {start + 4})\n"
    )


def test_errors_point_into_the_file(live_server: LiveServer) -> None:
    server = live_server
    before = api(server, "/api/configs")

    a100 = write(server, "a100_pod_template.json", A100_TEXT)
    after_item = A100_TEXT.index("}", A100_TEXT.index('"effect"'))  # closes the toleration
    wrong_brace = A100_TEXT.index("}", after_item + 1)  # where the list's ] belongs
    syntax_at = (
        f"{A100_TEXT.count(chr(10), 0, wrong_brace) + 1}:"
        f"{wrong_brace - A100_TEXT.rfind(chr(10), 0, wrong_brace)}"
    )

    # An unknown key: the line and column of that key, in the item form and the bulk form.
    item = write(
        server,
        "bad-pool.json",
        {"cli-bad": {"backend": "default", "platforms": {"gpu": {"host_network_allowd": False}}}},
    )
    item_at = position((server.home / item).read_text(), '"host_network_allowd"')
    bulk_text = "pools:\n  cli-bad:\n    backend: default\n    max_exec_timout: 1h\n"
    bulk = write(server, "bad-pools.yaml", bulk_text)
    # A reference to a missing template points at the list entry.
    ref = write(server, "ref.json", {"backend": "default", "common_pod_template": ["nope"]})
    ref_at = position((server.home / ref).read_text(), '"nope"')
    empty = server.home / "no-credentials"
    empty.mkdir()

    syntax, unknown_item, unknown_bulk, reference, missing_file, bad_type = together(
        server,
        ["update", "POD_TEMPLATE", "a100", "--file", a100],
        ["update", "POOL", "cli-bad", "--file", item],
        ["update", "POOL", "--file", bulk],
        ["update", "POOL", "cli-ref", "--file", ref],
        ["update", "POOL", "x", "--file", "missing.json"],
        ["update", "BOGUS", "--file", ref],
    )
    message = failed(syntax)
    assert message.startswith(f"{a100}:{syntax_at}: invalid JSON: ")
    assert "must be closed with ']'" in message
    message = failed(unknown_item)
    assert message.startswith(f"{item}:{item_at}: ")
    assert "unknown field 'host_network_allowd'" in message
    message = failed(unknown_bulk)
    assert message.startswith(f"{bulk}:{position(bulk_text, 'max_exec_timout')}: ")
    assert "unknown field 'max_exec_timout'" in message
    message = failed(reference)
    assert message.startswith(f"{ref}:{ref_at}: ") and "nope" in message
    assert failed(missing_file) == "error: missing.json: no such file"
    assert failed(bad_type).startswith("error: Unknown config type 'BOGUS'")

    assert error(server, "list", extra_env={"CORRAL_CONFIG_DIR": str(empty)}).startswith(
        "error: Missing bearer token"
    )
    assert api(server, "/api/configs") == before  # nothing was written


def test_update_without_file(live_server: LiveServer) -> None:
    server = live_server
    # No --file and no terminal: fail at once (stdin stays open, so waiting would time out).
    read_end, write_end = os.pipe()
    try:
        piped = run_in(server, ["update", "POOL"], read_end, {"EDITOR": "vi"})
    finally:
        os.close(read_end)
        os.close(write_end)
    assert (piped.returncode, piped.stdout) == (1, "")
    assert piped.stderr == "error: --file is required when not on a terminal\n"

    # On a terminal: the current item opens in $EDITOR (split like a shell, run without one).
    script = server.home / "editor.py"
    script.write_text(
        "import json, sys\n"
        "path = sys.argv[1]\n"
        "data = json.load(open(path))\n"
        "data['description'] = 'edited in the editor'\n"
        "json.dump(data, open(path, 'w'))\n"
    )
    editor = f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"
    start = heads(server)["POOL"]
    primary, terminal = os.openpty()
    try:
        edited = run_in(server, ["update", "POOL", "default"], terminal, {"EDITOR": editor})
        no_editor = run_in(
            server, ["update", "POOL", "default"], terminal, {"EDITOR": "", "VISUAL": ""}
        )
    finally:
        os.close(primary)
        os.close(terminal)
    assert edited.returncode == 0, edited.stderr
    assert edited.stdout == f"POOL updated to revision {start + 1}\n"
    assert api(server, "/api/configs/pool/default")["description"] == "edited in the editor"
    assert (no_editor.returncode, no_editor.stdout) == (1, "")
    assert no_editor.stderr.startswith("error: --file is required")


def test_set_role(live_server: LiveServer) -> None:
    server = live_server
    start = heads(server)["ROLE"]
    assert ok(server, "set", "ROLE", "osmo-team", "pool") == (
        f"ROLE updated to revision {start + 1}\n"
    )
    role = api(server, "/api/configs/role/osmo-team")
    assert {k: role[k] for k in ("name", "description", "policies", "immutable", "sync_mode")} == {
        "name": "osmo-team",
        "description": "Generated Role for pool team",
        "policies": [{"effect": "Allow", "actions": ["workflow:*"], "resources": ["pool/team*"]}],
        "immutable": False,
        "sync_mode": "import",
    }
    name = write(server, "role_config.json", SHARED_ROLE)
    no_prefix, with_field, no_backend, not_role, backend, shared = together(
        server,
        ["set", "ROLE", "team", "pool"],
        ["set", "ROLE", "osmo-team", "pool", "--field", "x"],
        ["set", "ROLE", "osmo-agent", "backend"],
        ["set", "POOL", "osmo-team", "pool"],
        [
            "set",
            "ROLE",
            "osmo-agent",
            "backend",
            "--field",
            "default",
            "--description",
            "Agent of the default backend",
        ],
        ["set", "ROLE", "osmo-shared", "-f", name],
    )
    assert failed(no_prefix) == 'error: Pool role name must start with "osmo-"'
    assert failed(with_field) == "error: Pool name must be specified in the role name"
    assert failed(no_backend) == "error: Backend name is required for backend role"
    assert failed(not_role).startswith("error: config set only sets roles (ROLE), not POOL")
    assert succeeded(backend).startswith("ROLE ")
    assert succeeded(shared).startswith("ROLE ")

    role = api(server, "/api/configs/role/osmo-agent")
    assert role["description"] == "Agent of the default backend"
    assert role["policies"] == [
        {"effect": "Allow", "actions": ["internal:Operator"], "resources": ["backend/default"]},
        {
            "effect": "Allow",
            "actions": ["pool:List", "config:Read"],
            "resources": ["config/backend"],
        },
    ]
    role = show(server, "ROLE", "osmo-shared")
    assert {k: role[k] for k in SHARED_ROLE} == SHARED_ROLE


def test_apply_directory(live_server: LiveServer) -> None:
    server = live_server
    write(
        server, "bundle/pod_templates.json", {"cli-tpl": {"spec": {"nodeSelector": {"cli": "yes"}}}}
    )
    write(
        server,
        "bundle/pools.yaml",
        "pools:\n  cli-pool:\n    backend: default\n    description: new\n"
        "    common_pod_template: [cli-tpl]\n",
    )
    before = api(server, "/api/configs")
    start = heads(server)

    planned = json.loads(ok(server, "apply", "-f", "bundle", "--dry-run", "--format", "json"))
    assert planned["dry_run"] is True and planned["revisions"] == []
    actions = {(i["config_type"], i["name"]): i["action"] for i in planned["items"]}
    assert actions[("POD_TEMPLATE", "cli-tpl")] == actions[("POOL", "cli-pool")] == "created"
    assert api(server, "/api/configs") == before

    # Both files in one write: the pool may name the template the other file defines.
    out = ok(server, "apply", "-f", "bundle", "--description", "cli bundle")
    assert "cli-tpl" in out and "cli-pool" in out and "created" in out
    assert "default_user" not in out  # only the bundle's items are listed
    assert out.splitlines()[-1] == (
        f"Revisions written: POD_TEMPLATE r{start['POD_TEMPLATE'] + 1}, POOL r{start['POOL'] + 1}"
    )
    assert api(server, "/api/configs/pod_template/cli-tpl") == {
        "spec": {"nodeSelector": {"cli": "yes"}}
    }
    after = api(server, "/api/configs")

    # A dry run of a change prints it and writes nothing.
    (server.home / "bundle/pools.yaml").write_text(
        "pools:\n  cli-pool:\n    backend: default\n    description: newer\n"
        "    common_pod_template: [cli-tpl]\n"
    )
    dry_run, in_use = together(
        server, ["apply", "-f", "bundle", "--dry-run"], ["delete", "POD_TEMPLATE", "cli-tpl"]
    )
    assert succeeded(dry_run).splitlines()[-3:] == [
        "POOL cli-pool:",
        '  description: "new" → "newer"',
        "Dry run: nothing was written.",
    ]
    assert failed(in_use) == (
        "error: Pod template cli-tpl is used in pools cli-pool; remove it from those pools first."
    )
    assert api(server, "/api/configs") == after

    # One bad file: nothing of the bundle is written, the error names the file and line.
    write(
        server,
        "bundle/pod_templates.json",
        {"cli-tpl2": {"spec": {"nodeSelector": {"cli": "two"}}}},
    )
    text = (
        "pools:\n  cli-pool:\n    backend: default\n"
        "    common_pod_template: [cli-tpl2, missing-tpl]\n"
    )
    (server.home / "bundle/pools.yaml").write_text(text)
    message = error(server, "apply", "-f", "bundle")
    assert message.startswith(f"bundle/pools.yaml:{position(text, 'missing-tpl')}: ")
    assert "missing-tpl" in message
    assert api(server, "/api/configs") == after


NO_PLATFORM_FIX = (
    "give the pool a platforms entry (for example platforms: {default: {}}) and set "
    "default_platform to it (docs/configs/pool.md)."
)


def test_a_pool_without_platforms_is_explained_on_write_and_at_submission(
    live_server: LiveServer,
) -> None:
    """Seed 000, step 3: a pool with only a backend is valid, but nothing can run in it."""
    server = live_server
    write(server, "bare.json", {"bare": {"backend": "default"}})
    written = config(server, "update", "POOL", "bare", "--file", "bare.json")
    assert written.returncode == 0, written.stderr
    assert written.stderr == (
        "WARNING: Pool bare has no platforms: every submission to it will fail until it has "
        f"one; {NO_PLATFORM_FIX}\n"
    )
    workflow = write(server, "w.yaml", "workflow:\n  name: w\n  tasks:\n  - {name: t, "
                     "image: busybox, command: [true]}\n")  # fmt: skip
    refused = server.cli("workflow", "submit", workflow, "--pool", "bare")
    assert failed(refused) == (
        f"error: Pool bare has no platforms, so no task can run in it. An admin must add one: "
        f"{NO_PLATFORM_FIX}"
    )
