"""The rules the REST API and the dashboard both apply, written once: who may see and cancel a
workflow, and who may see a pool's resolved templates (docs/access.md).

A workflow in a pool the caller may not ``workflow:Read`` is answered exactly as one that does
not exist, 404 with the same words, as GitHub does for a private repository: otherwise the
status code tells anyone who may call the API which workflow names exist in other pools.

The rules take the authorizer as a typed :class:`Access` (the API's ``Authorizer`` is one), so
that they live with the other use cases rather than in a route module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, TypeVar

from corral.domain.configs import references
from corral.domain.configs.references import TEMPLATE_TYPES
from corral.domain.configs.snapshot import Configs
from corral.domain.platform.render import render_pool
from corral.domain.workflows.record import StoredWorkflow
from corral.domain.workflows.statuses import ALIVE
from corral.errors import ConflictError, NotFoundError
from corral.services.workers import sandbox
from corral.store.workflows import WorkflowStore


class Named(Protocol):
    @property
    def username(self) -> str: ...


C = TypeVar("C", bound=Named)
C_in = TypeVar("C_in", bound=Named, contravariant=True)


class Access(Protocol[C_in]):
    """What the rules ask of the authorizer about a caller."""

    def allows(self, principal: C_in, action: str, resource: str | None = None) -> bool: ...

    def check(
        self,
        principal: C_in,
        action: str,
        resource: str | None = None,
        *,
        what: str | None = None,
    ) -> None: ...


def missing(workflow_id: str) -> NotFoundError:
    return NotFoundError(f"Workflow {workflow_id} not found.")


def may_read(authorizer: Access[C], caller: C, workflow: StoredWorkflow) -> bool:
    return authorizer.allows(caller, "workflow:Read", f"pool/{workflow.pool}")


def shown_in_queue(authorizer: Access[C], caller: C, workflow: StoredWorkflow) -> bool:
    """Whether the queue names a waiting workflow to the caller (docs/forecast.md#the-queue):
    its own, or one of a pool it may read; others hold their place as opaque entries."""
    return workflow.submitted_by == caller.username or may_read(authorizer, caller, workflow)


def read_workflow(
    store: WorkflowStore, authorizer: Access[C], caller: C, workflow_id: str
) -> StoredWorkflow:
    """The workflow, if it exists and the caller may ``workflow:Read`` on its pool; else 404."""
    workflow = store.get(workflow_id)
    if not may_read(authorizer, caller, workflow):
        raise missing(workflow_id)
    return workflow


def request_cancel(
    store: WorkflowStore,
    authorizer: Access[C],
    caller: C,
    workflow_id: str,
    message: str | None = None,
) -> None:
    """Ask the controller to cancel, saying why in ``message`` (its tasks end with it): the
    submitter may, or whoever may ``workflow:Cancel`` on the workflow's pool (403; 404 to who
    may not even read it); 409 once finished or already canceling."""
    workflow = store.get(workflow_id)
    if caller.username != workflow.submitted_by:
        if not may_read(authorizer, caller, workflow):
            raise missing(workflow_id)
        authorizer.check(caller, "workflow:Cancel", f"pool/{workflow.pool}")
    if not store.request_cancel(workflow_id, caller.username, message):
        raise ConflictError(_not_cancelable(store.get(workflow_id)))


def _not_cancelable(workflow: StoredWorkflow) -> str:
    if workflow.status in ALIVE:
        return (
            f"Workflow {workflow.workflow_id} is already being canceled "
            f"(requested by {workflow.cancel_requested_by})."
        )
    return (
        f"Workflow {workflow.workflow_id} already finished ({workflow.status}); "
        "there is nothing to cancel."
    )


def check_template_reads(authorizer: Access[C], caller: C) -> None:
    """A view that shows a pool's resolved templates needs read access to those templates,
    not only to the pool (403 naming the first one the caller may not read)."""
    for ctype in TEMPLATE_TYPES:
        authorizer.check(caller, "config:Read", f"config/{ctype.url_segment}")


def rendered_pool(
    authorizer: Access[C],
    caller: C,
    configs: Configs,
    pool: str,
    platform: str | None,
    set_values: Mapping[str, Any],
) -> dict[str, Any]:
    """What ``pool`` (one platform) renders, for a caller who may read the pool and its
    templates: rendered in a sandbox worker from only what the pool references."""
    authorizer.check(caller, "config:Read", "config/pool")
    check_template_reads(authorizer, caller)
    return sandbox.run(
        configs.workflow,
        "Rendering the pool's templates",
        render_pool,
        references.closure(configs, [pool]),
        pool,
        platform=platform,
        set_values=set_values,
        user=caller.username,
    )
