"""The workflow file (OSMO spec version 2), parsed into a normalised, validated model.

Input is the *rendered* document (``workflow_template.render_workflow`` runs Jinja first). The
rules are OSMO's (docs/osmo-reference.md#the-workflow-file, #exit-actions) with its error texts;
every error is a
:class:`UserError` whose message starts with ``FILE:LINE:COL:`` at the offending key or item,
then the dotted field path (``workflow.tasks[0].command``), then the reason and what to do.

Checks that need the pool (platform defaulting, topology keys, task-count limits) are not made
here; the submission pipeline makes them.
"""

from __future__ import annotations

import base64
import binascii
import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any, NoReturn

from corral.domain.formats.documents import locate, parse_document
from corral.domain.formats.durations import parse_duration
from corral.domain.formats.kubernetes_names import label_key_problem, label_value_problem
from corral.domain.labels import CONTROL_CONTAINER
from corral.domain.topology.podgroup import TopologyRequirement
from corral.errors import UserError

# ----------------------------------------------------------------------------------- model


@dataclass(frozen=True)
class ResourceSpec:
    """A named entry of ``workflow.resources``."""

    cpu: int | None = None
    gpu: int | None = None
    memory: str | None = None
    storage: str | None = None
    platform: str | None = None
    nodes_excluded: tuple[str, ...] = ()
    topology: tuple[TopologyRequirement, ...] = ()


@dataclass(frozen=True)
class TaskInput:
    """``{task: name | <workflow_id>:name}`` or ``{url: ...}``, with an optional regex."""

    task: str | None = None
    url: str | None = None
    regex: str | None = None


@dataclass(frozen=True)
class TaskOutput:
    url: str
    regex: str | None = None


@dataclass(frozen=True)
class TaskFile:
    path: str
    contents: str
    base64: bool = False


@dataclass(frozen=True)
class TaskFileContents:
    """A local file the CLI read for ``files[].localpath``: text, or base64 for binary."""

    contents: str
    base64: bool = False


@dataclass(frozen=True)
class ExitAction:
    """``COMPLETE``, ``FAIL`` or ``RESCHEDULE`` for the inclusive exit-code ``ranges``."""

    action: str
    ranges: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class TaskSpec:
    name: str
    image: str
    command: tuple[str, ...]
    args: tuple[str, ...] = ()
    lead: bool = False
    environment: Mapping[str, str] = field(default_factory=dict)
    credentials: Mapping[str, str | Mapping[str, str]] = field(default_factory=dict)
    inputs: tuple[TaskInput, ...] = ()
    outputs: tuple[TaskOutput, ...] = ()
    files: tuple[TaskFile, ...] = ()
    volume_mounts: tuple[str, ...] = ()
    privileged: bool = False
    host_network: bool = False
    resource: str = "default"
    exit_actions: tuple[ExitAction, ...] = ()
    cache_size: str | None = None
    #: Accepted but not interpreted here (``checkpoint``, ``downloadType``, ``kpis``), verbatim.
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class GroupSpec:
    name: str
    tasks: tuple[TaskSpec, ...]
    barrier: bool = True
    ignore_non_lead_status: bool = True
    #: Groups whose tasks this group's tasks take as input, in declaration order.
    upstream: tuple[str, ...] = ()


@dataclass(frozen=True)
class Timeouts:
    exec_timeout: timedelta | None = None
    queue_timeout: timedelta | None = None


@dataclass(frozen=True)
class WorkflowSpec:
    name: str
    groups: tuple[GroupSpec, ...]
    resources: Mapping[str, ResourceSpec]
    labels: Mapping[str, str]
    timeout: Timeouts
    uses_groups: bool

    def tasks(self) -> list[TaskSpec]:
        """Every task, group by group, in declaration order."""
        return [task for group in self.groups for task in group.tasks]

    def resource_of(self, task: TaskSpec) -> ResourceSpec:
        """The resource spec ``task`` uses (parsing checked that it exists)."""
        return self.resources[task.resource]


@dataclass(frozen=True)
class PreviousInput:
    """An input ``{task: "<workflow_id>:<task>"}``: a task of an earlier workflow."""

    workflow_id: str
    task: str
    #: Where the input's ``task`` field is in the workflow document.
    path: tuple[str | int, ...]

    @property
    def reference(self) -> str:
        return f"{self.workflow_id}:{self.task}"


def previous_inputs(spec: WorkflowSpec) -> list[PreviousInput]:
    """Every input of ``spec`` that names a task of an earlier workflow, with its place."""
    found = []
    flat = 0
    for group_index, group in enumerate(spec.groups):
        for task_index, task in enumerate(group.tasks):
            where: tuple[str | int, ...] = (
                ("workflow", "groups", group_index, "tasks", task_index)
                if spec.uses_groups
                else ("workflow", "tasks", flat)
            )
            flat += 1
            for input_index, item in enumerate(task.inputs):
                if item.task is not None and ":" in item.task:
                    workflow_id, _, name = item.task.partition(":")
                    path = (*where, "inputs", input_index, "task")
                    found.append(PreviousInput(workflow_id.strip(), name.strip(), path))
    return found


def located_error(
    text: str, path: tuple[str | int, ...], reason: str, *, source: str, rendered: bool
) -> UserError:
    """A UserError naming ``source:line:column`` of ``path`` in the workflow ``text``."""
    try:
        _Reader(text, source, rendered).fail(path, reason)
    except UserError as err:
        return err
    raise AssertionError("fail always raises")  # pragma: no cover


# ----------------------------------------------------------------------------------- rules

SUPPORTED_VERSION = 2
NAME_PATTERN = re.compile(r"^[a-zA-Z]([a-zA-Z0-9_-]*[a-zA-Z0-9])?$")
MAX_WORKFLOW_NAME_LENGTH = 64
MAX_LABELS = 16
RESERVED_TASK_NAME = CONTROL_CONTAINER
EXIT_ACTIONS = ("COMPLETE", "FAIL", "RESCHEDULE")
EXIT_CODES = re.compile(r"^(\d+(-\d+)?)(,\d+(-\d+)?)*$")
#: OSMO's size units (all binary: ``G`` is read as ``Gi``); a bare number is bytes.
SIZE_UNITS = ("Ti", "TiB", "T", "Gi", "GiB", "G", "Mi", "MiB", "M", "Ki", "KiB", "K", "B", "m")
_SIZE = re.compile(r"^(?P<number>\d+(\.\d+)?)(?P<unit>[a-zA-Z]*)$")
_CACHE_PERCENT = re.compile(r"^(\d+)%$")
TOP_LEVEL_KEYS = ("workflow", "version", "default-values")

WORKFLOW_KEYS = ("name", "pool", "labels", "tasks", "groups", "resources", "timeout", "backend")
GROUP_KEYS = ("name", "tasks", "barrier", "ignoreNonleadStatus")
TASK_KEYS = (
    "name", "image", "command", "args", "lead", "environment", "credentials", "inputs",
    "outputs", "files", "volumeMounts", "privileged", "hostNetwork", "resource", "exitActions",
    "checkpoint", "downloadType", "cacheSize", "kpis",
)  # fmt: skip
RESOURCE_KEYS = ("cpu", "gpu", "memory", "storage", "platform", "nodesExcluded", "topology")
TOPOLOGY_KEYS = ("key", "group", "requirementType")
TIMEOUT_KEYS = ("exec_timeout", "queue_timeout")
INPUT_KEYS = ("task", "url", "regex")
OUTPUT_KEYS = ("url", "regex")
FILE_KEYS = ("path", "contents", "base64", "localpath")
CHECKPOINT_KEYS = ("path", "url", "frequency", "regex")
KPI_KEYS = ("index", "path")

Path = tuple[str | int, ...]


def k8s_name(name: str) -> str:
    """OSMO's name normalisation (``kb_objects.k8s_name``): lower case, ``_`` -> ``-``."""
    return name.lower().replace("_", "-")


def format_field(path: Sequence[str | int]) -> str:
    """``("workflow", "tasks", 0, "command")`` -> ``workflow.tasks[0].command``."""
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else str(step))
    return text


# ---------------------------------------------------------------------------------- reader


class _Reader:
    """Turns problems at a path of the document into located user errors."""

    def __init__(
        self,
        text: str,
        source: str,
        rendered: bool,
        local_files: Mapping[str, TaskFileContents] | None = None,
    ) -> None:
        self.text = text
        self.source = source
        self.rendered = rendered
        #: What the CLI read for each ``files[].localpath`` (docs/workflows.md#files).
        self.local_files = local_files or {}

    def fail(self, path: Path, reason: str) -> NoReturn:
        where = self.position(path)
        note = " (in the rendered workflow)" if self.rendered else ""
        field_text = format_field(path)
        middle = f"{field_text}{note}: " if field_text else (f"{note.strip()}: " if note else "")
        raise UserError(f"{self.source}:{where}: {middle}{reason}")

    def position(self, path: Path) -> str:
        """``line:col`` of ``path`` or of its nearest ancestor in the text (``1:1`` if none)."""
        for end in range(len(path), 0, -1):
            try:
                found = locate(self.text, path[:end])
            except Exception:  # an unreadable text has no positions; the start will do
                found = None
            if found is not None:
                return str(found)
        return "1:1"

    # -- shapes ------------------------------------------------------------------------

    def mapping(self, value: Any, path: Path, allowed: Sequence[str] | None) -> dict[Any, Any]:
        """``value`` as a mapping (null is empty); with ``allowed``, unknown keys are refused."""
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.fail(path, f"must be a mapping (key: value lines), not {_kind(value)}.")
        if allowed is not None:
            for key in value:
                if key not in allowed:
                    self.fail((*path, str(key)), _unknown_field(key, allowed))
        return value

    def sequence(self, value: Any, path: Path) -> list[Any]:
        """``value`` as a list (null is empty)."""
        if value is None:
            return []
        if not isinstance(value, list):
            self.fail(path, f"must be a list (lines starting with '- '), not {_kind(value)}.")
        return value

    def string(self, value: Any, path: Path, *, coerce: bool = False) -> str:
        """Text; with ``coerce``, numbers and booleans become text as OSMO prints them."""
        if isinstance(value, str):
            return value
        if coerce and isinstance(value, bool | int | float):
            return str(value)
        what = "text or a number" if coerce else "text"
        self.fail(path, f"must be {what}, not {_kind(value)}; quote the value if needed.")

    def required(self, mapping: Mapping[Any, Any], key: str, path: Path) -> Any:
        if key not in mapping or mapping[key] is None:
            self.fail(path, f'"{key}" is required; add it.')
        return mapping[key]

    def boolean(self, value: Any, path: Path, default: bool) -> bool:
        if value is None:
            return default
        if not isinstance(value, bool):
            self.fail(path, f"must be true or false, not {_kind(value)}.")
        return value

    def string_list(self, value: Any, path: Path, *, coerce: bool = False) -> tuple[str, ...]:
        items = self.sequence(value, path)
        return tuple(self.string(item, (*path, i), coerce=coerce) for i, item in enumerate(items))

    def regex(self, value: Any, path: Path) -> str | None:
        if value is None:
            return None
        text = self.string(value, path)
        try:
            re.compile(text)
        except (re.error, OverflowError, RecursionError, ValueError) as err:
            self.fail(path, f"regex {text!r} does not compile: {err}; fix the expression.")
        return text

    def name(self, value: Any, path: Path, kind: str) -> str:
        name = self.string(value, path)
        if not NAME_PATTERN.match(name):
            self.fail(
                path,
                f'{kind} name "{name}" is not valid: it must start with a letter, end with a '
                'letter or digit, and contain only letters, digits, "-" and "_".',
            )
        return name


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int | float):
        return f"a number ({value})"
    if isinstance(value, str):
        return f"text ({value!r})"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"a {type(value).__name__} ({value})"


def _unknown_field(key: Any, allowed: Sequence[str]) -> str:
    close = difflib.get_close_matches(str(key), allowed, n=1)
    hint = f'; did you mean "{close[0]}"?' if close else ""
    return f'unknown field "{key}"{hint} Allowed fields: {", ".join(allowed)}.'


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
    reader = _Reader(text, source, rendered, local_files)
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


def _check_version(reader: _Reader, version: Any) -> None:
    number = isinstance(version, int | float) and not isinstance(version, bool)
    ok = (number and version == SUPPORTED_VERSION) or version == str(SUPPORTED_VERSION)
    if not ok:
        reader.fail(
            ("version",),
            f"Unsupported workflow version {version!r}: this server reads version "
            f'{SUPPORTED_VERSION}; write "version: {SUPPORTED_VERSION}" or leave it out.',
        )


def _parse_workflow(reader: _Reader, value: Any, path: Path) -> WorkflowSpec:
    if not isinstance(value, dict):
        reader.fail(
            path,
            f"the workflow must be a mapping with name and tasks or groups, not {_kind(value)}.",
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
    resources = _parse_resources(reader, body, path)
    timeout = _parse_timeouts(reader, body.get("timeout"), (*path, "timeout"))
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
    _check_resources_exist(reader, groups, resources, path, uses_groups=bool(raw_groups))
    return WorkflowSpec(
        name=name,
        groups=tuple(group for group, _ in groups),
        resources=resources,
        labels=labels,
        timeout=timeout,
        uses_groups=bool(raw_groups),
    )


def _parse_labels(reader: _Reader, value: Any, path: Path) -> dict[str, str]:
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
            reader.fail(where, f"label value must be text, not {_kind(raw)}.")
        text = str(raw)
        if not text:
            reader.fail(where, f'label "{key}" has an empty value; give it a value.')
        problem = label_value_problem(text)
        if problem:
            reader.fail(where, f"label value {problem}.")
        result[key] = text
    return result


# ------------------------------------------------------------------------------ uniqueness


def _check_unique_names(reader: _Reader, body: Mapping[str, Any], path: Path) -> None:
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

#: A parsed group and the path of its task list (for messages).
_Located = tuple[GroupSpec, Path]


def _groups_of_tasks(reader: _Reader, raw_tasks: list[Any], path: Path) -> list[_Located]:
    """A tasks-only workflow: each task is its own group ``<task>-group`` (and its lead)."""
    groups: list[_Located] = []
    for index, raw in enumerate(raw_tasks):
        task = _parse_task(reader, raw, (*path, index))
        task = _replace_lead(task, True)
        groups.append((GroupSpec(name=f"{task.name}-group", tasks=(task,)), (*path, index)))
    return groups


def _parse_groups(reader: _Reader, raw_groups: list[Any], path: Path) -> list[_Located]:
    groups: list[_Located] = []
    for index, raw in enumerate(raw_groups):
        where = (*path, index)
        if not isinstance(raw, dict):
            reader.fail(where, f"a group must be a mapping with name and tasks, not {_kind(raw)}.")
        body = reader.mapping(raw, where, GROUP_KEYS)
        name = reader.name(reader.required(body, "name", where), (*where, "name"), "Group")
        raw_tasks = reader.sequence(body.get("tasks"), (*where, "tasks"))
        if not raw_tasks:
            reader.fail(
                (*where, "tasks"),
                f'Group "{name}" needs to have at least one task. Add a "tasks:" list to it.',
            )
        tasks = [
            _parse_task(reader, task, (*where, "tasks", i)) for i, task in enumerate(raw_tasks)
        ]
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


def _resolve_lead(reader: _Reader, group: str, tasks: list[TaskSpec], path: Path) -> list[TaskSpec]:
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
    reader: _Reader, groups: list[_Located], path: Path, *, uses_groups: bool
) -> list[_Located]:
    """Upstream groups from task inputs; a producer must be declared before its consumer."""
    group_of: dict[str, int] = {}
    for index, (group, _) in enumerate(groups):
        for task in group.tasks:
            group_of[task.name] = index
    linked: list[_Located] = []
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


# ----------------------------------------------------------------------------------- tasks


def _parse_task(reader: _Reader, raw: Any, path: Path) -> TaskSpec:
    if not isinstance(raw, dict):
        reader.fail(
            path, f"a task must be a mapping with name, image and command, not {_kind(raw)}."
        )
    if "resources" in raw:
        reader.fail(
            (*path, "resources"),
            'tasks have no "resources" field: define the resources under workflow.resources '
            'and name the entry with "resource: <name>".',
        )
    body = reader.mapping(raw, path, TASK_KEYS)
    name = reader.name(reader.required(body, "name", path), (*path, "name"), "Task")
    if k8s_name(name) == RESERVED_TASK_NAME:
        reader.fail(
            (*path, "name"),
            f'Task name "{name}" is reserved for OSMO\'s control container; choose another name.',
        )
    image = reader.string(reader.required(body, "image", path), (*path, "image"))
    if not image.strip():
        reader.fail((*path, "image"), "the image is empty; name a container image.")
    if "command" not in body or body["command"] is None:
        reader.fail(path, f'Container {name} should have at least one command. Add "command:".')
    command = reader.string_list(body["command"], (*path, "command"), coerce=True)
    if not command:
        reader.fail((*path, "command"), f"Container {name} should have at least one command.")
    return TaskSpec(
        name=name,
        image=image,
        command=command,
        args=reader.string_list(body.get("args"), (*path, "args"), coerce=True),
        lead=reader.boolean(body.get("lead"), (*path, "lead"), False),
        environment=_parse_environment(reader, body.get("environment"), (*path, "environment")),
        credentials=_parse_credentials(reader, body.get("credentials"), (*path, "credentials")),
        inputs=_parse_inputs(reader, body.get("inputs"), (*path, "inputs")),
        outputs=_parse_outputs(reader, body.get("outputs"), (*path, "outputs")),
        files=_parse_files(reader, body.get("files"), (*path, "files")),
        volume_mounts=reader.string_list(body.get("volumeMounts"), (*path, "volumeMounts")),
        privileged=reader.boolean(body.get("privileged"), (*path, "privileged"), False),
        host_network=reader.boolean(body.get("hostNetwork"), (*path, "hostNetwork"), False),
        resource=_parse_resource_name(reader, body.get("resource"), (*path, "resource")),
        exit_actions=_parse_exit_actions(
            reader, name, body.get("exitActions"), (*path, "exitActions")
        ),
        cache_size=_parse_cache_size(reader, body.get("cacheSize"), (*path, "cacheSize")),
        extra=_parse_extra(reader, body, path),
    )


def _parse_resource_name(reader: _Reader, value: Any, path: Path) -> str:
    return "default" if value is None else reader.string(value, path)


def _parse_environment(reader: _Reader, value: Any, path: Path) -> dict[str, str]:
    environment = reader.mapping(value, path, None)
    result: dict[str, str] = {}
    for key, raw in environment.items():
        where = (*path, str(key))
        if not isinstance(key, str) or not key:
            reader.fail(where, f"environment variable name {key!r} must be non-empty text.")
        result[key] = reader.string(raw, where, coerce=True)
    return result


def _parse_credentials(
    reader: _Reader, value: Any, path: Path
) -> dict[str, str | Mapping[str, str]]:
    credentials = reader.mapping(value, path, None)
    result: dict[str, str | Mapping[str, str]] = {}
    for key, raw in credentials.items():
        where = (*path, str(key))
        if not isinstance(key, str) or not key:
            reader.fail(where, f"credential name {key!r} must be non-empty text.")
        if isinstance(raw, dict):
            mapped: dict[str, str] = {}
            for env, cred_key in raw.items():
                if not isinstance(env, str) or not env:
                    reader.fail(
                        (*where, str(env)),
                        f"environment variable name {env!r} must be non-empty text.",
                    )
                mapped[env] = _credential_scalar(reader, cred_key, (*where, env))
            result[key] = mapped
        else:
            result[key] = _credential_scalar(reader, raw, where)
    return result


def _credential_scalar(reader: _Reader, value: Any, path: Path) -> str:
    if isinstance(value, bool | int | float | str):
        return str(value)
    reader.fail(
        path,
        "must be a mount directory (text) or a mapping ENV_VAR: credential_key, "
        f"not {_kind(value)}.",
    )


def _parse_inputs(reader: _Reader, value: Any, path: Path) -> tuple[TaskInput, ...]:
    inputs: list[TaskInput] = []
    for index, raw in enumerate(reader.sequence(value, path)):
        where = (*path, index)
        if not isinstance(raw, dict):
            reader.fail(
                where,
                f"an input must be a mapping {{task: ...}} or {{url: ...}}, not {_kind(raw)}.",
            )
        body = reader.mapping(raw, where, INPUT_KEYS)
        has_task, has_url = body.get("task") is not None, body.get("url") is not None
        if has_task == has_url:
            reader.fail(
                where,
                'an input needs exactly one of "task" (a task name, or <workflow_id>:<task>) '
                'and "url".',
            )
        task = reader.string(body["task"], (*where, "task")) if has_task else None
        url = reader.string(body["url"], (*where, "url")) if has_url else None
        if task is not None and not all(part.strip() for part in task.split(":", 1)):
            reader.fail(
                (*where, "task"),
                f'input task "{task}" is incomplete; write <task> or <workflow_id>:<task>.',
            )
        if url is not None and not url.strip():
            reader.fail((*where, "url"), "the url is empty; give the data's URL.")
        inputs.append(TaskInput(task, url, reader.regex(body.get("regex"), (*where, "regex"))))
    return tuple(inputs)


def _parse_outputs(reader: _Reader, value: Any, path: Path) -> tuple[TaskOutput, ...]:
    outputs: list[TaskOutput] = []
    for index, raw in enumerate(reader.sequence(value, path)):
        where = (*path, index)
        if not isinstance(raw, dict):
            reader.fail(where, f"an output must be a mapping {{url: ...}}, not {_kind(raw)}.")
        body = reader.mapping(raw, where, OUTPUT_KEYS)
        url = reader.string(reader.required(body, "url", where), (*where, "url"))
        if not url.strip():
            reader.fail((*where, "url"), "the url is empty; give where to upload the output.")
        outputs.append(TaskOutput(url, reader.regex(body.get("regex"), (*where, "regex"))))
    return tuple(outputs)


def _parse_files(reader: _Reader, value: Any, path: Path) -> tuple[TaskFile, ...]:
    files: list[TaskFile] = []
    seen: set[str] = set()
    for index, raw in enumerate(reader.sequence(value, path)):
        where = (*path, index)
        if not isinstance(raw, dict):
            reader.fail(where, f"a file must be a mapping {{path, contents}}, not {_kind(raw)}.")
        body = reader.mapping(raw, where, FILE_KEYS)
        file_path = reader.string(reader.required(body, "path", where), (*where, "path"))
        _check_file_path(reader, file_path, (*where, "path"))
        if file_path in seen:
            reader.fail(
                (*where, "path"), f'file path "{file_path}" appears twice in this task; keep one.'
            )
        seen.add(file_path)
        if "localpath" in body:
            files.append(_local_file(reader, body, file_path, where))
            continue
        contents = reader.string(
            reader.required(body, "contents", where), (*where, "contents"), coerce=True
        )
        encoded = reader.boolean(body.get("base64"), (*where, "base64"), False)
        if encoded:
            try:
                base64.b64decode(contents, validate=True)
            except (binascii.Error, ValueError):
                reader.fail(
                    (*where, "contents"), "is not valid base64; encode it or set base64: false."
                )
        files.append(TaskFile(file_path, contents, encoded))
    return tuple(files)


def _local_file(reader: _Reader, body: Mapping[str, Any], file_path: str, where: Path) -> TaskFile:
    """A ``files[]`` entry with ``localpath``: its contents come with the request (OSMO's CLI
    inlines the file; corral's sends it beside the workflow, so positions stay the same)."""
    if "contents" in body:
        reader.fail(
            (*where, "localpath"),
            "give either contents or localpath, not both (OSMO: Files tag dont support "
            "contents and localpath together).",
        )
    local = reader.string(body["localpath"], (*where, "localpath"))
    found = reader.local_files.get(local)
    if found is None:
        reader.fail(
            (*where, "localpath"),
            f"the local file {local} was not sent with the workflow: submit it with "
            "`corral workflow submit`, which reads localpath files (relative to the workflow "
            "file), or put the text in contents.",
        )
    return TaskFile(file_path, found.contents, found.base64)


def _check_file_path(reader: _Reader, file_path: str, path: Path) -> None:
    segments = [segment for segment in file_path.split("/") if segment]
    if not segments:
        reader.fail(
            path, f'file path "{file_path}" is empty; give the file\'s path in the container.'
        )
    in_output = segments[:3] == ["osmo", "data", "output"] and len(segments) > 3
    if segments[0] == "osmo" and not (in_output and file_path.startswith("/")):
        reader.fail(
            path,
            f'file path "{file_path}" is inside /osmo, which is reserved; use another directory '
            "(only /osmo/data/output/... is allowed).",
        )


def _parse_exit_actions(
    reader: _Reader, task: str, value: Any, path: Path
) -> tuple[ExitAction, ...]:
    actions = reader.mapping(value, path, None)
    result: list[ExitAction] = []
    seen: set[str] = set()
    for key, raw in actions.items():
        where = (*path, str(key))
        action = str(key).upper()
        if action not in EXIT_ACTIONS:
            hint = "; RESTART does not exist, use RESCHEDULE" if action == "RESTART" else ""
            reader.fail(
                where,
                f"Invalid exit action {key} for task {task}. Valid actions are "
                f"{', '.join(EXIT_ACTIONS)}{hint}.",
            )
        if action in seen:
            reader.fail(
                where,
                f"exit action {action} is given twice (keys are not case sensitive); merge them.",
            )
        seen.add(action)
        codes = (
            raw
            if isinstance(raw, str)
            else (str(raw) if isinstance(raw, int) and not isinstance(raw, bool) else None)
        )
        if codes is None or not EXIT_CODES.match(codes):
            reader.fail(
                where,
                f"Invalid exit codes {raw} for action {key} for task {task}. Write codes and "
                'inclusive ranges separated by commas, e.g. "0,1-10,16".',
            )
        result.append(ExitAction(action, _code_ranges(reader, codes, where)))
    return tuple(result)


def _code_ranges(reader: _Reader, codes: str, path: Path) -> tuple[tuple[int, int], ...]:
    ranges: list[tuple[int, int]] = []
    for part in codes.split(","):
        low, _, high = part.partition("-")
        if len(low) > 10 or len(high) > 10:
            reader.fail(path, f"exit code {part} is too large.")
        start, end = int(low), int(high or low)
        if start > end:
            reader.fail(path, f"exit code range {part} is reversed; write {end}-{start}.")
        ranges.append((start, end))
    return tuple(ranges)


def _parse_cache_size(reader: _Reader, value: Any, path: Path) -> str | None:
    if value is None:
        return None
    text = reader.string(value, path, coerce=not isinstance(value, bool))
    percent = _CACHE_PERCENT.match(text)
    if percent:
        if int(percent[1]) > 100:
            reader.fail(path, f"cacheSize {text} is more than 100%; give 0% to 100% or a size.")
        return text
    _check_size(reader, "cacheSize", text, path)
    return text


def _parse_extra(reader: _Reader, body: Mapping[str, Any], path: Path) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    if body.get("checkpoint") is not None:
        _check_checkpoints(reader, body["checkpoint"], (*path, "checkpoint"))
        extra["checkpoint"] = body["checkpoint"]
    if body.get("downloadType") is not None:
        if body["downloadType"] != "download":
            reader.fail((*path, "downloadType"), 'downloadType must be "download" or left out.')
        extra["downloadType"] = body["downloadType"]
    if body.get("kpis") is not None:
        for index, raw in enumerate(reader.sequence(body["kpis"], (*path, "kpis"))):
            where = (*path, "kpis", index)
            if not isinstance(raw, dict):
                reader.fail(where, f"a kpi must be a mapping {{index, path}}, not {_kind(raw)}.")
            kpi = reader.mapping(raw, where, KPI_KEYS)
            for key in KPI_KEYS:
                reader.string(reader.required(kpi, key, where), (*where, key), coerce=True)
        extra["kpis"] = body["kpis"]
    return extra


def _check_checkpoints(reader: _Reader, value: Any, path: Path) -> None:
    for index, raw in enumerate(reader.sequence(value, path)):
        where = (*path, index)
        if not isinstance(raw, dict):
            reader.fail(
                where, f"a checkpoint must be a mapping {{path, url, frequency}}, not {_kind(raw)}."
            )
        body = reader.mapping(raw, where, CHECKPOINT_KEYS)
        for key in ("path", "url"):
            reader.string(reader.required(body, key, where), (*where, key))
        _duration(reader, reader.required(body, "frequency", where), (*where, "frequency"))
        reader.regex(body.get("regex"), (*where, "regex"))


# ------------------------------------------------------------------------------- resources


def _parse_resources(
    reader: _Reader, body: Mapping[str, Any], path: Path
) -> dict[str, ResourceSpec]:
    if body.get("resources") is None:
        return {"default": ResourceSpec()}
    where = (*path, "resources")
    specs = reader.mapping(body["resources"], where, None)
    result: dict[str, ResourceSpec] = {}
    for name, raw in specs.items():
        if not isinstance(name, str) or not name:
            reader.fail((*where, str(name)), f"resource name {name!r} must be non-empty text.")
        result[name] = _parse_resource(reader, raw, (*where, name))
    return result


def _parse_resource(reader: _Reader, value: Any, path: Path) -> ResourceSpec:
    body = reader.mapping(value, path, RESOURCE_KEYS)
    platform = body.get("platform")
    return ResourceSpec(
        cpu=_count(reader, body.get("cpu"), (*path, "cpu")),
        gpu=_count(reader, body.get("gpu"), (*path, "gpu")),
        memory=_size(reader, "memory", body.get("memory"), (*path, "memory")),
        storage=_size(reader, "storage", body.get("storage"), (*path, "storage")),
        platform=None if platform is None else reader.string(platform, (*path, "platform")),
        nodes_excluded=reader.string_list(body.get("nodesExcluded"), (*path, "nodesExcluded")),
        topology=_parse_topology(reader, body.get("topology"), (*path, "topology")),
    )


def _count(reader: _Reader, value: Any, path: Path) -> int | None:
    """A whole number of CPUs or GPUs. An explicit 0 means zero (OSMO takes it as unset and
    gives the pool's default; docs/templates.md#differences-from-osmo)."""
    if value is None:
        return None
    number = _whole_number(value)
    if number is None or number < 0:
        reader.fail(path, f"must be a whole number (0 or more), not {_kind(value)}.")
    return number


def _whole_number(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"[0-9]{1,18}", value.strip()):
        return int(value)
    return None


def _size(reader: _Reader, name: str, value: Any, path: Path) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        reader.fail(path, f"must be a size such as 16Gi, not {_kind(value)}.")
    text = str(value)
    _check_size(reader, name, text, path)
    return text


def _check_size(reader: _Reader, name: str, text: str, path: Path) -> None:
    match = _SIZE.match(text)
    if match is None:
        reader.fail(
            path,
            f"Resource {name} field has invalid value {text}. Write a number with an optional "
            f"unit, e.g. 16Gi (units: {', '.join(SIZE_UNITS)}).",
        )
    if match["unit"] and match["unit"] not in SIZE_UNITS:
        reader.fail(
            path,
            f"Resource {name} field has invalid unit: {match['unit']}. Use one of "
            f"{', '.join(SIZE_UNITS)} (GB and MB are not accepted; write Gi or Mi).",
        )


def _parse_topology(reader: _Reader, value: Any, path: Path) -> tuple[TopologyRequirement, ...]:
    result: list[TopologyRequirement] = []
    for index, raw in enumerate(reader.sequence(value, path)):
        where = (*path, index)
        if not isinstance(raw, dict):
            reader.fail(
                where,
                "a topology entry must be a mapping {key, group, requirementType}, "
                f"not {_kind(raw)}.",
            )
        body = reader.mapping(raw, where, TOPOLOGY_KEYS)
        key = reader.string(reader.required(body, "key", where), (*where, "key"))
        group = body.get("group")
        group_name = (
            "default" if group is None else reader.string(group, (*where, "group"), coerce=True)
        )
        kind = body.get("requirementType", "required")
        if kind not in ("required", "preferred"):
            reader.fail(
                (*where, "requirementType"),
                f'requirementType must be "required" or "preferred", not {_kind(kind)}.',
            )
        result.append(TopologyRequirement(key=key, group=group_name, required=kind == "required"))
    return tuple(result)


def _check_resources_exist(
    reader: _Reader,
    groups: list[_Located],
    resources: Mapping[str, ResourceSpec],
    path: Path,
    *,
    uses_groups: bool,
) -> None:
    for group, tasks_path in groups:
        for index, task in enumerate(group.tasks):
            task_path = (*tasks_path, index) if uses_groups else tasks_path
            if task.resource in resources:
                continue
            defined = ", ".join(sorted(resources)) or "none"
            if task.resource == "default":
                reader.fail(
                    task_path,
                    f"Task {task.name} has no specified resource. Specify a default resource in "
                    f'the resources section (defined: {defined}), or set "resource:" on the task.',
                )
            reader.fail(
                (*task_path, "resource"),
                f"Requesting undefined resource {task.resource}. Defined resources: {defined}.",
            )


# -------------------------------------------------------------------------------- timeouts


def _parse_timeouts(reader: _Reader, value: Any, path: Path) -> Timeouts:
    body = reader.mapping(value, path, TIMEOUT_KEYS)
    exec_timeout, queue_timeout = (
        None if body.get(key) is None else _duration(reader, body[key], (*path, key))
        for key in TIMEOUT_KEYS
    )
    return Timeouts(exec_timeout=exec_timeout, queue_timeout=queue_timeout)


def _duration(reader: _Reader, value: Any, path: Path) -> timedelta:
    """Seconds (int or float) or OSMO's duration text (``8h``, ``PT1H30M``)."""
    try:
        if isinstance(value, int | float) and not isinstance(value, bool):
            if not value >= 0:
                raise ValueError(f"a duration cannot be negative ({value})")
            return timedelta(seconds=value)
        if isinstance(value, str):
            return parse_duration(value.strip())
    except OverflowError:
        reader.fail(path, f"duration {value} is too long; give at most a few years.")
    except ValueError as err:
        reader.fail(path, f"{err}.")
    reader.fail(
        path, f"must be a duration such as 8h, 30m or PT1H30M, or seconds, not {_kind(value)}."
    )
