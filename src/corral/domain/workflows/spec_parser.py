"""The workflow file (OSMO spec version 2), parsed into a normalised, validated model:
the top level and the groups (tasks are read by ``spec_tasks``, resource specs by
``spec_resources``).

Input is the *rendered* document (``template.render_workflow`` runs Jinja first). The rules are
OSMO's (docs/osmo-reference.md#the-workflow-file, #exit-actions) with its error texts; every
error is a :class:`UserError` whose message starts with ``FILE:LINE:COL:`` at the offending
key or item, then the dotted field path (``workflow.tasks[0].command``), then the reason and
what to do.

Checks that need the pool (platform defaulting, topology keys, task-count limits) are not made
here; the submission pipeline makes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from corral.domain.formats.documents import parse_document
from corral.domain.formats.kubernetes_names import label_key_problem, label_value_problem
from corral.domain.workflows.spec import GroupSpec, TaskFileContents, TaskSpec, WorkflowSpec
from corral.domain.workflows.spec_reader import (
    GROUP_KEYS,
    MAX_LABELS,
    MAX_WORKFLOW_NAME_LENGTH,
    SUPPORTED_VERSION,
    TOP_LEVEL_KEYS,
    WORKFLOW_KEYS,
    Located,
    Path,
    Reader,
    k8s_name,
    kind_of,
)
from corral.domain.workflows.spec_resources import (
    check_resources_exist,
    parse_resources,
    parse_timeouts,
)
from corral.domain.workflows.spec_tasks import parse_task
from corral.errors import UserError

# ------------------------------------------------------------------------------- top level


def parse_workflow_spec(
    text: str,
    *,
    source: str = "workflow.yaml",
    rendered: bool = False,
    local_files: Mapping[str, TaskFileContents] | None = None,
) -> WorkflowSpec:
    """Parse an already-rendered workflow document (YAML text with `workflow:` and optional
    `version:`).

    ``rendered`` says Jinja changed the text, so that positions are flagged as being in the
    rendered workflow. A ``default-values`` section, if still there, is ignored (rendering
    consumes it). ``local_files`` holds the contents of ``files[].localpath`` (the CLI reads
    them).
    """
    reader = Reader(text, source, rendered, local_files)
    try:
        document = parse_document(text, source)
    except UserError as err:
        if rendered:
            raise UserError(
                err.message.replace(": invalid ", ": (in the rendered workflow) invalid ", 1)
            ) from None
        raise
    if not isinstance(document, dict) or "workflow" not in document:
        reader.fail(
            (), 'Workflow spec not found. Put the workflow under a top-level "workflow:" key.'
        )
    for key in document:
        if key not in TOP_LEVEL_KEYS:
            reader.fail(
                (str(key),),
                f'Unknown top-level key "{key}" found in the workflow spec. The top level may '
                'only hold "workflow", "version" and "default-values"; indent the key if it '
                'belongs under "workflow".',
            )
    if "version" in document:
        _check_version(reader, document["version"])
    return _parse_workflow(reader, document["workflow"], ("workflow",))


def _check_version(reader: Reader, version: Any) -> None:
    number = isinstance(version, int | float) and not isinstance(version, bool)
    ok = (number and version == SUPPORTED_VERSION) or version == str(SUPPORTED_VERSION)
    if not ok:
        reader.fail(
            ("version",),
            f"Unsupported workflow version {version!r}: this server reads version "
            f'{SUPPORTED_VERSION}; write "version: {SUPPORTED_VERSION}" or leave it out.',
        )


def _parse_workflow(reader: Reader, value: Any, path: Path) -> WorkflowSpec:
    if not isinstance(value, dict):
        reader.fail(
            path,
            f"the workflow must be a mapping with name and tasks or groups, not {kind_of(value)}.",
        )
    body = reader.mapping(value, path, WORKFLOW_KEYS)
    name = reader.name(reader.required(body, "name", path), (*path, "name"), "Workflow")
    if len(name) > MAX_WORKFLOW_NAME_LENGTH:
        reader.fail(
            (*path, "name"),
            f'Workflow name "{name}" is {len(name)} characters long; the limit is '
            f"{MAX_WORKFLOW_NAME_LENGTH}.",
        )
    for ignored in ("pool", "backend"):
        if body.get(ignored) is not None:
            reader.string(body[ignored], (*path, ignored))
    labels = _parse_labels(reader, body.get("labels"), (*path, "labels"))
    resources = parse_resources(reader, body, path)
    timeout = parse_timeouts(reader, body.get("timeout"), (*path, "timeout"))
    raw_tasks = reader.sequence(body.get("tasks"), (*path, "tasks"))
    raw_groups = reader.sequence(body.get("groups"), (*path, "groups"))
    if raw_tasks and raw_groups:
        reader.fail(
            path, "Cannot use both groups and tasks in the same workflow. Keep one of them."
        )
    if not raw_tasks and not raw_groups:
        reader.fail(
            path,
            'Workflows need to have at least one group or one task. Add a "tasks:" list.',
        )
    _check_unique_names(reader, body, path)
    groups = (
        _parse_groups(reader, raw_groups, (*path, "groups"))
        if raw_groups
        else _groups_of_tasks(reader, raw_tasks, (*path, "tasks"))
    )
    groups = _link_groups(reader, groups, path, uses_groups=bool(raw_groups))
    check_resources_exist(reader, groups, resources, path, uses_groups=bool(raw_groups))
    return WorkflowSpec(
        name=name,
        groups=tuple(group for group, _ in groups),
        resources=resources,
        labels=labels,
        timeout=timeout,
        uses_groups=bool(raw_groups),
    )


def _parse_labels(reader: Reader, value: Any, path: Path) -> dict[str, str]:
    labels = reader.mapping(value, path, None)
    if len(labels) > MAX_LABELS:
        reader.fail(path, f"{len(labels)} labels given; at most {MAX_LABELS} are allowed.")
    result: dict[str, str] = {}
    for key, raw in labels.items():
        where = (*path, str(key))
        if not isinstance(key, str):
            reader.fail(where, f"label key {key!r} must be text; quote it.")
        problem = label_key_problem(key)
        if problem:
            reader.fail(where, f'label key "{key}" is not a valid Kubernetes label key: {problem}.')
        if isinstance(raw, bool) or not isinstance(raw, str | int | float):
            reader.fail(where, f"label value must be text, not {kind_of(raw)}.")
        text = str(raw)
        if not text:
            reader.fail(where, f'label "{key}" has an empty value; give it a value.')
        problem = label_value_problem(text)
        if problem:
            reader.fail(where, f"label value {problem}.")
        result[key] = text
    return result


# ------------------------------------------------------------------------------ uniqueness


def _check_unique_names(reader: Reader, body: Mapping[str, Any], path: Path) -> None:
    """OSMO's rule: task and group names are unique after ``k8s_name`` (tasks and groups)."""
    seen: dict[str, Path] = {}
    for where, name in _declared_names(body, path):
        key = k8s_name(name)
        if key in seen:
            first = reader.position(seen[key])
            reader.fail(
                where,
                f'Multiple tasks/groups have the same name: "{name}". Note that names are not '
                'case sensitive and we consider "-" and "_" the same (it clashes with the name '
                f"at line {first.split(':')[0]}); rename one of them.",
            )
        seen[key] = where


def _declared_names(body: Mapping[str, Any], path: Path) -> list[tuple[Path, str]]:
    names: list[tuple[Path, str]] = []
    for kind in ("tasks", "groups"):
        items = body.get(kind)
        if not isinstance(items, list):
            continue
        for index, item in enumerate(items):
            if not isinstance(item, dict):
                continue
            if isinstance(item.get("name"), str):
                names.append(((*path, kind, index, "name"), item["name"]))
            tasks = item.get("tasks") if kind == "groups" else None
            for task_index, task in enumerate(tasks if isinstance(tasks, list) else []):
                if isinstance(task, dict) and isinstance(task.get("name"), str):
                    names.append(((*path, kind, index, "tasks", task_index, "name"), task["name"]))
    return names


# ---------------------------------------------------------------------------------- groups


def _groups_of_tasks(reader: Reader, raw_tasks: list[Any], path: Path) -> list[Located]:
    """A tasks-only workflow: each task is its own group ``<task>-group`` (and its lead)."""
    groups: list[Located] = []
    for index, raw in enumerate(raw_tasks):
        task = parse_task(reader, raw, (*path, index))
        task = _replace_lead(task, True)
        groups.append((GroupSpec(name=f"{task.name}-group", tasks=(task,)), (*path, index)))
    return groups


def _parse_groups(reader: Reader, raw_groups: list[Any], path: Path) -> list[Located]:
    groups: list[Located] = []
    for index, raw in enumerate(raw_groups):
        where = (*path, index)
        if not isinstance(raw, dict):
            reader.fail(
                where, f"a group must be a mapping with name and tasks, not {kind_of(raw)}."
            )
        body = reader.mapping(raw, where, GROUP_KEYS)
        name = reader.name(reader.required(body, "name", where), (*where, "name"), "Group")
        raw_tasks = reader.sequence(body.get("tasks"), (*where, "tasks"))
        if not raw_tasks:
            reader.fail(
                (*where, "tasks"),
                f'Group "{name}" needs to have at least one task. Add a "tasks:" list to it.',
            )
        tasks = [parse_task(reader, task, (*where, "tasks", i)) for i, task in enumerate(raw_tasks)]
        tasks = _resolve_lead(reader, name, tasks, (*where, "tasks"))
        group = GroupSpec(
            name=name,
            tasks=tuple(tasks),
            barrier=reader.boolean(body.get("barrier"), (*where, "barrier"), True),
            ignore_non_lead_status=reader.boolean(
                body.get("ignoreNonleadStatus"), (*where, "ignoreNonleadStatus"), True
            ),
        )
        groups.append((group, (*where, "tasks")))
    return groups


def _resolve_lead(reader: Reader, group: str, tasks: list[TaskSpec], path: Path) -> list[TaskSpec]:
    if len(tasks) == 1:
        return [_replace_lead(tasks[0], True)]
    leaders = sum(task.lead for task in tasks)
    if leaders != 1:
        reader.fail(
            path,
            f'Group "{group}" has {leaders} leader(s) but must have exactly one. Set '
            '"lead: true" on exactly one of its tasks.',
        )
    return tasks


def _replace_lead(task: TaskSpec, lead: bool) -> TaskSpec:
    return replace(task, lead=lead)


def _link_groups(
    reader: Reader, groups: list[Located], path: Path, *, uses_groups: bool
) -> list[Located]:
    """Upstream groups from task inputs; a producer must be declared before its consumer."""
    group_of: dict[str, int] = {}
    for index, (group, _) in enumerate(groups):
        for task in group.tasks:
            group_of[task.name] = index
    linked: list[Located] = []
    for index, (group, tasks_path) in enumerate(groups):
        upstream: set[int] = set()
        for task_index, task in enumerate(group.tasks):
            task_path = (*tasks_path, task_index) if uses_groups else tasks_path
            for input_index, item in enumerate(task.inputs):
                if item.task is None or ":" in item.task:
                    continue
                where = (*task_path, "inputs", input_index, "task")
                producer = group_of.get(item.task)
                if producer is None:
                    reader.fail(
                        where,
                        f"Task input {item.task} does not exist. Name a task of this workflow, "
                        "or <workflow_id>:<task> for a task of an earlier workflow.",
                    )
                if producer >= index:
                    reader.fail(
                        where,
                        _order_message(
                            group.name, groups[producer][0].name, item.task, task.name, uses_groups
                        ),
                    )
                upstream.add(producer)
        names = tuple(groups[i][0].name for i in sorted(upstream))
        linked.append(
            (
                GroupSpec(
                    group.name, group.tasks, group.barrier, group.ignore_non_lead_status, names
                ),
                tasks_path,
            )
        )
    return linked


def _order_message(consumer: str, producer: str, task: str, user: str, uses_groups: bool) -> str:
    base = f'Group "{consumer}" requires input group "{producer}" exists before itself.'
    if consumer == producer:
        return (
            f"{base} A task cannot take a task of its own group as input; "
            f"move {task} to an earlier group."
        )
    if uses_groups:
        return f'{base} Declare group "{producer}" before group "{consumer}".'
    return f"{base} List task {task} before task {user}."
