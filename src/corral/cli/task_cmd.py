"""``corral task ...``: a task's side of a stop (docs/checkpoints.md): report a committed
checkpoint, say the task is ready to stop, read its notice.

Inside a local task (``CORRAL_CONTROL_DIR`` is set) the commands read and write the task's
control directory, which its runner relays: a local task cannot reach the API. Elsewhere they
call the API as you, for WORKFLOW's TASK."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

import typer

from corral.backends.task_reports import CHECKPOINT, CONTROL_ENV, NOTICE, READY, write_atomic
from corral.cli.client import Client
from corral.cli.output import FormatOption, OutputFormat, echo, fail, handle_errors, print_json

app = typer.Typer(
    rich_markup_mode=None,
    help="A task's side of a stop: report a checkpoint, say it is ready, read its notice.",
    no_args_is_help=True,
)

WorkflowArgument = Annotated[
    str | None, typer.Argument(help="The workflow (not inside a local task).")
]
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
    control = _control_dir(workflow, task)
    if control is not None:
        write_atomic(
            control / CHECKPOINT, json.dumps({k: v for k, v in body.items() if v is not None})
        )
        echo(f"checkpoint written to {control / CHECKPOINT}")
        return
    answer = Client().request("POST", _path(workflow, task, "checkpoint"), json=body)
    if output is OutputFormat.json:
        print_json(answer)
        return
    echo(f"checkpoint of {answer['workflow_id']} task {answer['task']} at {answer['at']}")


@app.command("ready")
@handle_errors
def ready(workflow: WorkflowArgument = None, task: TaskArgument = None) -> None:
    """After a notice: the task is ready to stop (its checkpoint is safe)."""
    control = _control_dir(workflow, task)
    if control is not None:
        write_atomic(control / READY, "")
        echo(f"ready written to {control / READY}")
        return
    answer = Client().request("POST", _path(workflow, task, "ready"))
    echo(f"{answer['workflow_id']} task {answer['task']} ready at {answer['ready_at']}")


@app.command("notice")
@handle_errors
def notice(
    workflow: WorkflowArgument = None,
    task: TaskArgument = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """The notice of the task's coming stop, if any: its deadline and why."""
    control = _control_dir(workflow, task)
    if control is not None:
        path = control / NOTICE
        echo(path.read_text(encoding="utf-8") if path.exists() else "no notice")
        return
    answer = Client().request("GET", _path(workflow, task, "notice"))
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


def _control_dir(workflow: str | None, task: str | None) -> Path | None:
    """The task's control directory when run inside a local task without WORKFLOW and TASK."""
    control = os.environ.get(CONTROL_ENV)
    if workflow is None and task is None:
        if not control:
            fail(
                "Give WORKFLOW and TASK (or run this inside a local task, where "
                f"{CONTROL_ENV} is set)."
            )
        return Path(control)
    if workflow is None or task is None:
        fail("Give both WORKFLOW and TASK.")
    return None


def _path(workflow: str | None, task: str | None, what: str) -> str:
    assert workflow is not None and task is not None
    return f"/api/workflow/{quote(workflow, safe='')}/task/{quote(task, safe='')}/{what}"
