"""Restarting a failed workflow (OSMO's ``workflow restart``): a new workflow from the stored spec
that runs only the groups that did not complete. A task that takes a completed task's output as
input reads it from the old workflow (``<old id>:<task>``), which has finished."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import yaml

from corral.domain.formats.documents import parse_document
from corral.errors import UserError


def restart_document(
    text: str, completed_groups: Collection[str], old_workflow_id: str, *, source: str
) -> str:
    """The spec ``text`` without its completed groups, inputs from them pointing at the old
    workflow. A tasks-only workflow's groups are its tasks (``<task>-group``)."""
    document = parse_document(text, source)
    workflow: dict[str, Any] = document["workflow"]
    if workflow.get("groups"):
        done = [g for g in workflow["groups"] if g.get("name") in completed_groups]
        finished = {str(t.get("name")) for g in done for t in g.get("tasks") or []}
        workflow["groups"] = [g for g in workflow["groups"] if g not in done]
        tasks = [t for g in workflow["groups"] for t in g.get("tasks") or []]
    else:
        every = workflow.get("tasks") or []
        finished = {
            str(t.get("name")) for t in every if f"{t.get('name')}-group" in completed_groups
        }
        workflow["tasks"] = tasks = [t for t in every if str(t.get("name")) not in finished]
    if not tasks:
        raise UserError(f"Workflow {old_workflow_id} has no group left to run: all completed.")
    for task in tasks:
        for item in task.get("inputs") or []:
            if isinstance(item, dict) and item.get("task") in finished:
                item["task"] = f"{old_workflow_id}:{item['task']}"
    return yaml.safe_dump(document, sort_keys=False)
