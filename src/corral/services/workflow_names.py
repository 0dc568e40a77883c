"""How one caller reads the name of a workflow that another view mentions (docs/access.md#
workflows-you-may-not-read): the topology page's owners of a node, a forecast's "most likely
after X ends". By its id when the caller may ``workflow:Read`` its pool or submitted it; else
by an opaque tag, the same wherever it is shown (one workflow, one tag: hovering still shows
which nodes one workflow holds, not which workflow it is).

A node may serve several pools, and a forecast may wait on a workflow of another pool: the
check is on each workflow's own pool, never on the pool the page is about.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from corral.domain.views.start_forecast import GroupForecast
from corral.store.forecasts import ForecastStore
from corral.store.workflows.listings import WorkflowListings


@dataclass(frozen=True)
class Owner:
    """What decides whether a caller may name a workflow: its pool and submitter."""

    pool: str
    submitted_by: str


#: A workflow unknown to the caller's store (deleted, or never corral's): never named.
UNKNOWN = Owner("", "")


def opaque_tag(key: bytes, workflow_id: str) -> str:
    """``workflow-<8 hex>``: stable for one workflow under one server key, and says nothing of
    its name."""
    digest = hmac.new(key, workflow_id.encode(), hashlib.sha256).hexdigest()[:8]
    return f"workflow-{digest}"


@dataclass(frozen=True)
class WorkflowNamer:
    """Names workflows for one caller (see the module docstring)."""

    key: bytes
    username: str
    may_read_pool: Callable[[str], bool]

    def __call__(self, workflow_id: str, owner: Owner) -> str:
        if owner.submitted_by == self.username and owner is not UNKNOWN:
            return workflow_id
        if owner.pool and self.may_read_pool(owner.pool):
            return workflow_id
        return opaque_tag(self.key, workflow_id)


def named_forecasts(
    forecasts: Mapping[str, GroupForecast],
    owners: Mapping[str, Owner],
    name: WorkflowNamer,
) -> dict[str, GroupForecast]:
    """``forecasts`` (by group uuid) with the workflow each waits on named for the caller;
    ``owners``: the pool and submitter of each such workflow."""
    return {
        uuid: (
            dataclasses.replace(
                found, waits_on=name(found.waits_on, owners.get(found.waits_on, UNKNOWN))
            )
            if found.waits_on
            else found
        )
        for uuid, found in forecasts.items()
    }


def workflow_forecasts(
    forecasts: ForecastStore, listings: WorkflowListings, workflow_id: str, name: WorkflowNamer
) -> dict[str, GroupForecast]:
    """The forecasts of ``workflow_id``'s waiting groups as the caller may read them."""
    found = forecasts.of_workflow(workflow_id)
    waits = sorted({f.waits_on for f in found.values() if f.waits_on})
    owners = {wid: Owner(pool, by) for wid, (pool, by) in listings.owners(waits).items()}
    return named_forecasts(found, owners, name)
