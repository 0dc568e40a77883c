"""The template variables of a task (``USER_*``, ``WF_*``) and of a task group.

Precedence, lowest first: the pool's ``common_default_variables``, the platform's
``default_variables`` (merged with the pod-template rule), then what the user asked for. Fixes
of OSMO's defects (docs/templates.md): an explicit ``gpu: 0`` or ``cpu: 0`` means zero, not "use
the default"; the derived values (``USER_MEMORY_Gi``, ``USER_CACHE`` ...) follow the value in
effect, default or not; numbers keep their type (``USER_CPU`` 2 renders as ``2``, not ``2.0``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from corral.domain.formats.kubernetes_names import label_value_problem
from corral.domain.formats.quantities import parse_quantity
from corral.domain.labels import GROUP_NAME, GROUP_UUID, SUBMITTED_BY, WORKFLOW_ID, WORKFLOW_UUID
from corral.domain.platform.template_merge import merge
from corral.errors import UserError

#: Units of the derived ``USER_MEMORY_<unit>`` / ``USER_STORAGE_<unit>`` values, in bytes.
DERIVED_UNITS: dict[str, Decimal] = {
    "Ti": Decimal(2**40),
    "Gi": Decimal(2**30),
    "Mi": Decimal(2**20),
    "Ki": Decimal(2**10),
    "B": Decimal(1),
    "m": Decimal("0.001"),
}
_NUMBER_AND_UNIT = re.compile(r"^\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)\s*([A-Za-z]*)\s*$")
_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")
_MIB = Decimal(2**20)


@dataclass(frozen=True)
class ResourceRequest:
    """What a task asks for; None means "not given" (the defaults apply)."""

    cpu: int | float | None = None
    gpu: int | None = None
    memory: str | None = None
    storage: str | None = None
    nodes_excluded: tuple[str, ...] = ()
    cache_size: str | None = None


@dataclass(frozen=True)
class GroupIdentity:
    """Who and what a task group is: the source of the ``WF_*`` variables and ``osmo.*`` labels."""

    workflow_id: str
    workflow_uuid: str
    group_name: str
    group_uuid: str
    submitted_by: str
    pool: str
    priority: str = "NORMAL"


@dataclass(frozen=True)
class TaskIdentity:
    name: str
    uuid: str
    platform: str
    retry_id: int = 0
    lead: bool = False


def default_variables(
    pool_defaults: Mapping[str, Any], platform_defaults: Mapping[str, Any]
) -> dict[str, Any]:
    """The platform's default variables over the pool's (nested values merge)."""
    return merge(pool_defaults, platform_defaults)


def container_name(task_name: str) -> str:
    """OSMO's Kubernetes name of a task's container: lowercase, ``_`` -> ``-``, <= 63 chars."""
    return task_name.lower().replace("_", "-")[:63].rstrip("-_")


def submitted_by_label(user: str) -> str | None:
    """The user as a label value: the name itself, else its e-mail local part, else None."""
    for candidate in (user, user.partition("@")[0]):
        if candidate and label_value_problem(candidate) is None:
            return candidate
    return None


def system_labels(group: GroupIdentity) -> dict[str, str]:
    """The ``osmo.*`` labels every object of a task group carries."""
    labels = {
        WORKFLOW_ID: group.workflow_id[:63].rstrip("-_."),
        WORKFLOW_UUID: group.workflow_uuid,
        GROUP_NAME: group.group_name[:63].rstrip("-_."),
        GROUP_UUID: group.group_uuid,
    }
    submitted_by = submitted_by_label(group.submitted_by)
    if submitted_by is not None:
        labels[SUBMITTED_BY] = submitted_by
    return labels


def group_variables(group: GroupIdentity, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """Variables of group templates: the defaults and every variable that is not per task."""
    labels = system_labels(group)
    return {
        **defaults,
        "WF_ID": labels[WORKFLOW_ID],
        "WF_UUID": group.workflow_uuid,
        "WF_GROUP_NAME": labels[GROUP_NAME],
        "WF_GROUP_UUID": group.group_uuid,
        "WF_SUBMITTED_BY": labels.get(SUBMITTED_BY),
        "WF_POOL": group.pool,
        "WF_PRIORITY": group.priority.lower(),
    }


def resource_variables(request: ResourceRequest, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """``USER_*`` values of a request over the defaults (what resource rules see)."""
    variables = dict(defaults)
    for name, value in (
        ("USER_CPU", _number(request.cpu)),
        ("USER_GPU", request.gpu),
        ("USER_MEMORY", request.memory),
        ("USER_STORAGE", request.storage),
    ):
        if value is not None:
            variables[name] = value
    for kind in ("MEMORY", "STORAGE"):
        variables.update(_derived(kind, variables.get(f"USER_{kind}")))
    variables["USER_EXCLUDED_NODES"] = "ARRAY:[" + ",".join(request.nodes_excluded) + "]"
    variables["USER_CACHE"] = _cache_size(request.cache_size, variables.get("USER_STORAGE"))
    return variables


def task_variables(
    request: ResourceRequest,
    defaults: Mapping[str, Any],
    group: GroupIdentity,
    task: TaskIdentity,
) -> dict[str, Any]:
    """Every variable a pod template of ``task`` may use."""
    return {**resource_variables(request, defaults), **identity_variables(group, task)}


def identity_variables(group: GroupIdentity, task: TaskIdentity) -> dict[str, Any]:
    """The ``WF_*`` variables and ``USER_CONTAINER_NAME`` of ``task``: who and where it is."""
    variables = group_variables(group, {})
    variables.update(
        USER_CONTAINER_NAME=container_name(task.name),
        WF_TASK_NAME=task.name,
        WF_TASK_UUID=task.uuid,
        WF_RETRY_ID=str(task.retry_id),
        WF_PLATFORM=task.platform,
    )
    if task.lead:  # OSMO defines it for the lead task only
        variables["WF_LEAD_CONTAINER"] = "true"
    return variables


#: A variable's name in ``--set NAME=VALUE`` (the API declares ``SET_PATTERN``).
_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SET_PATTERN = "^[A-Za-z_][A-Za-z0-9_]*="


def parse_set_values(assignments: Sequence[str]) -> dict[str, Any]:
    """``NAME=VALUE`` pairs (``--set``); integers and decimals become numbers."""
    values: dict[str, Any] = {}
    for assignment in assignments:
        name, sep, text = assignment.partition("=")
        if not sep or not _VARIABLE_NAME.fullmatch(name):
            raise UserError(
                f"--set {assignment!r} must look like NAME=VALUE, NAME being a variable name "
                "(letters, digits, '_')"
            )
        values[name] = _typed(text)
    return values


def request_from_variables(values: Mapping[str, Any]) -> tuple[ResourceRequest, dict[str, Any]]:
    """Split ``--set`` values into a resource request (``USER_CPU`` ...) and other variables."""
    fields = {
        "USER_CPU": "cpu",
        "USER_GPU": "gpu",
        "USER_MEMORY": "memory",
        "USER_STORAGE": "storage",
    }
    request: dict[str, Any] = {}
    others: dict[str, Any] = {}
    for name, value in values.items():
        if name in fields:
            request[fields[name]] = str(value) if name in ("USER_MEMORY", "USER_STORAGE") else value
        else:
            others[name] = value
    gpu = request.get("gpu")
    if gpu is not None and not isinstance(gpu, int):
        raise UserError(f"USER_GPU must be a whole number, not {gpu!r}")
    cpu = request.get("cpu")
    if cpu is not None and not isinstance(cpu, int | float):
        raise UserError(f"USER_CPU must be a number of cores, not {cpu!r}")
    return ResourceRequest(**request), others


def _typed(text: str) -> Any:
    if re.match(r"^[+-]?\d+$", text.strip()):
        return int(text)
    if re.match(r"^[+-]?\d+\.\d+$", text.strip()):
        return float(text)
    return text


def _number(value: int | float | None) -> int | float | None:
    """Whole numbers as int, so that ``USER_CPU`` 2 renders as ``2``."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _derived(kind: str, value: Any) -> dict[str, Any]:
    """``USER_<kind>_VAL``, ``_UNIT`` and the value in each unit, for the value in effect."""
    names = [f"USER_{kind}_VAL", f"USER_{kind}_UNIT"] + [f"USER_{kind}_{u}" for u in DERIVED_UNITS]
    if value is None:
        return dict.fromkeys(names)
    text = str(value)
    try:
        size = parse_quantity(text)
    except ValueError as err:
        raise UserError(f"USER_{kind} {text!r} is not a quantity: {err}") from None
    match = _NUMBER_AND_UNIT.match(text)
    number, unit = (match[1], match[2] or "B") if match else (text, "B")
    derived: dict[str, Any] = {f"USER_{kind}_VAL": number, f"USER_{kind}_UNIT": unit}
    for suffix, factor in DERIVED_UNITS.items():
        derived[f"USER_{kind}_{suffix}"] = _plain(size / factor)
    return derived


def _plain(value: Decimal) -> int | float:
    return int(value) if value == value.to_integral_value() else float(value)


def _cache_size(cache_size: str | None, storage: Any) -> str | None:
    """OSMO's ``USER_CACHE``: a quantity, or a percentage (default 90) of the storage."""
    percentage = _PERCENT.match(cache_size) if cache_size is not None else None
    if cache_size is not None and percentage is None:
        try:
            parse_quantity(cache_size)
        except ValueError as err:
            raise UserError(f"cacheSize {cache_size!r} is not a quantity: {err}") from None
        return cache_size
    if storage is None:
        return None
    percent = Decimal(percentage[1]) if percentage else Decimal(90)
    if percent > 100:
        raise UserError(f"cacheSize {cache_size!r} is more than 100% of the storage")
    size = parse_quantity(str(storage)) * percent / 100
    if size >= _MIB:
        return f"{int(size // _MIB)}Mi"
    return str(int(size))
