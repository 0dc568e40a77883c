"""Config item models: OSMO's JSON, accepted as OSMO writes it, validated strictly. This module
holds the strict base model and the POOL, template and RESOURCE_VALIDATION items; ROLE, BACKEND
and WORKFLOW have their own modules (``role_models``, ``backend_models``, ``workflow_models``).

Differences from OSMO (each listed in docs/configs.md): unknown keys are rejected instead of
silently dropped; durations, exit-action ranges, quota bounds, topology keys and Jinja syntax are
checked when written; ``NE`` is a supported operator; derived read-only fields that OSMO's
verbose views print (``parsed_*``, ``status`` ...) are accepted and dropped so that a shown
config can be edited and written back.
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from corral.domain.formats.durations import parse_duration
from corral.domain.formats.kubernetes_names import label_key_problem
from corral.domain.formats.names import check_name
from corral.domain.formats.signals import NOTICE_SIGNALS
from corral.domain.formats.unknown_fields import unknown_field
from corral.domain.jinja.templating import check_jinja
from corral.domain.schemas.partial import template_problem


class FieldProblem(ValueError):
    """A problem at a known place below the value being validated (path relative to it)."""

    def __init__(self, key: str | int, message: str, *more: str | int) -> None:
        super().__init__(message)
        self.path: tuple[str | int, ...] = (key, *more)


class StrictModel(BaseModel):
    """User input: unknown keys and wrong JSON types are errors."""

    model_config = ConfigDict(extra="forbid", strict=True)


def drop_read_only(data: Any, fields: tuple[str, ...]) -> Any:
    if isinstance(data, dict):
        return {key: value for key, value in data.items() if key not in fields}
    return data


def check_duration(value: str) -> str:
    if value:
        parse_duration(value)  # raises ValueError with OSMO's message
    return value


# ------------------------------------------------------------------------------------ POOL


class GpuQuota(StrictModel):
    """KAI queue quota for the pool's GPUs; -1 means "no limit"."""

    guarantee: int = Field(default=-1, ge=-1)
    maximum: int = Field(default=-1, ge=-1)
    weight: int = Field(default=1, ge=0)

    @model_validator(mode="after")
    def _guarantee_within_maximum(self) -> GpuQuota:
        if self.maximum != -1 and self.guarantee > self.maximum:
            raise FieldProblem(
                "guarantee", f"guarantee {self.guarantee} is larger than maximum {self.maximum}"
            )
        return self


class PoolResources(StrictModel):
    gpu: GpuQuota | None = None


class Preemption(StrictModel):
    """corral only: how evictions treat the pool's running work (docs/scheduler.md).

    ``min_runtime``: work of the pool that has run less than this is never a victim of
    preemption or reclaim (KAI's ``preemptMinRuntime`` and ``reclaimMinRuntime`` of the pool's
    queue). ``grace_period``: an evicted task gets SIGTERM and this long to stop before it is
    killed. ``notice``: before a preemption, a reclaim or a drain stops a gang, its tasks get a
    notice this long ahead (empty: the grace period; docs/checkpoints.md); ``notice_signal``
    is sent to a local task with it: none by default, since a task that does not handle it
    dies of it (a plain ``sh`` does, of SIGUSR1) and loses its notice; a task learns of it
    from its control directory, the API and its pod's annotation, and gets SIGTERM at the
    deadline. A task may ask for a signal of its own (``noticeSignal``)."""

    min_runtime: str = "0s"
    grace_period: str = "30s"
    notice: str = ""
    notice_signal: str = ""

    @field_validator("min_runtime", "grace_period", "notice")
    @classmethod
    def _durations(cls, value: str) -> str:
        return check_duration(value) if value else value

    @field_validator("notice_signal")
    @classmethod
    def _signal(cls, value: str) -> str:
        if value and value not in NOTICE_SIGNALS:
            raise ValueError(
                f"{value!r} is not a notice signal: use one of {', '.join(NOTICE_SIGNALS)}, "
                'or "" for none'
            )
        return value

    def notice_seconds(self) -> float:
        """How long before a stop its notice comes (the grace period when not set)."""
        return _seconds(self.notice) if self.notice else self.grace_seconds()

    def min_runtime_seconds(self) -> int:
        """``min_runtime`` in whole seconds, rounded up (KAI's queues take seconds)."""
        return math.ceil(_seconds(self.min_runtime))

    def grace_seconds(self) -> float:
        return _seconds(self.grace_period)


def _seconds(duration: str) -> float:
    return parse_duration(duration).total_seconds() if duration else 0.0


class PoolFabric(StrictModel):
    """corral only: NVLink fabric health in placement (docs/health.md#degraded-domains).

    ``nvlink_key``: the topology key whose domains are NVLink domains (an NVL72 rack's
    clique); empty: the key whose label is GPU Feature Discovery's ``nvidia.com/gpu.clique``,
    if any. ``partial_domains``: a gang that must share an NVLink domain may use one with a
    NotReady or fabric-degraded tray, on its open trays; by default it waits for a whole
    healthy domain."""

    nvlink_key: str = ""
    partial_domains: bool = False


class TopologyKey(StrictModel):
    """A user-facing topology level name mapped to a node label (coarsest level first)."""

    key: str
    label: str

    @field_validator("key")
    @classmethod
    def _key_syntax(cls, key: str) -> str:
        if not re.match(r"^[a-z0-9]([-a-z0-9_.]*[a-z0-9])?$", key):
            raise ValueError(
                f"topology key {key!r} must be lowercase letters, digits, '-', '_' or '.', "
                "starting and ending with a letter or digit"
            )
        return key

    @field_validator("label")
    @classmethod
    def _label_syntax(cls, label: str) -> str:
        problem = label_key_problem(label)
        if problem:
            raise ValueError(f"{label!r} is not a valid Kubernetes label key: {problem}")
        return label


_PLATFORM_READ_ONLY = (
    "parsed_pod_template",
    "parsed_resource_validations",
    "parsed_pod_template_for_accounting",
    "tolerations",
    "labels",
    "default_mounts",
)

_EXIT_RANGE = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$")
_EXIT_ACTIONS = ("COMPLETE", "FAIL", "RESCHEDULE")


class Platform(StrictModel):
    description: str = ""
    host_network_allowed: bool = False
    privileged_allowed: bool = False
    allowed_mounts: list[str] = []
    default_variables: dict[str, Any] = {}
    resource_validations: list[str] = []
    override_pod_template: list[str] = []

    @model_validator(mode="before")
    @classmethod
    def _ignore_read_only(cls, data: Any) -> Any:
        return drop_read_only(data, _PLATFORM_READ_ONLY)


_POOL_READ_ONLY = (
    "status",
    "parsed_pod_template",
    "parsed_resource_validations",
    "parsed_group_templates",
    "parsed_pod_template_for_accounting",
    "last_heartbeat",
)


class Pool(StrictModel):
    name: str = ""
    description: str = ""
    backend: str
    default_platform: str | None = None
    enable_maintenance: bool = False
    download_type: Literal["download"] | None = None
    default_exec_timeout: str = ""
    default_queue_timeout: str = ""
    max_exec_timeout: str = ""
    max_queue_timeout: str = ""
    default_exit_actions: dict[str, str] = {}
    resources: PoolResources = PoolResources()
    preemption: Preemption = Preemption()
    fabric: PoolFabric = PoolFabric()
    topology_keys: list[TopologyKey] = []
    common_default_variables: dict[str, Any] = {}
    common_resource_validations: list[str] = []
    common_pod_template: list[str] = []
    common_group_templates: list[str] = []
    platforms: dict[str, Platform] = {}

    @model_validator(mode="before")
    @classmethod
    def _prepare(cls, data: Any) -> Any:
        data = drop_read_only(data, _POOL_READ_ONLY)
        if isinstance(data, dict) and "action_permissions" in data:
            raise FieldProblem(
                "action_permissions",
                "action_permissions was removed in OSMO 6.2; grant workflow:Exec, "
                "workflow:PortForward, workflow:Cancel or workflow:Rsync through ROLE policies",
            )
        exits = data.get("default_exit_actions") if isinstance(data, dict) else None
        if isinstance(exits, dict):
            # OSMO's docs write exit codes as integers; its model wants strings. Take both.
            data = {
                **data,
                "default_exit_actions": {
                    key: str(value)
                    if isinstance(value, int) and not isinstance(value, bool)
                    else value
                    for key, value in exits.items()
                },
            }
        return data

    @field_validator(
        "default_exec_timeout", "default_queue_timeout", "max_exec_timeout", "max_queue_timeout"
    )
    @classmethod
    def _timeouts(cls, value: str) -> str:
        return check_duration(value)

    @field_validator("default_exit_actions")
    @classmethod
    def _exit_actions(cls, actions: dict[str, str]) -> dict[str, str]:
        for key, codes in actions.items():
            if key.upper() not in _EXIT_ACTIONS:
                raise ValueError(f"exit action {key!r} is not one of {', '.join(_EXIT_ACTIONS)}")
            if not _EXIT_RANGE.match(codes):
                raise ValueError(
                    f"exit codes {codes!r} for {key} must look like '1,3-5' "
                    "(numbers and ranges separated by commas)"
                )
        return actions

    @model_validator(mode="after")
    def _consistent(self) -> Pool:
        for platform_name in self.platforms:
            check_name("Platform", platform_name, path=("platforms", platform_name))
        if self.default_platform is not None and self.default_platform not in self.platforms:
            raise FieldProblem(
                "default_platform",
                f"Default platform {self.default_platform} not in platforms "
                f"({', '.join(self.platforms) or 'none defined'})",
            )
        _check_unique_topology(self.topology_keys)
        keys = [entry.key for entry in self.topology_keys]
        if self.fabric.nvlink_key and self.fabric.nvlink_key not in keys:
            raise FieldProblem(
                "fabric",
                f"nvlink_key {self.fabric.nvlink_key!r} is not one of the pool's topology keys "
                f"({', '.join(keys) or 'none defined'})",
                "nvlink_key",
            )
        for kind, timeouts in (
            ("exec", ("default_exec_timeout", "max_exec_timeout")),
            ("queue", ("default_queue_timeout", "max_queue_timeout")),
        ):
            default, maximum = (getattr(self, field) for field in timeouts)
            if default and maximum and parse_duration(default) > parse_duration(maximum):
                raise FieldProblem(
                    timeouts[0],
                    f"default_{kind}_timeout {default} is longer than max_{kind}_timeout {maximum}",
                )
        return self


def _check_unique_topology(keys: list[TopologyKey]) -> None:
    for attribute in ("key", "label"):
        seen: set[str] = set()
        for index, entry in enumerate(keys):
            value = getattr(entry, attribute)
            if value in seen:
                raise FieldProblem(
                    "topology_keys",
                    f"{attribute} {value!r} appears more than once; each "
                    f"topology level needs its own {attribute}",
                    index,
                    attribute,
                )
            seen.add(value)


# ------------------------------------------------------------------------ POD / GROUP TEMPLATE

_POD_TEMPLATE_KEYS = ("metadata", "spec")


def check_pod_template(template: Any) -> dict[str, Any]:
    """A pod template is a partial Pod manifest: an object with ``spec`` and/or ``metadata``."""
    if not isinstance(template, dict):
        raise ValueError("a pod template must be a JSON object (a partial Pod manifest)")
    for key, value in template.items():
        if key not in _POD_TEMPLATE_KEYS:
            raise FieldProblem(key, unknown_field(key, _POD_TEMPLATE_KEYS))
        if key in ("metadata", "spec") and not isinstance(value, dict):
            raise FieldProblem(key, f"{key} must be an object")
    _check_fields(template, "v1", "Pod")
    return template


def _check_fields(template: dict[str, Any], api_version: str, kind: str) -> None:
    """Every field of the template fits the schema of its kind (``partial_schema``)."""
    found = template_problem(template, api_version, kind)
    if found is None:
        return
    path, message = found
    if not path:
        raise ValueError(message)
    raise FieldProblem(path[0], message, *path[1:])


def check_group_template(template: Any) -> dict[str, Any]:
    """A group template is a full Kubernetes manifest without a namespace."""
    if not isinstance(template, dict):
        raise ValueError("a group template must be a JSON object (a Kubernetes manifest)")
    for key in ("apiVersion", "kind"):
        if not isinstance(template.get(key), str) or not template[key]:
            raise FieldProblem(key, f'Group template must have "{key}" field (a non-empty string).')
    metadata = template.get("metadata")
    if not isinstance(metadata, dict):
        raise FieldProblem("metadata", 'Group template must have "metadata.name" field.')
    if not isinstance(metadata.get("name"), str) or not metadata["name"]:
        raise FieldProblem("metadata", 'Group template must have "metadata.name" field.', "name")
    if metadata.get("namespace"):
        raise FieldProblem(
            "metadata",
            'Group template must not have "metadata.namespace" set. '
            "The namespace is assigned by corral at runtime.",
            "namespace",
        )
    _check_fields(template, template["apiVersion"], template["kind"])
    return template


# ---------------------------------------------------------------------- RESOURCE_VALIDATION

Operator = Literal["GT", "GE", "LT", "LE", "EQ", "NE"]


class ResourceRule(StrictModel):
    operator: Operator
    left_operand: str
    right_operand: str
    assert_message: str

    @field_validator("left_operand", "right_operand", mode="before")
    @classmethod
    def _numbers_as_text(cls, value: Any) -> Any:
        # OSMO demands quoted operands ('0'); a bare number is what was meant, so take it.
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
        return value

    @field_validator("left_operand", "right_operand", "assert_message")
    @classmethod
    def _valid_jinja(cls, value: str) -> str:
        try:
            check_jinja(value)
        except Exception as err:  # UserError -> pydantic error at this field
            raise ValueError(str(err)) from None
        return value
