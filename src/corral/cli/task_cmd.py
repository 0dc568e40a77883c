"""``corral task ...``: a task's side of a stop (docs/checkpoints.md): report a committed
checkpoint, say the task is ready to stop, read its notice.

Inside a local task (``CORRAL_CONTROL_DIR`` is set) the commands read and write the task's
control directory, which its runner relays: a local task cannot reach the API. Inside a pod
(``CORRAL_TASK_TOKEN_FILE`` is set) they call the API with the task's own token. Elsewhere they
call the API as you, for WORKFLOW's TASK."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

import typer

from corral.backends.embedded.task_reports import (
    CHECKPOINT,
    CONTROL_ENV,
    NOTICE,
    READY,
    write_atomic,
)
from corral.cli.client import Client
from corral.cli.output import FormatOption, OutputFormat, echo, fail, handle_errors, print_json
from corral.domain.labels import TASK_TOKEN_FILE_ENV
from corral.services.auth.task_tokens import claimed_scope

app = typer.Typer(
    rich_markup_mode=None,
    help="A task's side of a stop: report a checkpoint, say it is ready, read its notice.",
    no_args_is_help=True,
)

WorkflowArgument = Annotated[
    str | None, typer.Argument(help="The workflow (not inside a local task).")
]
#: A task token is a few hundred bytes; a file longer than this holds something else.
_TOKEN_BYTES = 16 * 2**10
TaskArgument = Annotated[str | None, typer.Argument(help="The task's name (not inside one).")]


@app.command("checkpoint")
@handle_errors
def checkpoint(
    workflow: WorkflowArgument = None,
    task: TaskArgument = None,
    step: Annotated[
        int | None, typer.Option("--step", min=0, max=2**53, help="The step it holds.")
    ] = None,
    description: Annotated[
        str | None, typer.Option("--description", help="What it holds (1,000 characters).")
    ] = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Report that the task committed a checkpoint now: preemption counts the work its gang
    would lose from it."""
    body: dict[str, Any] = {"step": step, "description": description}
    target = _target(workflow, task)
    if isinstance(target, Path):
        write_atomic(
            target / CHECKPOINT, json.dumps({k: v for k, v in body.items() if v is not None})
        )
        echo(f"checkpoint written to {target / CHECKPOINT}")
        return
    answer = target.request("POST", "checkpoint", json=body)
    if output is OutputFormat.json:
        print_json(answer)
        return
    echo(f"checkpoint of {answer['workflow_id']} task {answer['task']} at {answer['at']}")


@app.command("ready")
@handle_errors
def ready(workflow: WorkflowArgument = None, task: TaskArgument = None) -> None:
    """After a notice: the task is ready to stop (its checkpoint is safe)."""
    target = _target(workflow, task)
    if isinstance(target, Path):
        write_atomic(target / READY, "")
        echo(f"ready written to {target / READY}")
        return
    answer = target.request("POST", "ready")
    echo(f"{answer['workflow_id']} task {answer['task']} ready at {answer['ready_at']}")


@app.command("notice")
@handle_errors
def notice(
    workflow: WorkflowArgument = None,
    task: TaskArgument = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """The notice of the task's coming stop, if any: its deadline and why."""
    target = _target(workflow, task)
    if isinstance(target, Path):
        path = target / NOTICE
        echo(path.read_text(encoding="utf-8") if path.exists() else "no notice")
        return
    answer = target.request("GET", "notice")
    if output is OutputFormat.json:
        print_json(answer)
        return
    found = answer["notice"]
    if found is None:
        echo(f"{answer['workflow_id']} task {answer['task']}: no notice")
        return
    echo(
        f"{answer['workflow_id']} task {answer['task']}: stops by {found['deadline']} "
        f"({found['seconds_left']:g} s left): {found['reason']}"
    )


@dataclass(frozen=True)
class _TaskApi:
    """The API, for one task: as you, or (inside a pod) with the task's own token."""

    client: Client
    workflow: str
    task: str

    def request(self, method: str, what: str, **sent: Any) -> Any:
        workflow, task = quote(self.workflow, safe=""), quote(self.task, safe="")
        return self.client.request(method, f"/api/workflow/{workflow}/task/{task}/{what}", **sent)


def _target(workflow: str | None, task: str | None) -> Path | _TaskApi:
    """Where the command speaks: given WORKFLOW and TASK, the API as you; given neither, inside
    a local task its control directory, inside a pod the API with the task's own token."""
    if workflow is not None and task is not None:
        return _TaskApi(Client(), workflow, task)
    if workflow is not None or task is not None:
        fail("Give both WORKFLOW and TASK.")
    control = os.environ.get(CONTROL_ENV)
    if control:
        return Path(control)
    token_file = os.environ.get(TASK_TOKEN_FILE_ENV)
    if token_file:
        return _own_token_api(Path(token_file))
    fail(
        "Give WORKFLOW and TASK (or run this inside a task: a local task has "
        f"{CONTROL_ENV} set, a pod {TASK_TOKEN_FILE_ENV})."
    )


def _own_token_api(path: Path) -> _TaskApi:
    """The API with the task's own token from ``path``; the token names the task."""
    try:
        with path.open("rb") as handle:
            token = handle.read(_TOKEN_BYTES).decode("utf-8").strip()
    except (OSError, UnicodeDecodeError) as err:
        fail(f"Cannot read the task's token from {path} ({TASK_TOKEN_FILE_ENV}): {err}.")
    scope = claimed_scope(token)
    if scope is None:
        fail(f"{path} ({TASK_TOKEN_FILE_ENV}) holds no task token.")
    return _TaskApi(Client(token=token), scope.workflow_id, scope.task_name)
