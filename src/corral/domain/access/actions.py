"""OSMO's action registry: which semantic action an HTTP request performs, and on what.

OSMO authorizes requests in semantic actions (``workflow:Create``) over resources
(``pool/<name>``); ``src/utils/roles/action_registry.go`` maps (method, path) to both. This module
is that table (docs/access.md) plus corral's own endpoints, with OSMO's matching rules:

* the query string and a trailing ``/`` are ignored; methods compare case-insensitively;
* exact paths win, then patterns by OSMO's specificity (earlier literal segments weigh more);
* ``*`` matches one path segment, a trailing ``/*`` one or more segments;
* an unregistered (method, path) resolves to ``None`` (only a ``*:*`` policy grants it).

Legacy role actions (``{"base": "http", "path": "/api/pool/*", "method": "*"}``, see
docs/osmo-reference.md#legacy-role-actions) are converted to every registered action whose
endpoint the legacy path could match. Deviations from OSMO, each because OSMO's behaviour makes
documented examples grant nothing or too much:

* a ``*`` in a legacy path is a glob: within one segment, or, as the path's last character, over
  the rest of the path (OSMO documents ``/api/pool/shared*`` as "every pool whose name starts
  with shared"; OSMO's segment-by-segment comparison maps it to no action at all); a trailing
  ``/*`` also covers the bare prefix, as in OSMO;
* a legacy path written ``http:/api/...`` is read as ``/api/...``;
* ``internal:Operator`` resolves to ``backend/<name>`` when the path names the backend
  (``.../backend/<name>``), so generated backend roles work
  (docs/osmo-reference.md#osmo-defects-corral-fixes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from corral.domain.configs.role_models import LegacyAction

ALL_ACTIONS = "*:*"


class Scope(Enum):
    """How the resource of an action is read from the request path."""

    GLOBAL = "global"  # no resource: any policy of the action matches
    SEGMENT = "segment"  # "<kind>/<segment after anchor>", "<kind>/*" when absent
    WORKFLOW_POOL = "workflow_pool"  # the workflow's pool: "pool/*" until looked up
    FIXED = "fixed"  # always ``kind`` itself (a full resource such as "config/pool")
    BACKEND = "backend"  # "backend/<name after 'backend'>", else segment after anchor


@dataclass(frozen=True)
class Endpoint:
    action: str
    path: str
    methods: tuple[str, ...]
    scope: Scope = Scope.GLOBAL
    kind: str = ""
    anchor: str = ""
    lower: bool = False

    @property
    def parts(self) -> list[str]:
        return self.path.split("/")

    @property
    def is_exact(self) -> bool:
        return "*" not in self.parts

    @property
    def specificity(self) -> tuple[int, int]:
        """OSMO's ordering key: literal segments (earlier ones weigh more), exact paths first."""
        parts = self.parts
        score = sum(10 - i for i, part in enumerate(parts) if part not in ("", "*"))
        first_wild = next((i for i, part in enumerate(parts) if part == "*"), -1)
        return (score + (100 if first_wild == -1 else 0), first_wild)


@dataclass(frozen=True)
class ResolvedAction:
    """What a request does. ``resource`` is ``None`` for global actions; for workflow actions
    found by id it is ``pool/*`` and ``workflow_id`` names the workflow whose pool refines it."""

    action: str
    resource: str | None
    endpoint: str
    workflow_id: str | None = None


_READ = ("GET",)
_ANY = ("*",)
_UPDATE = ("PUT", "PATCH")


def _pool(action: str, path: str, methods: tuple[str, ...]) -> Endpoint:
    return Endpoint(action, path, methods, Scope.SEGMENT, "pool", "pool")


def _wf(action: str, path: str, methods: tuple[str, ...]) -> Endpoint:
    return Endpoint(action, path, methods, Scope.WORKFLOW_POOL)


def _config(action: str, path: str, methods: tuple[str, ...], anchor: str = "configs") -> Endpoint:
    return Endpoint(action, path, methods, Scope.SEGMENT, "config", anchor, lower=True)


def _fixed(action: str, path: str, methods: tuple[str, ...], resource: str) -> Endpoint:
    return Endpoint(action, path, methods, Scope.FIXED, resource)


def _segment(action: str, path: str, methods: tuple[str, ...], kind: str, anchor: str) -> Endpoint:
    return Endpoint(action, path, methods, Scope.SEGMENT, kind, anchor)


def _global(action: str, methods: tuple[str, ...], *paths: str) -> list[Endpoint]:
    return [Endpoint(action, path, methods) for path in paths]


REGISTRY: tuple[Endpoint, ...] = (
    # workflow
    _pool("workflow:Create", "/api/pool/*/workflow", ("POST",)),
    _pool("workflow:Create", "/api/pool/*/workflow/*", ("POST",)),
    *_global("workflow:List", _READ, "/api/workflow", "/api/task", "/api/tag", "/api/queue"),
    _wf("workflow:Read", "/api/workflow/*", _READ),
    _wf("workflow:Update", "/api/workflow/*", _UPDATE),
    _wf("workflow:Delete", "/api/workflow/*", ("DELETE",)),
    _wf("workflow:Cancel", "/api/workflow/*/cancel", ("POST",)),
    # a task's checkpoint and "ready" update its workflow's record (its notice, a GET, is
    # workflow:Read above); the owner and admins only are then answered (docs/checkpoints.md)
    _wf("workflow:Update", "/api/workflow/*/task/*/checkpoint", ("POST",)),
    _wf("workflow:Update", "/api/workflow/*/task/*/ready", ("POST",)),
    _wf("workflow:Exec", "/api/workflow/*/exec", ("POST", "WEBSOCKET")),
    _wf("workflow:Exec", "/api/workflow/*/exec/*", ("POST", "WEBSOCKET")),
    _wf("workflow:Exec", "/api/router/exec/*/client/*", _ANY),
    _wf("workflow:PortForward", "/api/workflow/*/portforward/*", _ANY),
    _wf("workflow:PortForward", "/api/workflow/*/webserver/*", _ANY),
    _wf("workflow:PortForward", "/api/router/portforward/*/client/*", _ANY),
    *_global("workflow:PortForward", _READ, "/api/router/webserver/*"),
    *_global("workflow:Rsync", _READ, "/api/plugins/configs"),
    _wf("workflow:Rsync", "/api/workflow/*/rsync", ("POST",)),
    _wf("workflow:Rsync", "/api/workflow/*/rsync/*", ("POST",)),
    _wf("workflow:Rsync", "/api/router/rsync/*/client/*", _ANY),
    # pools, credentials, profile, users, apps, resources
    *_global("pool:List", _READ, "/api/pool", "/api/pool_quota"),
    *_global("credentials:Create", ("POST",), "/api/credentials", "/api/credentials/*"),
    *_global("credentials:Read", _READ, "/api/credentials", "/api/credentials/*"),
    *_global("credentials:Update", _UPDATE, "/api/credentials", "/api/credentials/*"),
    *_global("credentials:Delete", ("DELETE",), "/api/credentials", "/api/credentials/*"),
    *_global("profile:Read", _READ, "/api/profile/settings"),
    *_global("profile:Update", ("POST",), "/api/profile/settings"),
    *_global("user:List", _READ, "/api/users"),
    *_global("app:Create", ("POST",), "/api/app", "/api/app/*"),
    *_global("app:Read", _READ, "/api/app", "/api/app/*"),
    *_global("app:Update", _UPDATE, "/api/app", "/api/app/*"),
    *_global("app:Delete", ("DELETE",), "/api/app", "/api/app/*"),
    *_global("resources:Read", _READ, "/api/resources", "/api/resources/*"),
    # configs (OSMO) and corral's additions
    _config("config:Read", "/api/configs", _READ),
    _config("config:Read", "/api/configs/*", _READ),
    _config("config:Update", "/api/configs/*", _UPDATE),
    _fixed("config:Read", "/api/configs/history", _READ, "config/*"),
    _fixed("config:Update", "/api/configs/history/rollback", ("POST",), "config/*"),
    _config("config:Update", "/api/configs/history/*/revision/*", ("DELETE",), "history"),
    _config("config:Update", "/api/configs/history/*/revision/*/tags", ("POST",), "history"),
    _fixed("config:Read", "/api/configs/diff", _READ, "config/*"),
    _fixed("config:Update", "/api/configs/apply", ("POST",), "config/*"),
    _fixed("config:Read", "/api/pool/*/render", _READ, "config/pool"),
    *_global("pool:List", _READ, "/api/pool/*/topology", "/api/pool/*/shapes"),
    *_global(
        "node:Update",
        ("POST",),
        "/api/nodes/*/cordon",
        "/api/nodes/*/drain",
        "/api/nodes/*/uncordon",
        "/api/nodes/*/fail",
        "/api/nodes/*/heal",
    ),
    *_global("resources:Read", _READ, "/api/nodes/*/history"),
    # auth
    *_global("auth:Login", _READ, "/api/auth/login", "/api/auth/keys"),
    *_global("auth:Refresh", _ANY, "/api/auth/jwt/refresh_token", "/api/auth/jwt/access_token"),
    *_global("auth:Token", _ANY, "/api/auth/access_token", "/api/auth/access_token/*"),
    _segment("auth:Token", "/api/auth/user/*/access_token", _ANY, "user", "user"),
    _segment("auth:Token", "/api/auth/user/*/access_token/*", _ANY, "user", "user"),
    # system and internal
    *_global("mcp:Access", ("GET", "POST", "DELETE"), "/mcp"),
    *_global("system:Health", _ANY, "/health"),
    *_global("system:Version", _ANY, "/api/version", "/api/router/version", "/client/version"),
    Endpoint("internal:Operator", "/api/agent/listener/*", _ANY, Scope.BACKEND, "backend", "agent"),
    Endpoint("internal:Operator", "/api/agent/worker/*", _ANY, Scope.BACKEND, "backend", "agent"),
    _segment("internal:Logger", "/api/logger/workflow/*/osmo_ctrl/*", _ANY, "backend", "logger"),
    _segment("internal:Router", "/api/router/*/*/backend/*", _ANY, "backend", "router"),
)

_BY_SPECIFICITY = tuple(
    sorted(REGISTRY, key=lambda e: (e.specificity[0], e.specificity[1]), reverse=True)
)


def registered_actions() -> list[str]:
    """Every action the registry can produce, sorted."""
    return sorted({endpoint.action for endpoint in REGISTRY})


# ------------------------------------------------------------------------------ resolving


def normalise_path(path: str) -> str:
    """Drop the query string and a trailing slash, as OSMO does."""
    path = path.split("?", 1)[0]
    return path[:-1] if path.endswith("/") and path != "/" else path


def _method_ok(method: str, allowed: tuple[str, ...]) -> bool:
    return "*" in allowed or method.upper() in allowed


def _path_ok(parts: list[str], pattern: list[str]) -> bool:
    if pattern[-1] == "*" and len(pattern) > 1:  # trailing /*: one or more segments
        prefix = pattern[:-1]
        if len(parts) <= len(prefix):
            return False
        return all(p in ("*", s) for p, s in zip(prefix, parts, strict=False))
    return len(parts) == len(pattern) and all(
        p in ("*", s) for p, s in zip(pattern, parts, strict=True)
    )


def _after(parts: list[str], anchor: str) -> str | None:
    for i, part in enumerate(parts[:-1]):
        if part == anchor and parts[i + 1]:
            return parts[i + 1]
    return None


def _resource(endpoint: Endpoint, parts: list[str]) -> str | None:
    if endpoint.scope is Scope.GLOBAL:
        return None
    if endpoint.scope is Scope.FIXED:
        return endpoint.kind
    if endpoint.scope is Scope.WORKFLOW_POOL:
        return "pool/*"
    name = _after(parts, "backend") if endpoint.scope is Scope.BACKEND else None
    name = name or _after(parts, endpoint.anchor) or "*"
    return f"{endpoint.kind}/{name.lower() if endpoint.lower else name}"


def _resolved(endpoint: Endpoint, parts: list[str]) -> ResolvedAction:
    workflow_id = _after(parts, "workflow") if endpoint.scope is Scope.WORKFLOW_POOL else None
    if endpoint.path.startswith("/api/router/") and endpoint.scope is Scope.WORKFLOW_POOL:
        workflow_id = parts[4] if len(parts) > 4 else None  # /api/router/<kind>/<wf>/client/..
    return ResolvedAction(endpoint.action, _resource(endpoint, parts), endpoint.path, workflow_id)


def resolve(method: str, path: str) -> ResolvedAction | None:
    """The action ``method path`` performs, or ``None`` when the request is unregistered."""
    path = normalise_path(path)
    parts = path.split("/")
    for endpoint in _BY_SPECIFICITY:
        if _method_ok(method, endpoint.methods) and _path_ok(parts, endpoint.parts):
            return _resolved(endpoint, parts)
    return None


# ----------------------------------------------------------------------- legacy conversion

_Token = tuple[str, Callable[[str], bool]]  # ("lit" | "one" | "star", accepts(char))


def _literal(char: str) -> _Token:
    return ("lit", lambda c: c == char)


def _any(_: str) -> bool:
    return True


def _not_slash(char: str) -> bool:
    return char != "/"


def _legacy_tokens(path: str) -> list[_Token]:
    """A final ``*`` matches any rest of the path; any other ``*`` stays within its segment."""
    last = len(path) - 1
    return [
        ("star", _any if i == last else _not_slash) if c == "*" else _literal(c)
        for i, c in enumerate(path)
    ]


def _endpoint_tokens(path: str) -> list[_Token]:
    parts = path.split("/")
    tokens: list[_Token] = []
    for i, part in enumerate(parts):
        if i:
            tokens.append(_literal("/"))
        if part == "*":
            accepts = _any if i == len(parts) - 1 and i > 0 else _not_slash
            tokens += [("one", accepts), ("star", accepts)]
        else:
            tokens += [_literal(c) for c in part]
    return tokens


def _closure(tokens: list[_Token], position: int) -> set[int]:
    found = {position}
    while position < len(tokens) and tokens[position][0] == "star":
        position += 1
        found.add(position)
    return found


def _step(tokens: list[_Token], position: int, char: str) -> set[int]:
    if position == len(tokens) or not tokens[position][1](char):
        return set()
    return _closure(tokens, position if tokens[position][0] == "star" else position + 1)


def _intersect(left: list[_Token], right: list[_Token], alphabet: set[str]) -> bool:
    """Whether some string matches both token patterns (product-automaton search)."""
    todo = [(i, j) for i in _closure(left, 0) for j in _closure(right, 0)]
    seen = set(todo)
    while todo:
        i, j = todo.pop()
        if i == len(left) and j == len(right):
            return True
        for char in alphabet:
            for pair in ((a, b) for a in _step(left, i, char) for b in _step(right, j, char)):
                if pair not in seen:
                    seen.add(pair)
                    todo.append(pair)
    return False


def _could_match(legacy_path: str, endpoint_path: str) -> bool:
    candidates = [legacy_path]
    if legacy_path.endswith("/*"):
        candidates.append(legacy_path[:-2])
    alphabet = set(legacy_path + endpoint_path) - {"*"} | {"/", "\x00"}
    right = _endpoint_tokens(endpoint_path)
    return any(_intersect(_legacy_tokens(c), right, alphabet) for c in candidates)


def _legacy_path(action: LegacyAction) -> str:
    path = action.path
    return path[len("http:") :] if path.startswith("http:/") else path


def _covered(action: LegacyAction) -> list[Endpoint]:
    path, method = _legacy_path(action), action.method.upper()
    if path.startswith("!"):
        return []
    return [
        e
        for e in REGISTRY
        if (method == "*" or _method_ok(method, e.methods)) and _could_match(path, e.path)
    ]


def _legacy_resource(endpoint: Endpoint, legacy_path: str) -> str:
    """The resource pattern a legacy path grants for one covered endpoint (``*`` if global)."""
    if endpoint.scope in (Scope.GLOBAL, Scope.FIXED):
        return endpoint.kind if endpoint.scope is Scope.FIXED else "*"
    if endpoint.scope is Scope.WORKFLOW_POOL:
        return "pool/*"
    name = _after(legacy_path.split("/"), endpoint.anchor) or "*"
    if "*" in name:  # a glob segment becomes OSMO's string-prefix pattern
        name = name[: name.index("*") + 1]
    return f"{endpoint.kind}/{name.lower() if endpoint.lower else name}"


def legacy_grants(action: LegacyAction) -> list[tuple[str, str]]:
    """The (semantic action, resource pattern) pairs a legacy action grants, sorted.

    ``*`` on ``*`` is ``*:*``; deny-style paths (``!...``) grant nothing, as in OSMO."""
    if _legacy_path(action) == "*" and action.method == "*":
        return [(ALL_ACTIONS, "*")]
    path = _legacy_path(action)
    return sorted({(e.action, _legacy_resource(e, path)) for e in _covered(action)})


def legacy_to_semantic(action: LegacyAction) -> list[str]:
    """The semantic actions a legacy ``{base, path, method}`` action converts to, sorted."""
    return sorted({name for name, _ in legacy_grants(action)})
