"""What every dashboard route needs: the caller, what it may see, and the page drawn for it."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.responses import HTMLResponse

from corral.api import browser_session
from corral.api.auth import Authorizer, Principal
from corral.api.deps import AuthorizerDep, RuntimeDep
from corral.api.guard import guarded_principal
from corral.domain.workflows.record import StoredWorkflow
from corral.errors import ForbiddenError
from corral.services.commands import read_workflow
from corral.services.runtime import Runtime
from corral.web.drawing import draw


class PageContext:
    """The runtime and authorizer of one dashboard, and the checks its pages share."""

    def __init__(self, runtime: Runtime, authorizer: Authorizer) -> None:
        self.runtime = runtime
        self.authorizer = authorizer

    def render(self, request: Request, name: str, status: int = 200, **values: Any) -> HTMLResponse:
        """The page ``name``, with the caller's CSRF token and whether it administers corral."""
        principal = guarded_principal(request)
        token = request.scope.get("state", {}).get("session_token")
        key = self.authorizer.sessions.key
        csrf = browser_session.csrf_token(key, token) if token else ""
        admin = principal is not None and self.authorizer.is_admin(principal)
        return draw(request, name, status, admin=admin, csrf=csrf, **values)

    def caller(self, request: Request) -> Principal:
        found = guarded_principal(request)
        if found is None:  # the guard lets no request without a session through
            raise ForbiddenError("Log in to see the dashboard.")
        return found

    def usable_pools(self, principal: Principal) -> list[str]:
        self.authorizer.check(principal, "pool:List")
        names = sorted(self.runtime.configs.state().pool_names())
        return self.authorizer.allowed_pools(principal, names)

    def readable_pools(self, principal: Principal) -> list[str]:
        return [
            name
            for name in self.runtime.listings.pools()
            if self.authorizer.allows(principal, "workflow:Read", f"pool/{name}")
        ]

    def readable(self, principal: Principal, workflow_id: str) -> StoredWorkflow:
        return read_workflow(self.runtime.workflows, self.authorizer, principal, workflow_id)


async def page_context_of(runtime: RuntimeDep, authorizer: AuthorizerDep) -> PageContext:
    return PageContext(runtime, authorizer)


#: What a dashboard page depends on for drawing itself and its shared checks.
PageContextDep = Annotated[PageContext, Depends(page_context_of)]
