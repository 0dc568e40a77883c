"""``corral workflow ...``: submit, dry-run, validate, query, list, cancel, logs and explain.

The pool is ``--pool``, else the user's default pool, else the only pool they may use
(OSMO's order). The server renders and checks everything; errors point into the file.
"""

from __future__ import annotations

import base64
import re
import sys
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

import typer

from corral.cli.client import ApiError, Client
from corral.cli.log_follow import LogFollower
from corral.cli.output import (
    FormatOption,
    OutputFormat,
    echo,
    fail,
    handle_errors,
    local_time,
    print_json,
    print_table,
    print_warnings,
)
from corral.cli.workflow_text import (
    dashboard_page,
    print_dry_run,
    print_manifests,
    print_workflow,
)
from corral.domain.formats.documents import parse_document
from corral.errors import CorralError

app = typer.Typer(rich_markup_mode=None, help="Submit and inspect workflows.", no_args_is_help=True)

FileArgument = Annotated[
    Path, typer.Argument(metavar="FILE", help="The workflow file (YAML), or - for stdin.")
]
PoolOption = Annotated[
    str | None,
    typer.Option(
        "--pool", "-p", help="The pool [default: your default pool, else the only one you may use]."
    ),
]
SetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set", metavar="NAME=VALUE", help="A template variable; numbers stay numbers (repeat)."
    ),
]
SetStringOption = Annotated[
    list[str] | None,
    typer.Option("--set-string", metavar="NAME=VALUE", help="A template variable, as text."),
]
PriorityOption = Annotated[
    str, typer.Option("--priority", help="HIGH, NORMAL or LOW (case-insensitive).")
]


@app.command()
@handle_errors
def submit(
    file: FileArgument,
    pool: PoolOption = None,
    set_values: SetOption = None,
    set_strings: SetStringOption = None,
    priority: PriorityOption = "NORMAL",
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Run every check and print every object that would be created, per group, "
            "in creation order; store nothing.",
        ),
    ] = False,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Submit a workflow to a pool."""
    client = Client()
    chosen = pool or default_pool(client)
    found = _post(client, file, chosen, set_values, set_strings, priority, dry_run=dry_run)
    if output is OutputFormat.json:
        print_json(found)
    elif dry_run:
        print_dry_run(found)
    else:
        echo("Workflow submit successful.")
        echo(f"Workflow ID        - {found['name']}")
        echo(f"Workflow Overview  - {dashboard_page(client, found)}")
    print_warnings(found)
    if found.get("could_never_run"):  # a dry run printed the objects; this is the verdict
        fail(f"{found['could_never_run']} (a submission would be refused)")


@app.command()
@handle_errors
def validate(
    file: FileArgument,
    pool: PoolOption = None,
    set_values: SetOption = None,
    set_strings: SetStringOption = None,
    priority: PriorityOption = "NORMAL",
    output: FormatOption = OutputFormat.text,
) -> None:
    """Run every check of a submission without submitting."""
    client = Client()
    chosen = pool or default_pool(client)
    found = _post(client, file, chosen, set_values, set_strings, priority, validation_only=True)
    if output is OutputFormat.json:
        print_json(found)
        return
    echo(found["logs"])
    print_warnings(found)


@app.command()
@handle_errors
def restart(
    workflow_id: Annotated[str, typer.Argument(metavar="ID", help="The failed workflow.")],
    pool: Annotated[
        str | None,
        typer.Option("--pool", "-p", help="The pool [default: the failed workflow's pool]."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print what would run; store nothing.")
    ] = False,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Run the failed and unfinished groups of a failed workflow again, as a new workflow."""
    client = Client()
    quoted = quote(workflow_id, safe="")
    chosen = pool or str(client.get(f"/api/workflow/{quoted}")["pool"])
    params = {"dry_run": "true"} if dry_run else {}
    found = client.submit(
        f"/api/pool/{quote(chosen, safe='')}/workflow/{quoted}/restart", params=params
    )
    if output is OutputFormat.json:
        print_json(found)
    elif dry_run:
        print_dry_run(found)
    else:
        echo("Workflow restart successful.")
        echo(f"Workflow ID        - {found['name']}")
        echo(f"Restarted from     - {workflow_id}")
        echo(f"Workflow Overview  - {dashboard_page(client, found)}")


@app.command()
@handle_errors
def query(
    workflow_id: Annotated[str, typer.Argument(metavar="ID", help="The workflow id.")],
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Also print every group's manifests.")
    ] = False,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Show a workflow: its status, groups and tasks."""
    client = Client()
    found = client.get(f"/api/workflow/{quote(workflow_id, safe='')}", verbose=verbose or None)
    if output is OutputFormat.json:
        print_json(found)
        return
    print_workflow(found, client)
    if verbose:
        for group in found["groups"]:
            echo()
            echo(f"# group {group['name']} ({group['uuid']})")
            print_manifests(group["manifests"])


@app.command("list")
@handle_errors
def list_workflows(
    all_users: Annotated[
        bool, typer.Option("--all-users", help="Everyone's workflows, not only yours.")
    ] = False,
    pool: Annotated[str | None, typer.Option("--pool", "-p", help="Only this pool.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many (newest first).")] = 100,
    output: FormatOption = OutputFormat.text,
) -> None:
    """List workflows, newest first."""
    found = Client().get(
        "/api/workflow",
        all_users=all_users or None,
        pools=[pool] if pool else None,
        limit=limit,
    )
    if output is OutputFormat.json:
        print_json(found)
        return
    if not found["workflows"]:
        echo("No workflows.")
        return
    rows = [
        [
            w["name"],
            w["pool"],
            w["status"],
            w["priority"],
            w["user"],
            local_time(w["submit_time"]),
        ]
        for w in found["workflows"]
    ]
    print_table(["Workflow ID", "Pool", "Status", "Priority", "Submitted by", "Submitted"], rows)


IdArgument = Annotated[str, typer.Argument(metavar="ID", help="The workflow id.")]


@app.command()
@handle_errors
def cancel(
    workflow_id: IdArgument,
    message: Annotated[
        str | None,
        typer.Option("--message", "-m", help="Why: every task of the workflow ends with it."),
    ] = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Cancel a workflow: its running tasks are stopped, it ends FAILED_CANCELED."""
    params = {"message": message} if message else None
    found = Client().request("POST", f"{_path(workflow_id)}/cancel", params=params)
    if output is OutputFormat.json:
        print_json(found)
        return
    echo(found["message"])


@app.command()
@handle_errors
def logs(
    workflow_id: IdArgument,
    task: Annotated[
        str | None, typer.Option("--task", help="Only this task [default: every task].")
    ] = None,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow",
            "-f",
            help="Keep printing as the logs grow, until the workflow ends (several tasks: each "
            "line prefixed with its task).",
        ),
    ] = False,
    retry_id: Annotated[
        int | None,
        typer.Option(
            "--retry-id",
            min=0,
            help="That attempt of the task (with --task) [default: its latest]; "
            "`workflow query` lists the earlier ones.",
        ),
    ] = None,
) -> None:
    """Print what the tasks' latest attempts printed, as raw text."""
    if retry_id is not None and (task is None or follow):
        fail("--retry-id needs --task, and does not go with --follow (an earlier attempt ended).")
    if follow:
        try:
            LogFollower(Client(), workflow_id, task).run()
        except KeyboardInterrupt:
            raise typer.Exit(130) from None
        return
    found = Client().get_text(f"{_path(workflow_id)}/logs", task_name=task, retry_id=retry_id)
    typer.echo(found, nl=False)


@app.command()
@handle_errors
def explain(workflow_id: IdArgument, output: FormatOption = OutputFormat.text) -> None:
    """Say, per group, why it is where it is: waiting for what, queued why, running where,
    ended how."""
    found = Client().get(f"{_path(workflow_id)}/explain")
    if output is OutputFormat.json:
        print_json(found)
        return
    echo(f"Workflow ID : {found['workflow_id']}")
    echo(f"Status      : {found['status']} ({found['summary']})")
    echo()
    for group in found["groups"]:
        echo(f"{group['name']} [{group['status']}]: {group['reason']}")


# ------------------------------------------------------------------------------- helpers


def _path(workflow_id: str) -> str:
    return f"/api/workflow/{quote(workflow_id, safe='')}"


def default_pool(client: Client) -> str:
    """The user's default pool, else the only pool they may use (OSMO's order)."""
    settings = client.get("/api/profile/settings")
    if settings["profile"].get("pool"):
        return str(settings["profile"]["pool"])
    pools = settings.get("pools") or []
    if len(pools) == 1:
        return str(pools[0])
    choices = f" You may use: {', '.join(pools)}." if pools else ""
    fail(
        "No default pool set. Set one with `corral profile set-pool POOL` or name one "
        f"with --pool.{choices}"
    )


def read_file(file: Path) -> tuple[str, str]:
    """The file's name (as errors should print it) and text."""
    if str(file) == "-":
        return "<stdin>", sys.stdin.read()
    try:
        return str(file), file.read_text(encoding="utf-8")
    except FileNotFoundError:
        fail(f"The file/path {file} does not exist!")
    except (OSError, UnicodeDecodeError) as err:
        fail(f"cannot read {file}: {err}")


def local_files(text: str, name: str, directory: Path) -> dict[str, dict[str, Any]]:
    """The files ``files[].localpath`` names, read relative to the workflow file's directory:
    text as it is, anything else in base64 (OSMO's CLI inlines them the same way)."""
    found: dict[str, dict[str, Any]] = {}
    for local in _localpaths(text, name):
        path = directory / local
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            fail(f"The file/path {local} does not exist!")
        except OSError as err:
            fail(f"cannot read {local}: {err}")
        try:
            found[local] = {"contents": data.decode("utf-8"), "base64": False}
        except UnicodeDecodeError:
            found[local] = {"contents": base64.b64encode(data).decode(), "base64": True}
    return found


_LOCALPATH = re.compile(r"""localpath:\s*["']?([^"'\s#,}]+)""")


def _localpaths(text: str, name: str) -> list[str]:
    """Every ``localpath`` of the workflow; for a file that is not YAML until Jinja renders it,
    the plain ones written as ``localpath: PATH``."""
    try:
        document = parse_document(text, name)
    except CorralError:
        return list(dict.fromkeys(_LOCALPATH.findall(text)))
    workflow = document.get("workflow") if isinstance(document, dict) else None
    if not isinstance(workflow, dict):
        return []
    groups = workflow.get("groups") or [{"tasks": workflow.get("tasks") or []}]
    paths = [
        item["localpath"]
        for group in groups
        if isinstance(group, dict)
        for task in group.get("tasks") or []
        if isinstance(task, dict)
        for item in task.get("files") or []
        if isinstance(item, dict) and isinstance(item.get("localpath"), str)
    ]
    return list(dict.fromkeys(paths))


def _post(
    client: Client,
    file: Path,
    pool: str,
    set_values: list[str] | None,
    set_strings: list[str] | None,
    priority: str,
    *,
    dry_run: bool = False,
    validation_only: bool = False,
) -> Any:
    name, text = read_file(file)
    directory = Path.cwd() if str(file) == "-" else file.parent
    body = {
        "file": text,
        "set_variables": list(set_values or []),
        "set_string_variables": list(set_strings or []),
        "source": name,
        "local_files": local_files(text, name, directory),
    }
    params: dict[str, Any] = {"priority": priority}
    if dry_run:
        params["dry_run"] = "true"
    if validation_only:
        params["validation_only"] = "true"
    try:
        return client.submit(f"/api/pool/{quote(pool, safe='')}/workflow", json=body, params=params)
    except ApiError as err:
        raise with_usable_pools(err, client, pool) from None


def with_usable_pools(err: ApiError, client: Client, pool: str) -> ApiError:
    """A refusal because of the pool (unknown, or not yours) names the pools you may use."""
    if err.status not in (403, 404) or pool not in err.message:
        return err
    hint = client.usable_pools_text()
    return ApiError(err.status, {**err.body, "message": f"{err.message} The {hint}."})
