"""The composition root: one database, its stores and the services built on them."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import platformdirs
from sqlalchemy import Engine, make_url, text
from sqlalchemy.exc import SQLAlchemyError

from corral.backends.embedded.bound_pods import BoundPodCache
from corral.backends.embedded.local_execution import LocalProcessExecution
from corral.backends.embedded.objects import ClusterObjectStore
from corral.backends.embedded.simulated import SimulatedExecution
from corral.backends.embedded.task_sandbox import confinement_for, private_paths
from corral.backends.execution import TaskExecutor, TaskRun
from corral.backends.registry import Backends
from corral.domain.cluster.description import Cluster, parse_cluster
from corral.domain.configs.defaults import initial_bundle
from corral.domain.configs.snapshot import Configs
from corral.domain.formats.durations import parse_duration
from corral.domain.platform.nodes import Node
from corral.domain.workflows.plan import WorkflowPlan
from corral.domain.workflows.record import StoredTask, StoredWorkflow, pod_of
from corral.errors import UserError
from corral.files import read_bundle_directory
from corral.services.auth.task_tokens import TaskTokens
from corral.services.capacity import (
    ClusterCapacity,
    backend_nodes,
    cluster_of,
    read_capacity,
)
from corral.services.config_service import ConfigService
from corral.services.config_writes import WriteMeta, WriteResult
from corral.services.lifecycle.controller import LifecycleController
from corral.services.lifecycle.forecasting import Forecaster, in_worker
from corral.services.lifecycle.leadership import Leadership
from corral.services.nodes import KubernetesNodes, NodeService
from corral.services.placement_now import GroupPlacement, placements_now
from corral.services.submission import SubmissionService
from corral.store.config_store import ConfigStore
from corral.store.database import make_engine, migrate
from corral.store.forecasts import ForecastStore
from corral.store.lease import LeaseRow, LeaseStore
from corral.store.node_changes import NodeChangeStore
from corral.store.revoked_sessions import RevokedSessions
from corral.store.tokens import TokenStore
from corral.store.users import UserStore
from corral.store.workflows import WorkflowStore
from corral.store.workflows.listings import WorkflowListings

Clock = Callable[[], datetime]
#: How far back the pool views count preempted GPUs.
PREEMPTED_WINDOW = timedelta(hours=24)


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class Runtime:
    engine: Engine
    configs: ConfigService
    tokens: TokenStore
    users: UserStore
    cluster: Cluster
    workflows: WorkflowStore
    submissions: SubmissionService
    #: The objects of the embedded cluster (pods with their node, PodGroups, ComputeDomains...).
    objects: ClusterObjectStore
    #: Where local-process tasks get their work directories and logs.
    work_dir: Path
    #: What no local task may read: data and task directories, the database file, the
    #: server user's home and credentials, the temporary directory (docs/lifecycle.md#trust).
    private: tuple[Path, ...] = ()
    #: The cluster behind each BACKEND config (embedded, or a connected Kubernetes cluster).
    backends: Backends = field(init=False)
    #: Lists, counts and queues of many workflows for the API and the pages.
    listings: WorkflowListings = field(init=False)
    #: The embedded cluster's bound pods, read incrementally for the pool views.
    bound_pods: BoundPodCache = field(init=False)
    #: Sessions ended by a log-out before they expired.
    revoked_sessions: RevokedSessions = field(init=False)
    #: The embedded cluster's nodes with their health now, and changing it (docs/health.md).
    node_admin: NodeService = field(init=False)
    #: The latest start-time forecasts (docs/forecast.md).
    forecasts: ForecastStore = field(init=False)
    #: This server's part in the controller lease when the controller runs in this process
    #: (``corral server`` on SQLite); None: not here.
    leadership: Leadership | None = None
    #: The server's name in the lease row when its controller runs in a child process
    #: (``corral server`` on PostgreSQL, :mod:`corral.services.lifecycle.process`).
    lease_holder: str | None = None

    def __post_init__(self) -> None:
        self.backends = Backends(self.configs.state, self.objects, self.embedded_executor)
        self.bound_pods = BoundPodCache(self.objects)
        self.listings = WorkflowListings(self.engine)
        self.revoked_sessions = RevokedSessions(self.engine, utc_now)
        changes = NodeChangeStore(self.engine, utc_now)
        self.forecasts = ForecastStore(self.engine)
        self.node_admin = NodeService(
            changes, self.configs, self.cluster, utc_now, kubernetes=self._kubernetes_nodes
        )

    def _kubernetes_nodes(self) -> list[KubernetesNodes]:
        state = self.configs.state()
        return [b for b in self.backends.kubernetes(state) if isinstance(b, KubernetesNodes)]

    def executor(self, backend: str) -> TaskExecutor:
        return self.backends.get(backend).executor()

    def embedded_executor(self, backend: str) -> TaskExecutor:
        """How ``backend`` runs tasks on the embedded cluster, per its ``execution`` setting."""
        execution = self.configs.state().backend(backend).execution
        if execution.mode == "local_processes":
            confinement = confinement_for(execution, backend, self.private)
            return LocalProcessExecution(self.work_dir, confinement)
        return SimulatedExecution(parse_duration(execution.simulated_duration))

    def task_logs(self, workflow: StoredWorkflow, task: StoredTask) -> str:
        """What the latest attempt of ``task`` printed ("" before it started)."""
        if task.started_at is None:
            return ""
        kept = self.listings.kept_log(task.uuid, task.retry_id)
        if kept is not None:
            return kept
        pod = pod_of(workflow, task)
        run = TaskRun(task.uuid, task.retry_id, pod, task.started_at)
        return self.executor(workflow.backend).logs(run)

    def lifecycle(
        self,
        clock: Clock = utc_now,
        *,
        forecast_every: float | None = None,
        task_tokens: TaskTokens | None = None,
    ) -> LifecycleController:
        """The controller that runs this runtime's workflows on the embedded cluster; with
        ``forecast_every``, it also keeps the waiting groups' start-time forecasts fresh,
        forecasting at most every so many seconds, in a worker process; with ``task_tokens``,
        it gives each task its own token."""
        return LifecycleController(
            workflows=self.workflows,
            configs=self.configs.state,
            nodes=self.node_admin.nodes,
            backends=self.backends,
            clock=clock,
            leadership=self.leadership,
            forecaster=(
                Forecaster(
                    self.forecasts,
                    self.listings.completed_runtimes,
                    every_seconds=forecast_every,
                    simulate=in_worker(),
                )
                if forecast_every is not None
                else None
            ),
            task_tokens=task_tokens,
        )

    def join_leadership(self, ttl_seconds: float, holder: str | None = None) -> Leadership:
        """Take part in the controller lease of this database (``corral server``)."""
        self.leadership = Leadership(
            LeaseStore(self.engine, utc_now), holder=holder, ttl_seconds=ttl_seconds
        )
        return self.leadership

    def controller_role(self) -> str:
        """``leader`` when this server's controller holds the lease, ``standby`` when another
        one does, ``none`` when this server runs no controller, ``unknown`` when the database
        does not say."""
        if self.leadership is not None:
            return self.leadership.role
        if self.lease_holder is None:
            return "none"
        try:
            row = LeaseStore(self.engine, utc_now).read()
        except SQLAlchemyError:
            return "unknown"
        return "leader" if row is not None and row.holder == self.lease_holder else "standby"

    def controller_lease(self) -> LeaseRow | None:
        """Who holds the controller lease of this database, if anyone (None when unknown)."""
        try:
            return LeaseStore(self.engine, utc_now).read()
        except SQLAlchemyError:
            return None

    def capacity(self, configs: Configs) -> list[ClusterCapacity]:
        """Per cluster of ``state``: its nodes, the pods holding resources and its pools."""
        return read_capacity(configs, self.node_admin.cluster(), self.backends, self.bound_pods)

    def recently_preempted(self) -> dict[str, int]:
        """Per pool, the GPUs of its groups evicted by preemption or reclaim in the last 24
        hours."""
        return self.listings.preempted_gpus(utc_now() - PREEMPTED_WINDOW)

    def recently_lost(self) -> dict[str, float]:
        """Per pool, the GPU-seconds its preempted or reclaimed gangs lost since their
        checkpoints in the last 24 hours."""
        return self.listings.lost_to_preemption(utc_now() - PREEMPTED_WINDOW)

    def placements_now(self, configs: Configs, plan: WorkflowPlan) -> list[GroupPlacement]:
        """Where ``plan``'s groups would be placed on its pool's cluster now (a dry run)."""
        cluster = cluster_of(self.capacity(configs), plan.submitter.pool)
        return [] if cluster is None else placements_now(configs, plan, cluster, utc_now())

    def nodes_of(self, backend: str) -> tuple[Node, ...]:
        """The nodes the pools of ``backend`` run on (the submission's node checks)."""
        return backend_nodes(
            self.configs.state(), self.node_admin.cluster(), self.backends, backend
        )

    def database_ok(self) -> bool:
        try:
            with self.engine.connect() as connection:
                connection.execute(text("SELECT 1"))
        except Exception:
            return False
        return True


def _database_file(database_url: str) -> Path | None:
    """The SQLite file of ``database_url`` (None for PostgreSQL or an in-memory database)."""
    url = make_url(database_url)
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return None
    return Path(url.database)


def tempfile_root() -> Path:
    """The machine's temporary directory: local tasks of other users have their homes there."""
    return Path(tempfile.gettempdir())


def example_cluster_file() -> Path:
    """The example cluster: in the source tree, or packaged inside the wheel."""
    source_tree = Path(__file__).resolve().parents[3] / "examples" / "clusters"
    packaged = Path(__file__).resolve().parents[1] / "_examples" / "clusters"
    return (source_tree if source_tree.is_dir() else packaged) / "example.yaml"


def read_cluster(path: Path) -> Cluster:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"cannot read the cluster description {path}: {err}") from None
    return parse_cluster(text, source=str(path))


def open_runtime(
    database_url: str,
    clock: Clock = utc_now,
    cluster: Cluster | None = None,
    work_dir: Path | None = None,
    private: Sequence[Path] = (),
) -> Runtime:
    """Connect, migrate the schema, and record the initial configuration on first use.

    ``cluster`` describes the nodes of every backend (default: the example cluster);
    ``work_dir`` holds local-process tasks' files (default: the user data dir); ``private``
    are paths besides those that local tasks must not read (the server's data directory)."""
    engine = make_engine(database_url)
    migrate(engine)
    tasks = work_dir or Path(platformdirs.user_data_dir("corral")) / "tasks"
    users = UserStore(engine, clock)
    configs = ConfigService(ConfigStore(engine, clock), role_holders=users.role_holders)
    nodes = cluster or read_cluster(example_cluster_file())
    workflows = WorkflowStore(engine, clock)
    runtime = Runtime(
        engine,
        configs,
        TokenStore(engine, clock),
        users,
        nodes,
        workflows,
        SubmissionService(
            configs,
            workflows,
            lambda backend: runtime.nodes_of(backend),
            lambda state, plan: runtime.placements_now(state, plan),
        ),
        ClusterObjectStore(engine, clock),
        tasks,
        tuple(private_paths(*private, tasks, _database_file(database_url), tempfile_root())),
    )
    runtime.configs.initialize(initial_bundle())
    return runtime


def load_examples(runtime: Runtime, directory: Path) -> WriteResult:
    """Apply every config file of ``directory`` (not its subfolders) as one bundle."""
    bundle, _ = read_bundle_directory(directory)
    if not bundle:
        raise UserError(f"{directory} holds no config files")
    meta = WriteMeta(
        username="system",
        description="Load example configs (--demo)",
        tags=["examples"],
    )
    return runtime.configs.apply(bundle, meta, dry_run=False)
