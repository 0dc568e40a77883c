"""The dashboard's login and log-out: with a token, or through the OpenID Connect provider
(docs/access.md#single-sign-on).

``/ui/login/sso`` sends the browser to the provider, with a cookie that binds the sign-in to it;
``/ui/login/callback`` checks what came back (``services/auth/oidc_login.py``), sets the same
session cookie as a token login, and continues to the page the person asked for. That last step
is a page, not a redirect: a browser sends no ``SameSite=Strict`` cookie with a navigation that a
redirect from another site began, so the first page would ask for a login again.
"""

from __future__ import annotations

from typing import Literal
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from corral.api import browser_session
from corral.api.auth import Authorizer
from corral.api.deps import AuthorizerDep, RuntimeDep
from corral.errors import CorralError, ForbiddenError, NotFoundError, UserError
from corral.services.auth.oidc_login import NEEDS_PERSON, SIGN_IN_SECONDS, Flow, SingleSignOn
from corral.web.page_context import PageContext, PageContextDep

router = APIRouter(prefix="/ui", include_in_schema=False)

#: The sign-in under way; sent back only to the callback.
FLOW_COOKIE = "corral_sso"
FLOW_PATH = "/ui/login"
#: The provider's ID token, kept for the log-out (``id_token_hint``); sent only to it.
ID_TOKEN_COOKIE = "corral_id_token"
LOGOUT_PATH = "/ui/logout"
CALLBACK_PATH = "/ui/login/callback"


def single_sign_on(authorizer: Authorizer) -> SingleSignOn:
    if authorizer.sso is None:
        raise NotFoundError(
            "Single sign-on is not configured on this server: set CORRAL_OIDC_ISSUER and "
            "CORRAL_OIDC_CLIENT_ID (docs/access.md#single-sign-on), or log in with a token."
        )
    return authorizer.sso


def redirect_url(sso: SingleSignOn, request: Request) -> str:
    """Where the provider sends the browser back: as configured, else this server's."""
    return sso.client.redirect_url or str(request.base_url).rstrip("/") + CALLBACK_PATH


@router.get("/login", response_class=HTMLResponse)
def login_page(
    context: PageContextDep, request: Request, next: str = "/ui", why: str = ""
) -> HTMLResponse:
    reason = browser_session.LOGIN_REASONS.get(why, "")
    return login_page_of(context, request, browser_session.local_target(next), reason, error=False)


@router.post("/login", response_model=None)
async def login(
    authorizer: AuthorizerDep, context: PageContextDep, runtime: RuntimeDep, request: Request
) -> Response:
    form = parse_qs((await request.body()).decode("utf-8", "replace"))
    token = form.get("token", [""])[0].strip()
    target = browser_session.local_target(form.get("next", ["/ui"])[0])
    try:
        if not token:
            raise UserError(
                "Paste an API token to log in (an admin makes one with: corral user token USER)."
            )
        principal = await run_in_threadpool(authorizer.authenticate_token, token)
        user = await run_in_threadpool(runtime.users.require, principal.username)
    except CorralError as err:
        return login_page_of(context, request, target, err.message, 401)
    session = authorizer.sessions.mint(principal.username, user.user_id)
    answer = RedirectResponse(target, status_code=303)
    max_age = int(authorizer.sessions.ttl.total_seconds())
    _set(answer, request, browser_session.COOKIE, session.token, "/ui", max_age)
    return answer


@router.post("/logout", response_model=None)
def logout(authorizer: AuthorizerDep, request: Request) -> Response:
    """End the session on every server (a copied cookie stops working too)."""
    authorizer.end_session(request.state.session_token)
    target = logout_target(authorizer, request)
    # htmx follows a redirect inside its request: it is told where to go instead.
    if request.headers.get("hx-request"):
        answer: Response = Response(headers={"HX-Redirect": target})
    else:
        answer = RedirectResponse(target, status_code=303)
    answer.delete_cookie(browser_session.COOKIE, path="/ui")
    answer.delete_cookie(ID_TOKEN_COOKIE, path=LOGOUT_PATH)
    return answer


@router.get("/login/sso", response_model=None)
def start(
    authorizer: AuthorizerDep, request: Request, next: str = "/ui", silent: bool = False
) -> Response:
    sso = single_sign_on(authorizer)
    target = browser_session.local_target(next)
    url, cookie = sso.begin(redirect_url(sso, request), target, silent)
    answer = RedirectResponse(url, status_code=303)
    # Lax: the provider's redirect back is a top-level navigation from another site.
    _set(answer, request, FLOW_COOKIE, cookie, FLOW_PATH, SIGN_IN_SECONDS, samesite="lax")
    return answer


@router.get("/login/callback", response_model=None)
async def callback(
    authorizer: AuthorizerDep,
    context: PageContextDep,
    request: Request,
    state: str = "",
    code: str = "",
    error: str = "",
    error_description: str = "",
) -> Response:
    sso = single_sign_on(authorizer)
    flow: Flow | None = None
    try:
        flow = await run_in_threadpool(sso.flow, request.cookies.get(FLOW_COOKIE), state)
        if error:
            return _refused_by_provider(flow, error, error_description)
        signed = await run_in_threadpool(sso.finish, code, flow, redirect_url(sso, request))
        principal = await run_in_threadpool(authorizer.sign_in, signed.identity)
        if not principal.roles:
            raise ForbiddenError(_no_role(principal.username, signed.identity.groups))
        user = await run_in_threadpool(context.runtime.users.require, principal.username)
    except CorralError as err:
        target = flow.next if flow else "/ui"
        page = login_page_of(context, request, target, err.message, err.status_code)
        page.delete_cookie(FLOW_COOKIE, path=FLOW_PATH)
        return page
    session = authorizer.sessions.mint(principal.username, user.user_id)
    page = context.render(request, "signed_in.html", next=flow.next)
    max_age = int(authorizer.sessions.ttl.total_seconds())
    _set(page, request, browser_session.COOKIE, session.token, "/ui", max_age)
    _set(page, request, ID_TOKEN_COOKIE, signed.id_token, LOGOUT_PATH, max_age)
    page.delete_cookie(FLOW_COOKIE, path=FLOW_PATH)
    return page


def _set(
    answer: Response,
    request: Request,
    name: str,
    value: str,
    path: str,
    max_age: int,
    samesite: Literal["strict", "lax"] = "strict",
) -> None:
    """An ``HttpOnly`` cookie, ``Secure`` over HTTPS."""
    secure = request.url.scheme == "https"
    answer.set_cookie(
        name, value, max_age=max_age, path=path, httponly=True, samesite=samesite, secure=secure
    )


def _refused_by_provider(flow: Flow, error: str, description: str) -> Response:
    """A silent sign-in that needs the person goes to the login page; any other refusal is
    said as the provider said it."""
    if flow.silent and error in NEEDS_PERSON:
        answer = RedirectResponse(browser_session.login_url(flow.next, "ended"), status_code=303)
        answer.delete_cookie(FLOW_COOKIE, path=FLOW_PATH)
        answer.delete_cookie(browser_session.COOKIE, path="/ui")  # it no longer works
        return answer
    said = f"{error}: {description}" if description else error
    raise ForbiddenError(f"The provider refused the sign-in ({said}).")


def _no_role(username: str, groups: list[str]) -> str:
    seen = f"the groups {', '.join(groups)}" if groups else "no groups"
    return (
        f"{username} signed in, but holds no corral role: the provider sent {seen}, and no "
        "role maps any of them. An admin adds one of the groups to a role's external_roles "
        f"(docs/access.md), or grants a role: corral user roles add {username} osmo-user. "
        "If the provider sends groups in another claim, set CORRAL_OIDC_GROUPS_CLAIM."
    )


def logout_target(authorizer: Authorizer, request: Request) -> str:
    """After a log-out: the provider's end of session when it has one, then the login page."""
    after = str(request.base_url).rstrip("/") + "/ui/login"
    if authorizer.sso is None:
        return "/ui/login"
    found = authorizer.sso.end_session_url(request.cookies.get(ID_TOKEN_COOKIE), after)
    return found or "/ui/login"


def login_page_of(
    context: PageContext,
    request: Request,
    next_page: str,
    why: str,
    status: int = 200,
    *,
    error: bool = True,
) -> HTMLResponse:
    """The login page: a button to sign in through the provider, if one is configured, and
    the token form; ``why`` said as an error (a refused login) or, without ``error``, as the
    reason the page is shown."""
    authorizer = context.authorizer
    return context.render(
        request,
        "login.html",
        status,
        next=next_page,
        why=why,
        error=error,
        oidc=authorizer.oidc_issuer,
        sso=authorizer.sso.provider_name if authorizer.sso else None,
    )
