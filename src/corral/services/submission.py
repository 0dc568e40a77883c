"""The submission pipeline of ``POST /api/pool/{pool}/workflow``.

Order (each failure a 4xx, nothing stored): pool exists and is open → access → spec (Jinja,
then the strict model) → task count → topology keys → platforms → resource rules → platform
security → objects of every group, schema-checked → stored in one transaction.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from functools import partial
from typing import Any

from corral.domain.configs.snapshot import Configs
from corral.domain.configs.workflow_models import WorkflowConfig
from corral.domain.platform.nodes import Node
from corral.domain.workflows.plan import Submitter, WorkflowPlan, random_id
from corral.domain.workflows.plan_checks import check_pool_open, check_priority
from corral.domain.workflows.restart import restart_document
from corral.domain.workflows.spec import (
    PreviousInput,
    TaskFileContents,
    WorkflowSpec,
    previous_inputs,
)
from corral.domain.workflows.spec_parser import parse_workflow_spec
from corral.domain.workflows.spec_reader import located_error
from corral.domain.workflows.statuses import TaskStatus
from corral.domain.workflows.template import Renderer, render_workflow
from corral.errors import ConflictError, ForbiddenError, NotFoundError, UserError
from corral.scheduler.feasibility import plan_checked
from corral.services.config_service import ConfigService
from corral.services.placement_now import GroupPlacement
from corral.services.workers import sandbox
from corral.services.workers.jinja_worker import render_in_subprocess
from corral.store.workflows import KeyTaken, WorkflowStore
from corral.store.workflows.records import IdempotencyKey

#: How often a submission re-numbers itself when its id was taken anyway (a workflow stored
#: with a number that was never taken: by hand, or before numbers were taken).
MAX_ID_ATTEMPTS = 50


class Mode(Enum):
    SUBMIT = "submit"
    DRY_RUN = "dry_run"  # every check, every object; nothing stored
    VALIDATE = "validate"  # every check; nothing stored


@dataclass(frozen=True)
class SubmitRequest:
    pool: str
    file: str
    set_values: tuple[str, ...] = ()
    set_strings: tuple[str, ...] = ()
    priority: str = "NORMAL"
    source: str = "workflow.yaml"
    #: The contents of ``files[].localpath``, read by the CLI.
    local_files: Mapping[str, TaskFileContents] = field(default_factory=dict)


@dataclass(frozen=True)
class _Accepted:
    """A rendered workflow document ready for the strict parse, and what is stored with it."""

    text: str
    source: str
    rendered: bool
    template: str | None
    local_files: Mapping[str, TaskFileContents]
    restarted_from: str | None = None
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class SubmittingUser:
    """Who submits, and how to ask whether they may: raises ForbiddenError if not."""

    username: str
    is_admin: bool
    require: Callable[[str, str], None]


@dataclass(frozen=True)
class SubmitOutcome:
    workflow_id: str
    spec: str  # the rendered workflow document
    plan: WorkflowPlan | None  # None: a retry answered with the workflow its key made
    stored: bool
    #: What was accepted but is probably not what the submitter meant.
    warnings: tuple[str, ...] = ()
    #: True: the idempotency key was used before; this is that submission's workflow.
    replayed: bool = False
    #: A dry run's: where each group would be placed now, or why not.
    placements: tuple[GroupPlacement, ...] = ()


NodesOf = Callable[[str], Sequence[Node]]
#: Where a plan's groups would be placed on the live cluster (``services/placement_now.py``).
PlaceNow = Callable[[Configs, WorkflowPlan], Sequence[GroupPlacement]]


class SubmissionService:
    def __init__(
        self,
        configs: ConfigService,
        store: WorkflowStore,
        nodes_of: NodesOf,
        place_now: PlaceNow | None = None,
    ) -> None:
        self._configs = configs
        self._store = store
        self._nodes_of = nodes_of
        self._place_now = place_now

    def submit(
        self,
        caller: SubmittingUser,
        request: SubmitRequest,
        mode: Mode,
        idempotency_key: str | None = None,
    ) -> SubmitOutcome:
        """Submit (or dry-run, or validate) ``request``. With an ``idempotency_key`` the
        caller used before for the same request, nothing is done again: the answer names the
        workflow made then (docs/submission.md#retries-and-idempotency-keys)."""
        key = _key_for(idempotency_key, request) if mode is Mode.SUBMIT else None
        if key is not None:
            replay = self._replay(caller, key)
            if replay is not None:
                return replay
        state = self._current_state(request.pool)
        check_pool_open(state, request.pool, is_admin=caller.is_admin)
        caller.require("workflow:Create", f"pool/{request.pool}")
        priority = check_priority(request.priority)
        rendered = render_workflow(
            request.file,
            set_values=request.set_values,
            set_strings=request.set_strings,
            source=request.source,
            renderer=sandboxed_renderer(state.workflow),
        )
        accepted = _Accepted(
            text=rendered.text,
            source=request.source,
            rendered=rendered.templated,
            template=request.file if rendered.templated else None,
            local_files=request.local_files,
            warnings=tuple(f"--set {name}: {UNUSED_SET}" for name in rendered.unused),
        )
        return self._plan_and_store(state, caller, accepted, request.pool, priority, mode, key)

    def _current_state(self, pool: str) -> Configs:
        """The configs; read again at once when they lack ``pool``: it may have been written a
        moment ago through another server (the configs read are up to a second old)."""
        state = self._configs.state()
        if state.find_pool(pool) is None:
            state = self._configs.state(fresh=True)
        return state

    def _replay(self, caller: SubmittingUser, key: IdempotencyKey) -> SubmitOutcome | None:
        """The earlier submission of ``key``, if there was one; ConflictError when the key
        was used for another request."""
        kept = self._store.kept_submission(caller.username, key.key)
        if kept is None:
            return None
        if kept.request_hash != key.request_hash:
            raise ConflictError(
                f"Idempotency-Key {key.key!r} was used for another submission (workflow "
                f"{kept.workflow_id}); use a new key for a new submission."
            )
        return SubmitOutcome(kept.workflow_id, "", None, True, replayed=True)

    def restart(
        self,
        caller: SubmittingUser,
        workflow_id: str,
        pool: str,
        mode: Mode,
        idempotency_key: str | None = None,
    ) -> SubmitOutcome:
        """A new workflow in ``pool`` from a failed one's stored spec, running only the groups
        that did not complete; inputs from completed groups read the old workflow's tasks."""
        key = (
            _checked_key(idempotency_key, ["restart", workflow_id, pool])
            if mode is Mode.SUBMIT
            else None
        )
        if key is not None:
            replay = self._replay(caller, key)
            if replay is not None:
                return replay
        state = self._current_state(pool)
        check_pool_open(state, pool, is_admin=caller.is_admin)
        caller.require("workflow:Create", f"pool/{pool}")
        old = self._store.get(workflow_id)
        try:
            caller.require("workflow:Read", f"pool/{old.pool}")
        except ForbiddenError:  # answered as if it did not exist (docs/access.md)
            raise NotFoundError(f"Workflow {workflow_id} not found.") from None
        if not TaskStatus(old.status).failed:
            raise ConflictError(
                f"Restart can only be used on FAILED workflows: Workflow {workflow_id} has "
                f"status {old.status}."
            )
        completed = [g.name for g in old.groups if g.status == TaskStatus.COMPLETED.value]
        source = f"{workflow_id} (restarted)"
        accepted = _Accepted(
            text=restart_document(old.spec, completed, workflow_id, source=source),
            source=source,
            rendered=False,
            template=old.template,
            local_files=old.local_files,
            restarted_from=workflow_id,
        )
        return self._plan_and_store(state, caller, accepted, pool, old.priority, mode, key)

    def _plan_and_store(
        self,
        configs: Configs,
        caller: SubmittingUser,
        accepted: _Accepted,
        pool: str,
        priority: str,
        mode: Mode,
        key: IdempotencyKey | None = None,
    ) -> SubmitOutcome:
        """From the rendered workflow on: the strict spec, the pool's checks, every group's
        objects (in the sandbox), numbered and stored in one transaction."""
        spec = parse_in_sandbox(configs, accepted)
        self._check_previous_inputs(caller, spec, accepted)
        nodes = self._nodes_of(configs.pool(pool).backend)
        for _ in range(MAX_ID_ATTEMPTS):
            if mode is Mode.SUBMIT:
                number = self._store.take_number(spec.name)
            else:
                number = self._store.next_number(spec.name)
            submitter = Submitter(
                workflow_id=f"{spec.name}-{number}",
                workflow_uuid=random_id(),
                user=caller.username,
                pool=pool,
                priority=priority,
            )
            plan = _planned(configs, spec, submitter, nodes, accepted, mode)
            if mode is not Mode.SUBMIT:
                live: tuple[GroupPlacement, ...] = ()
                if mode is Mode.DRY_RUN and self._place_now is not None:
                    live = tuple(self._place_now(configs, plan))
                return SubmitOutcome(
                    submitter.workflow_id,
                    accepted.text,
                    plan,
                    False,
                    warnings(accepted, priority),
                    placements=live,
                )
            stored = self._stored(caller, plan, spec.name, number, accepted, key)
            if stored is not None:
                return stored
        raise ConflictError(
            f"Could not number workflow {spec.name}: {MAX_ID_ATTEMPTS} concurrent submissions "
            "took the next ids first. Submit again."
        )

    def _stored(
        self,
        caller: SubmittingUser,
        plan: WorkflowPlan,
        name: str,
        number: int,
        accepted: _Accepted,
        key: IdempotencyKey | None,
    ) -> SubmitOutcome | None:
        """Store ``plan`` as workflow ``name``-``number``; None when another submission took
        that number first."""
        try:
            self._store.insert(
                plan,
                name=name,
                number=number,
                spec=accepted.text,
                template=accepted.template,
                local_files=accepted.local_files,
                restarted_from=accepted.restarted_from,
                idempotency_key=key,
            )
        except KeyTaken:  # the same request, sent twice at once: the first one stands
            assert key is not None
            replay = self._replay(caller, key)
            if replay is None:
                raise
            return replay
        except ConflictError:
            return None
        priority = plan.submitter.priority
        workflow_id = plan.submitter.workflow_id
        return SubmitOutcome(workflow_id, accepted.text, plan, True, warnings(accepted, priority))

    def _check_previous_inputs(
        self, caller: SubmittingUser, spec: WorkflowSpec, accepted: _Accepted
    ) -> None:
        """A task's input of an earlier workflow names one the caller may read, that exists."""
        for found in previous_inputs(spec):
            problem = self._previous_input_problem(caller, found)
            if problem is not None:
                raise located_error(
                    accepted.text,
                    found.path,
                    problem,
                    source=accepted.source,
                    rendered=accepted.rendered,
                )

    def _previous_input_problem(self, caller: SubmittingUser, found: PreviousInput) -> str | None:
        """Why an input from an earlier workflow cannot be used (OSMO: it must be finished);
        the caller must be allowed to read that workflow."""
        missing = f"input task {found.reference}: there is no workflow {found.workflow_id}."
        try:
            producer = self._store.get(found.workflow_id)
            caller.require("workflow:Read", f"pool/{producer.pool}")
        except (NotFoundError, ForbiddenError):  # unreadable is answered as missing
            return missing
        tasks = [task for group in producer.groups for task in group.tasks]
        task = next((task for task in tasks if task.name == found.task), None)
        if task is None:
            names = ", ".join(task.name for task in tasks)
            return (
                f"input task {found.reference}: workflow {found.workflow_id} has no task "
                f"{found.task}; its tasks: {names}."
            )
        if not TaskStatus(task.status).group_finished:
            return (
                f"Input tasks from previous workflows must be finished: {found.reference} is "
                f"{task.status}; submit once it has finished."
            )
        return None


#: Why an unused ``--set`` is worth a warning.
UNUSED_SET = (
    "the workflow file never uses this name, so setting it changes nothing (check its spelling)."
)
#: What LOW priority means here (docs/submission.md#the-pipeline).
LOW_PRIORITY = (
    "LOW priority: the workflow does not count against the pool's GPU guarantee and runs on "
    "GPUs others leave idle; HIGH and NORMAL work may preempt it (and reclaim what its pool "
    "borrows above its guarantee)."
)


#: An ``Idempotency-Key`` is printable ASCII (a UUID is what the CLI sends).
MAX_KEY_LENGTH = 256


def _key_for(key: str | None, request: SubmitRequest) -> IdempotencyKey | None:
    """The key and a digest of everything the submission depends on."""
    files = {path: [f.contents, f.base64] for path, f in sorted(request.local_files.items())}
    return _checked_key(
        key,
        [
            request.pool,
            request.file,
            request.set_values,
            request.set_strings,
            request.priority,
            request.source,
            files,
        ],
    )


def _checked_key(key: str | None, request: list[Any]) -> IdempotencyKey | None:
    if key is None:
        return None
    if not 0 < len(key) <= MAX_KEY_LENGTH or not all(" " < c <= "~" for c in key):
        raise UserError(
            f"must be 1 to {MAX_KEY_LENGTH} printable ASCII characters without spaces (a UUID, "
            "for example); send a new one for every new submission.",
            path=("Idempotency-Key",),
        )
    digest = hashlib.sha256(json.dumps(request).encode()).hexdigest()
    return IdempotencyKey(key, digest)


def warnings(accepted: _Accepted, priority: str) -> tuple[str, ...]:
    low = (LOW_PRIORITY,) if priority == "LOW" else ()
    return (*accepted.warnings, *low)


def sandboxed_renderer(workflow_config: WorkflowConfig) -> Renderer:
    """User Jinja runs in a sandbox worker limited as the WORKFLOW config's
    ``user_workflow_limits`` say: CPU time (rounded up, plus a second of slack), memory
    beyond the worker's own, and wall time."""
    limits = sandbox.workflow_jinja_limits(workflow_config)
    return partial(
        render_in_subprocess,
        timeout_seconds=limits.wall_seconds,
        cpu_seconds=limits.cpu_seconds,
        memory_bytes=limits.memory_bytes,
    )


def parse_in_sandbox(configs: Configs, accepted: _Accepted) -> WorkflowSpec:
    """:func:`parse_workflow_spec` in a sandbox worker: the YAML parse of a workflow was the
    largest part of a submission's work in the server process; in a worker it runs beside the
    server, bounded like every other render."""
    return sandbox.run(
        configs.workflow,
        "Reading the workflow",
        parse_workflow_spec,
        accepted.text,
        source=accepted.source,
        rendered=accepted.rendered,
        local_files=accepted.local_files,
    )


def plan_in_sandbox(
    configs: Configs,
    spec: Any,
    submitter: Submitter,
    nodes: Sequence[Node],
    *,
    refuse: bool = True,
) -> WorkflowPlan:
    """:func:`plan_workflow` in a sandbox worker: it renders the pool's templates, each value
    within the WORKFLOW config's time limit (docs/submission.md#limits), and refuses a group
    that could never run (``scheduler/feasibility.py``), or names it (``refuse=False``)."""
    return sandbox.run(
        configs.workflow,
        "Rendering the pool's templates",
        plan_checked,
        sandbox.kept(configs),
        spec,
        submitter,
        sandbox.kept(nodes),
        random_id,
        refuse=refuse,
    )


def _planned(
    configs: Configs,
    spec: WorkflowSpec,
    submitter: Submitter,
    nodes: Sequence[Node],
    accepted: _Accepted,
    mode: Mode,
) -> WorkflowPlan:
    """The plan, made in a sandbox worker; an error in the workflow names its line."""
    try:
        return plan_in_sandbox(configs, spec, submitter, nodes, refuse=mode is not Mode.DRY_RUN)
    except UserError as err:
        if err.path[:1] != ("workflow",):
            raise
        raise located_error(
            accepted.text,
            err.path,
            err.message,
            source=accepted.source,
            rendered=accepted.rendered,
        ) from None
