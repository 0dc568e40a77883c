"""A task's own credential (docs/checkpoints.md#a-tasks-own-token): a signed token that names
one task of one workflow and is accepted only on that task's notice, checkpoint and ready
endpoints.

Nothing is stored: the token is an HS256 JWT signed with a key derived from the server's
session key (``sessions.py``), so every server sharing the key verifies it, and a new session
key revokes every task token with every session. It holds no secret of its own; it names the
task, and its signature says corral gave it.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass

import jwt

from corral.domain.workflows.record import StoredGroup
from corral.errors import UnauthorizedError

TASK_ISSUER = "corral-task"
_AUDIENCE = "corral-task"
#: The key a task token is signed with is this label's HMAC under the session key: a task
#: token cannot pass for a session token, nor the other way round.
_KEY_LABEL = b"corral task tokens v1"
#: The only requests a task token is accepted on: its own task's endpoints.
TASK_ENDPOINT = re.compile(
    r"^/api/workflow/(?P<workflow>[^/]+)/task/(?P<task>[^/]+)/(?:notice|checkpoint|ready)$"
)


@dataclass(frozen=True)
class TaskScope:
    """The one task a token speaks for."""

    workflow_id: str
    task_name: str
    task_uuid: str

    @property
    def label(self) -> str:
        """How the task is named as a caller: ``task <name> of <workflow>``."""
        return f"task {self.task_name} of {self.workflow_id}"


def claimed_scope(token: str) -> TaskScope | None:
    """The task ``token`` claims to speak for, unverified: what a task reads of its own token
    (the server verifies it)."""
    claims = _unverified(token)
    if claims.get("iss") != TASK_ISSUER:
        return None
    return _scope(claims)


def _unverified(token: str) -> dict[str, object]:
    if token.count(".") != 2:
        return {}
    try:
        return dict(jwt.decode(token, options={"verify_signature": False}))
    except jwt.InvalidTokenError:
        return {}


def _scope(claims: Mapping[str, object]) -> TaskScope | None:
    fields = (claims.get("wf"), claims.get("task"), claims.get("tuid"))
    if not all(isinstance(value, str) and value for value in fields):
        return None
    workflow_id, task_name, task_uuid = (str(value) for value in fields)
    return TaskScope(workflow_id, task_name, task_uuid)


class TaskTokens:
    """Mints and verifies task tokens with a key derived from ``session_key``."""

    def __init__(self, session_key: bytes) -> None:
        self._key = hmac.new(session_key, _KEY_LABEL, hashlib.sha256).digest()

    def mint(self, scope: TaskScope) -> str:
        claims = {
            "iss": TASK_ISSUER,
            "aud": _AUDIENCE,
            "sub": scope.label,
            "wf": scope.workflow_id,
            "task": scope.task_name,
            "tuid": scope.task_uuid,
        }
        return jwt.encode(claims, self._key, algorithm="HS256")

    def verify(self, token: str) -> TaskScope:
        """The task ``token`` speaks for; 401 when it is forged or malformed."""
        try:
            claims = jwt.decode(
                token,
                self._key,
                algorithms=["HS256"],
                issuer=TASK_ISSUER,
                audience=_AUDIENCE,
                options={"require": ["iss", "aud", "sub"]},
            )
        except jwt.InvalidTokenError:
            raise UnauthorizedError(
                "The task token is not valid: it was not signed by this server's key (a new "
                "session key revokes every task token)."
            ) from None
        scope = _scope(claims)
        if scope is None:
            raise UnauthorizedError("The task token does not name a task.")
        return scope


def group_tokens(
    tokens: TaskTokens | None, workflow_id: str, group: StoredGroup
) -> dict[str, str] | None:
    """Task uuid -> its own token, for the tasks of ``group``; None when the controller mints
    none (one made by a test or a tool)."""
    if tokens is None:
        return None
    return {
        task.uuid: tokens.mint(TaskScope(workflow_id, task.name, task.uuid)) for task in group.tasks
    }


def refused_path(scope: TaskScope, path: str) -> str | None:
    """Why a task token may not be used on ``path`` (None: it may, on some task's endpoint;
    whether it is its own task is the route's to answer, 404 as for anyone else)."""
    if TASK_ENDPOINT.match(path):
        return None
    return (
        f"The token of {scope.label} is accepted only on that task's notice, checkpoint and "
        f"ready endpoints (/api/workflow/{scope.workflow_id}/task/{scope.task_name}/...), not "
        f"on {path}."
    )
