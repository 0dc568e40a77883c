"""Table definitions. The schema itself is created by the Alembic migrations."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)

metadata = MetaData()

#: One row per revision of a config type: who, when, why, its tags; what it changed is in
#: ``config_items``.
config_revisions = Table(
    "config_revisions",
    metadata,
    Column("config_type", String(32), nullable=False),
    Column("revision", Integer, nullable=False),
    Column("name", String(256), nullable=False, default=""),
    Column("username", String(256), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("description", Text, nullable=False, default=""),
    Column("tags", JSON, nullable=False),
    Column("deleted_by", String(256), nullable=True),
    Column("deleted_at", DateTime(timezone=True), nullable=True),
    PrimaryKeyConstraint("config_type", "revision"),
    Index("ix_config_revisions_created_at", "created_at"),
)

#: One row per item a config revision set or deleted: the item's value at that revision
#: (NULL: deleted), whether it was created, updated or deleted, and its place among the items
#: the revision changed. The WORKFLOW config is the item named "". A type's config at revision
#: N is the newest row of each name up to N, in the order the items were created.
config_items = Table(
    "config_items",
    metadata,
    Column("config_type", String(32), nullable=False),
    Column("name", String(256), nullable=False),
    Column("revision", Integer, nullable=False),
    Column("position", Integer, nullable=False),
    Column("action", String(16), nullable=False),
    Column("data", JSON(none_as_null=True), nullable=True),
    PrimaryKeyConstraint("config_type", "name", "revision"),
    Index("ix_config_items_revision", "config_type", "revision"),
)

#: A single row that every config write updates first: it serializes writers on both
#: databases, so that validation against the other types and the revision check are race-free.
config_write_lock = Table(
    "config_write_lock",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("writes", Integer, nullable=False),
)

#: Sessions ended before their expiry (log-out), kept until they would have expired.
revoked_sessions = Table(
    "revoked_sessions",
    metadata,
    Column("session_id", String(64), primary_key=True),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Index("ix_revoked_sessions_expires_at", "expires_at"),
)

#: API tokens; only a SHA-256 of the (high-entropy, random) token is stored.
api_tokens = Table(
    "api_tokens",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("name", String(256), nullable=False),
    Column("username", String(256), nullable=False),
    Column("roles", JSON, nullable=False),
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("revoked_at", DateTime(timezone=True), nullable=True),
)

#: Users: API tokens and sessions belong to one; a request acts with the user's roles as they
#: are when it arrives (so removing a role takes effect at once).
users = Table(
    "users",
    metadata,
    Column("username", String(256), primary_key=True),
    Column("roles", JSON, nullable=False),
    #: Per role held, who granted it and when: ``{"<role>": {"by": ..., "at": <ISO time>}}``.
    Column("role_grants", JSON, nullable=False, server_default=text("'{}'")),
    Column("default_pool", String(256), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("created_by", String(256), nullable=False),
    #: New for every user created: a session names it, so a session minted before a user was
    #: deleted does not work for a new user of the same name.
    Column("user_id", String(32), nullable=False),
)

#: One row per accepted workflow; ``workflow_id`` is ``<name>-<number>``.
workflows = Table(
    "workflows",
    metadata,
    Column("workflow_id", String(128), primary_key=True),
    Column("name", String(128), nullable=False),
    Column("number", Integer, nullable=False),
    Column("uuid", String(32), nullable=False, unique=True),
    Column("pool", String(256), nullable=False),
    Column("backend", String(256), nullable=False),
    Column("namespace", String(63), nullable=False),
    Column("status", String(32), nullable=False),
    Column("priority", String(16), nullable=False),
    Column("submitted_by", String(256), nullable=False),
    Column("submitted_at", DateTime(timezone=True), nullable=False),
    Column("exec_timeout_s", Float, nullable=False),
    Column("queue_timeout_s", Float, nullable=False),
    Column("spec", Text, nullable=False),
    Column("template", Text, nullable=True),
    Column("started_at", DateTime(timezone=True), nullable=True),
    Column("ended_at", DateTime(timezone=True), nullable=True),
    Column("cancel_requested_by", String(256), nullable=True),
    Column("message", Text, nullable=True),
    #: ``files[].localpath`` contents sent with the workflow: {localpath: {contents, base64}}.
    Column("local_files", JSON, nullable=True),
    #: The failed workflow this one restarts, if it is a restart.
    Column("restarted_from", String(128), nullable=True),
    #: Why the controller ends it FAILED_SERVER_ERROR: its stored state could not be read
    #: (docs/lifecycle.md#a-workflow-that-cannot-be-read).
    Column("failure", Text, nullable=True),
    UniqueConstraint("name", "number", name="uq_workflows_name_number"),
    Index("ix_workflows_submitted_at", "submitted_at"),
    Index("ix_workflows_status", "status"),
)

#: A task group with the exact objects to create for it, in creation order.
workflow_groups = Table(
    "workflow_groups",
    metadata,
    Column("group_uuid", String(32), primary_key=True),
    Column(
        "workflow_id",
        String(128),
        ForeignKey("workflows.workflow_id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("position", Integer, nullable=False),
    Column("name", String(128), nullable=False),
    Column("status", String(32), nullable=False),
    Column("upstream", JSON, nullable=False),
    Column("resource_kinds", JSON, nullable=False),
    Column("manifests", JSON, nullable=False),
    Column("scheduling_at", DateTime(timezone=True), nullable=True),
    #: When it first waited for a scheduler: its place in the admission order, kept when a
    #: fault, a drain or a preemption puts it back (``scheduling_at`` is this wait's start).
    Column("admitted_at", DateTime(timezone=True), nullable=True),
    Column("started_at", DateTime(timezone=True), nullable=True),
    Column("ended_at", DateTime(timezone=True), nullable=True),
    #: Per set (subgroup name, "" for the group): the topology domain it was placed in.
    Column("domains", JSON, nullable=True),
    #: Why the scheduler could not place the group yet, in the user's terms (a cluster's own
    #: scheduler's reason; corral's own are shared by shape, ``pending_shapes``).
    Column("pending_reason", Text, nullable=True),
    #: While waiting for corral's scheduler: what it asks for (``pending_shapes.shape``).
    Column("pending_shape", String(64), nullable=True),
    Column("ignore_non_lead", Boolean, nullable=False, default=True),
    #: Every object of the group has been deleted from the cluster.
    Column("cleaned", Boolean, nullable=False, default=False),
    #: The scheduler evicted the group (its pods are unbound): its workflow's next step stops
    #: its tasks and ends or requeues it.
    Column("evict", Boolean, nullable=False, default=False),
    #: Why the group was last evicted ("W (queue Q reclaimed its guarantee)").
    Column("preempted_by", Text, nullable=True),
    #: Set with ``evict`` when a node under the group failed: which, when and why (its tasks
    #: end with a backend error, docs/health.md#running-work).
    Column("fault", Text, nullable=True),
    #: Set with ``evict`` by a drain: the grace period its tasks get to stop.
    Column("stop_grace_s", Float, nullable=True),
    #: Set with ``evict`` when its tasks were given notice of the stop, and its deadline
    #: (docs/checkpoints.md#the-notice).
    Column("notice_at", DateTime(timezone=True), nullable=True),
    Column("notice_deadline", DateTime(timezone=True), nullable=True),
    Index("ix_workflow_groups_workflow", "workflow_id"),
    Index("ix_workflow_groups_status", "status"),
)

#: One row per gang evicted by preemption or reclaim (the pools' preempted figures).
preemptions = Table(
    "preemptions",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", DateTime(timezone=True), nullable=False),
    Column("pool", String(256), nullable=False),
    Column("workflow_id", String(128), nullable=False),
    Column("group_uuid", String(32), nullable=False),
    Column("gpus", Integer, nullable=False),
    Column("by_workflow", String(128), nullable=False),
    Column("reclaimed", Boolean, nullable=False),
    Index("ix_preemptions_at", "at"),
)

#: One row per gang stopped by a preemption, a reclaim or a drain (docs/checkpoints.md): GPUs x
#: seconds since its checkpoints, whether every task said it was ready, and the seconds from
#: its notice to its stop.
eviction_stops = Table(
    "eviction_stops",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", DateTime(timezone=True), nullable=False),
    Column("pool", String(256), nullable=False),
    Column("workflow_id", String(128), nullable=False),
    Column("group_uuid", String(32), nullable=False),
    Column("cause", String(16), nullable=False),  # preempted, reclaimed, drained
    Column("gpus", Integer, nullable=False),
    Column("lost_gpu_seconds", Float, nullable=False),
    Column("acknowledged", Boolean, nullable=False),
    Column("stop_seconds", Float, nullable=False),
    Index("ix_eviction_stops_at", "at"),
)

#: One row per group a node fault ended or requeued: the GPU-seconds of work it lost.
node_faults = Table(
    "node_faults",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", DateTime(timezone=True), nullable=False),
    Column("pool", String(256), nullable=False),
    Column("workflow_id", String(128), nullable=False),
    Column("group_uuid", String(32), nullable=False),
    Column("node", String(253), nullable=False),
    Column("reason", Text, nullable=False),
    Column("gpus", Integer, nullable=False),
    Column("gpu_seconds", Float, nullable=False),
    Index("ix_node_faults_pool", "pool"),
)

#: The latest start-time forecast of each waiting group (docs/forecast.md), replaced whole.
forecasts = Table(
    "forecasts",
    metadata,
    Column("group_uuid", String(32), primary_key=True),
    Column("workflow_id", String(128), nullable=False),
    Column("computed_at", DateTime(timezone=True), nullable=False),
    Column("p10", DateTime(timezone=True), nullable=True),
    Column("p50", DateTime(timezone=True), nullable=True),
    Column("p90", DateTime(timezone=True), nullable=True),
    Column("queue", String(256), nullable=False),
    Column("queue_position", Integer, nullable=False),
    Column("position", Integer, nullable=False),
    #: The workflow whose group's end it waits on most often.
    Column("waits_on", String(128), nullable=True),
    Column("on_timeouts", Boolean, nullable=False),
    #: The topology domain it most likely starts in.
    Column("lands_in", String(63), nullable=True),
    #: Since when the work it waits on has run (its start, or its wait's if not started).
    Column("waits_on_since", DateTime(timezone=True), nullable=True),
    Index("ix_forecasts_workflow", "workflow_id"),
)

#: The forecasts published for each group, kept until it starts (``store/forecast_records.py``):
#: how often the bands held, per pool, and what calibrates the next bands.
forecast_records = Table(
    "forecast_records",
    metadata,
    Column("group_uuid", String(32), primary_key=True),
    Column("published_at", DateTime(timezone=True), primary_key=True),
    Column("pool", String(256), nullable=False),
    Column("p10", DateTime(timezone=True), nullable=True),
    Column("p50", DateTime(timezone=True), nullable=True),
    Column("p90", DateTime(timezone=True), nullable=True),
    #: It said "unknown" (the work it waited on had no past runs): p90 a bound, no median.
    Column("unknown", Boolean, nullable=False),
    #: When the group started after it (None: it still waits).
    Column("started_at", DateTime(timezone=True), nullable=True),
    Index("ix_forecast_records_started", "started_at"),
)

#: What each of the latest forecast refreshes cost.
forecast_refreshes = Table(
    "forecast_refreshes",
    metadata,
    Column("computed_at", DateTime(timezone=True), primary_key=True),
    Column("groups", Integer, nullable=False),
    Column("cpu_seconds", Float, nullable=False),
    Column("wall_seconds", Float, nullable=False),
)

#: When each topology domain (node label, value) is next wholly free, by the latest forecast.
domain_forecasts = Table(
    "domain_forecasts",
    metadata,
    Column("label", String(317), primary_key=True),
    Column("value", String(63), primary_key=True),
    Column("computed_at", DateTime(timezone=True), nullable=False),
    #: None: not within the forecast's horizon.
    Column("free_at", DateTime(timezone=True), nullable=True),
)

workflow_tasks = Table(
    "workflow_tasks",
    metadata,
    Column("task_uuid", String(32), primary_key=True),
    Column(
        "group_uuid",
        String(32),
        ForeignKey("workflow_groups.group_uuid", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("position", Integer, nullable=False),
    Column("name", String(128), nullable=False),
    Column("pod_name", String(253), nullable=False),
    Column("platform", String(256), nullable=False),
    Column("lead", Boolean, nullable=False),
    Column("status", String(32), nullable=False),
    Column("retry_id", Integer, nullable=False),
    Column("started_at", DateTime(timezone=True), nullable=True),
    Column("ended_at", DateTime(timezone=True), nullable=True),
    Column("node", String(253), nullable=True),
    Column("exit_code", Integer, nullable=True),
    Column("message", Text, nullable=True),
    #: The task's own exitActions: [[action, [[low, high], ...]], ...].
    Column("exit_actions", JSON, nullable=True),
    #: Its last committed checkpoint as it reported it (docs/checkpoints.md).
    Column("checkpoint_at", DateTime(timezone=True), nullable=True),
    Column("checkpoint_step", BigInteger, nullable=True),
    Column("checkpoint_note", Text, nullable=True),
    #: When it said it was ready to stop, after a notice.
    Column("ready_at", DateTime(timezone=True), nullable=True),
    Index("ix_workflow_tasks_group", "group_uuid"),
    # Room on each page for a task's status updates to stay HOT (migration 0007).
    postgresql_with={"fillfactor": 50},
)

#: The objects of the embedded (simulated) cluster: what a Kubernetes API server would hold.
#: ``id`` grows with every create, so it records creation order; ``node`` is a pod's binding.
cluster_objects = Table(
    "cluster_objects",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("backend", String(256), nullable=False),
    Column("api_version", String(256), nullable=False),
    Column("kind", String(128), nullable=False),
    Column("namespace", String(63), nullable=False),
    Column("name", String(253), nullable=False),
    Column("group_uuid", String(32), nullable=True),
    Column("labels", JSON, nullable=False),
    Column("body", JSON, nullable=False),
    Column("node", String(253), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint(
        "backend", "api_version", "kind", "namespace", "name", name="uq_cluster_objects_key"
    ),
    Index("ix_cluster_objects_group", "group_uuid"),
    Index("ix_cluster_objects_node", "node"),
)

#: What a task attempt printed, kept when the backend's own copy goes away with its pod
#: (Kubernetes); the tail of at most ``LOG_TAIL_BYTES``.
task_logs = Table(
    "task_logs",
    metadata,
    Column("task_uuid", String(32), nullable=False),
    Column("retry_id", Integer, nullable=False),
    Column("text", Text, nullable=False),
    PrimaryKeyConstraint("task_uuid", "retry_id"),
)

#: A task's attempts that ended while the task went on (placed again after a fault, a drain or
#: a preemption, or rescheduled by an exit action): where and when each ran, how it ended and
#: why (docs/lifecycle.md#attempts). The task's own row is its current attempt.
task_attempts = Table(
    "task_attempts",
    metadata,
    Column("task_uuid", String(32), nullable=False),
    Column("retry_id", Integer, nullable=False),
    Column("node", String(253), nullable=True),
    Column("started_at", DateTime(timezone=True), nullable=True),
    Column("ended_at", DateTime(timezone=True), nullable=False),
    Column("exit_code", Integer, nullable=True),
    Column("message", Text, nullable=True),
    PrimaryKeyConstraint("task_uuid", "retry_id"),
)

#: The lifecycle controller's lease: one row, held by one server at a time (docs/lifecycle.md).
leader_lease = Table(
    "leader_lease",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("holder", String(128), nullable=False),
    #: Grows by one at every change of holder: fences a former leader's late writes.
    Column("epoch", Integer, nullable=False),
    #: Grows by one at every renewal: the others watch it move.
    Column("renewals", Integer, nullable=False),
    Column("renewed_at", DateTime(timezone=True), nullable=False),
)

#: What the controller has not seen yet: a workflow submitted or asked to cancel by any server.
#: Rows are hints, deleted once read (by id: ids of concurrent inserts commit out of order); a
#: controller that starts leading reads every alive workflow anyway.
controller_inbox = Table(
    "controller_inbox",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("workflow_id", String(128), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

#: Why the groups of one shape (the same pods, constraints, queue and priority class) wait for
#: corral's scheduler: one row per shape, not per group, so a change of occupancy costs one write
#: however many groups wait. ``pod_names`` are the pods the reason was written for, in order:
#: a group reads its own pod names in their place.
pending_shapes = Table(
    "pending_shapes",
    metadata,
    Column("shape", String(64), primary_key=True),
    Column("reason", Text, nullable=False),
    Column("pod_names", JSON, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)

#: A submission's ``Idempotency-Key`` (per user) and the workflow it made: a retry with the same
#: key answers that workflow instead of making another. ``request_hash`` tells a retry from a
#: different request that reuses the key.
idempotency_keys = Table(
    "idempotency_keys",
    metadata,
    Column("username", String(256), nullable=False),
    Column("key", String(256), nullable=False),
    Column("workflow_id", String(128), nullable=False),
    Column("request_hash", String(64), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    PrimaryKeyConstraint("username", "key"),
)

#: The last number given to a workflow name (``<name>-<n>``): a submission takes its number
#: before it is planned, so concurrent submissions of one name never plan the same id twice.
workflow_numbers = Table(
    "workflow_numbers",
    metadata,
    Column("name", String(128), primary_key=True),
    Column("last", Integer, nullable=False),
)

#: Every change of a node's health made on a running server (cordon, uncordon, fail, heal):
#: who, when, why, and the health before and after. A node's current health is the ``after``
#: of its latest row; nodes without one have the health their cluster description says.
node_changes = Table(
    "node_changes",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("backend", String(256), nullable=False),
    Column("node", String(253), nullable=False),
    Column("action", String(32), nullable=False),
    Column("by", String(256), nullable=False),
    Column("reason", String(1024), nullable=False),
    Column("at", DateTime(timezone=True), nullable=False),
    Column("before", JSON, nullable=False),
    Column("after", JSON, nullable=False),
    Index("ix_node_changes_backend_node", "backend", "node"),
)
