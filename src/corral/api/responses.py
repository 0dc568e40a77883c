"""What every route answers, as models: the OpenAPI document declares them, FastAPI checks each
answer against its model, and a schema-based fuzzer (tests/api/test_schemathesis.py) checks
that the server keeps to them. Fields that hold user documents (configs, manifests, specs) are
free-form objects; everything corral itself shapes is typed. Unknown fields are refused, so a
field added to an answer without its model fails the tests instead of going undocumented."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

#: Route options: leave out optional fields an answer did not set (``data`` of a revision
#: without its data, ``manifests`` of a group that is not verbose), as before the models.
LEAN: dict[str, Any] = {"response_model_exclude_unset": True}


class Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorBody(Answer):
    """Every 4xx (and the 500 of a bug): the message names the field, ``path`` locates it."""

    message: str
    error_code: str
    field: str | None = None
    path: list[str | int] | None = None


class Message(Answer):
    message: str


class Health(Answer):
    status: str
    database: str
    version: str
    controller: str


class ServiceVersion(Answer):
    """OSMO's ``GET /api/version``: the server's version in parts."""

    major: str
    minor: str
    revision: str
    hash: str


# ---------------------------------------------------------------------------------- configs


class ChangedItemView(Answer):
    name: str
    action: str


class RevisionView(Answer):
    config_type: str
    revision: int
    name: str
    username: str
    created_at: str
    description: str
    tags: list[str]
    #: The items this revision created, updated or deleted (with its data).
    changed: list[ChangedItemView] = []
    #: What the revision set (its created and updated items); with a ``revision`` query, the
    #: type's whole config at that revision.
    data: Any = None


class ConfigList(Answer):
    configs: list[RevisionView]


class ItemChangeView(Answer):
    config_type: str
    name: str
    action: str
    changes: list[dict[str, Any]]


class WriteAnswer(Answer):
    changed: bool
    revisions: list[RevisionView]
    items: list[ItemChangeView]
    #: What the write allowed but will stop submissions (a pool without platforms).
    warnings: list[str] = []


class ApplyAnswer(WriteAnswer):
    dry_run: bool


class DiffAnswer(Answer):
    first_data: Any
    second_data: Any
    changes: list[dict[str, Any]]


# ------------------------------------------------------------------------------------ pools


class PoolMinimal(Answer):
    """OSMO's PoolMinimal (the rest of its fields as the pool config has them)."""

    model_config = ConfigDict(extra="allow")

    name: str
    description: str
    status: str
    backend: str | None
    default_platform: str | None
    platforms: dict[str, dict[str, Any]]


class PageOfPools(Answer):
    """corral only: which pools a list holds (docs/api.md#pages)."""

    offset: int
    #: None: every pool (OSMO's CLI asked).
    limit: int | None
    total: int
    #: The ``offset`` of the next page; None on the last.
    next_offset: int | None


class PoolList(Answer):
    """OSMO's ``{"pools": {name: PoolMinimal}}``, a page of them."""

    pools: dict[str, PoolMinimal]
    page: PageOfPools


class TopologyLevel(Answer):
    level: int
    key: str
    label: str


class PoolTopology(Answer):
    pool: str
    topology_keys: list[TopologyLevel]


class DomainShape(Answer):
    """A finest topology domain of a pool (docs/forecast.md#free-shapes)."""

    domain: str
    trays: int
    healthy: int
    open: int
    free: int
    gpus: int
    free_gpus: int
    task_gpus: int
    #: Whole-node tasks its open nodes hold; of those, what one gang is placed with now.
    physical: int
    largest_gang: int
    fits: str
    whole_free_at: str | None
    forecast_at: str | None


class PoolShapes(Answer):
    pool: str
    at: str
    level: str
    label: str
    priority: str
    #: What the pool's quota leaves work of ``priority``, in words ("": no limit).
    quota: str
    largest_gang: int
    largest_physically: int
    next_whole_free: str | None
    domains: list[DomainShape]


class PoolRender(Answer):
    pool: str
    platform: str
    default_variables: dict[str, Any]
    variables: dict[str, Any]
    pod_template: dict[str, Any]
    provenance: list[dict[str, Any]]
    node_selector: dict[str, Any]
    tolerations: list[Any]
    default_mounts: list[Any]
    resource_validations: list[dict[str, Any]]
    group_templates: list[dict[str, Any]]


class NodeSet(Answer):
    pools: list[dict[str, Any]]


class PoolQuota(Answer):
    node_sets: list[NodeSet]
    resource_sum: dict[str, Any]
    page: PageOfPools


class PoolQueueFigures(Answer):
    """corral only: a listed pool's queue (docs/resources.md)."""

    pool: str
    guarantee: int
    maximum: int
    used: int
    borrowed: int
    preempted: int
    #: GPU-hours the gangs preempted in 24 h lost since their checkpoints.
    lost_gpu_hours: float


class ResourceList(Answer):
    resources: list[dict[str, Any]]
    resource_sum: dict[str, Any]
    pool_queues: list[PoolQueueFigures] = []
    page: PageOfPools


class NodeInfo(Answer):
    model_config = ConfigDict(extra="allow")  # the node's own description, as listed

    node: str
    type: str
    pools: list[dict[str, Any]]


class NodeInfoList(Answer):
    """OSMO's answer for one node: the node of that name in each cluster."""

    resources: list[NodeInfo]


# -------------------------------------------------------------------------------- workflows


class Submitted(Answer):
    name: str
    overview: str
    logs: str
    dashboard_url: str
    warnings: list[str]
    restarted_from: str | None = None


class Validated(Answer):
    name: str
    logs: str
    warnings: list[str]
    restarted_from: str | None = None


class PlannedTaskView(Answer):
    name: str
    uuid: str
    pod_name: str
    platform: str
    lead: bool


class EvictionView(Answer):
    workflow_id: str
    gpus: int
    reclaimed: bool


class PlacementNowView(Answer):
    """Where the group would be placed on the live cluster now, or why not: ``verdict`` is
    ``runs`` (now), ``waits`` (``reason`` says why) or ``never`` (``reason`` is what a
    submission is refused with)."""

    verdict: Literal["runs", "waits", "never"]
    nodes: dict[str, str]
    domains: dict[str, str]
    evicts: list[EvictionView]
    reason: str | None


class PlannedGroupView(Answer):
    name: str
    uuid: str
    upstream: list[str]
    tasks: list[PlannedTaskView]
    manifests: list[dict[str, Any]]
    placement: PlacementNowView | None = None


class DryRun(Answer):
    name: str
    spec: str
    pool: str
    namespace: str
    priority: str
    exec_timeout_s: float
    queue_timeout_s: float
    groups: list[PlannedGroupView]
    restarted_from: str | None = None
    warnings: list[str] = []
    #: Why a group could never run: the dry run shows its objects, a submission is refused.
    could_never_run: str | None = None


SubmitAnswer = Submitted | Validated | DryRun


class WorkflowSummary(Answer):
    """What OSMO's workflow list and a workflow both say; ``labels`` is always empty (corral
    keeps none)."""

    name: str
    pool: str
    status: str
    priority: str
    submit_time: str
    start_time: str | None
    end_time: str | None
    queued_time: float
    overview: str
    logs: str
    labels: dict[str, str]


class WorkflowRow(WorkflowSummary):
    """An item of OSMO's workflow list."""

    workflow_uuid: str
    user: str


class WorkflowList(Answer):
    workflows: list[WorkflowRow]
    more_entries: bool


class AttemptView(Answer):
    """An attempt of a task that ended while the task went on (corral's)."""

    retry_id: int
    node: str | None
    start_time: str | None
    end_time: str
    exit_code: int | None
    message: str | None


class TaskView(Answer):
    name: str
    uuid: str
    pod_name: str
    platform: str
    lead: bool
    status: str
    retry_id: int
    node: str | None
    exit_code: int | None
    start_time: str | None
    end_time: str | None
    message: str | None
    #: corral's: the attempts before this one, oldest first.
    attempts: list[AttemptView] = []


class GroupView(Answer):
    name: str
    uuid: str
    status: str
    upstream: list[str]
    resource_kinds: list[list[str]]
    domains: dict[str, str]
    scheduling_start_time: str | None
    start_time: str | None
    end_time: str | None
    pending_reason: str | None
    tasks: list[TaskView]
    manifests: list[dict[str, Any]] | None = None
    #: A waiting group's start-time forecast, as explain words it (docs/forecast.md).
    start_forecast: str | None = None


class WorkflowView(WorkflowSummary):
    uuid: str
    submitted_by: str
    backend: str
    namespace: str
    exec_timeout_s: float
    queue_timeout_s: float
    spec: str
    cancel_requested_by: str | None
    message: str | None
    restarted_from: str | None
    groups: list[GroupView]


class Canceled(Answer):
    name: str
    message: str


class GroupReason(Answer):
    name: str
    status: str
    reason: str
    #: Where each task is, when ``reason`` sums a large group up.
    details: list[str] = []


class Explained(Answer):
    workflow_id: str
    status: str
    summary: str
    groups: list[GroupReason]


# ------------------------------------------------------------------------------------ users


class NodeHealthView(Answer):
    ready: bool
    ready_since: str | None
    not_ready_reason: str
    cordoned: bool
    cordoned_by: str
    cordon_reason: str
    #: Set while the node is drained: the grace period its tasks get to stop, in seconds.
    drain_grace_s: float | None
    fabric: str
    fabric_reason: str


class NodeChangeView(Answer):
    """One audited change of a node's health: who, when, why, before and after."""

    node: str
    action: str
    by: str
    reason: str
    at: str
    before: NodeHealthView
    after: NodeHealthView


class NodeHistory(Answer):
    node: str
    changes: list[NodeChangeView]


class QueueEntry(Answer):
    """A waiting group (docs/forecast.md#the-queue); one the caller may not read has only
    ``position`` and ``hidden``."""

    position: int | None
    hidden: bool
    workflow_id: str | None = None
    group: str | None = None
    pool: str | None = None
    user: str | None = None
    priority: str | None = None
    tasks: int | None = None
    waiting_s: int | None = None
    queue_position: int | None = None
    p10: str | None = None
    p50: str | None = None
    p90: str | None = None
    on_timeouts: bool | None = None
    forecast_at: str | None = None
    reason: str | None = None
    shape: str | None = None
    gpus: int | None = None
    borrows: int | None = None


class ForecastAccuracy(Answer):
    """How good a pool's published forecasts were over its latest starts
    (docs/forecast.md#accuracy)."""

    pool: str
    starts: int
    forecasts: int
    band_hits_ratio: float
    median_error: float | None


class QueueView(Answer):
    at: str
    entries: list[QueueEntry]
    #: Per pool with starts on record (of ``pools`` when given).
    accuracy: list[ForecastAccuracy]
