"""The ROLE config model: policies of semantic actions, and OSMO's legacy path actions."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator

from corral.domain.configs.models import StrictModel

_SEMANTIC_ACTION = re.compile(r"^(\*|[a-z]+):(\*|[A-Z][a-zA-Z]*)$")
_HTTP_METHODS = ("*", "get", "post", "put", "patch", "delete", "websocket")


class LegacyAction(StrictModel):
    """OSMO's pre-policy action ``{"base": "http", "path": ..., "method": ...}``, kept as given."""

    base: Literal["http"]
    path: str = Field(min_length=1)
    method: str

    @field_validator("method")
    @classmethod
    def _method(cls, method: str) -> str:
        if method.lower() not in _HTTP_METHODS:
            raise ValueError(f"method {method!r} is not one of {', '.join(_HTTP_METHODS)}")
        return method


class RolePolicy(StrictModel):
    effect: Literal["Allow", "Deny"] = "Allow"
    actions: list[str | LegacyAction]
    resources: list[str] = []

    @field_validator("actions", mode="before")
    @classmethod
    def _single_action(cls, value: Any) -> Any:
        return [value] if isinstance(value, str | dict) else value

    @field_validator("actions")
    @classmethod
    def _action_format(cls, actions: list[str | LegacyAction]) -> list[str | LegacyAction]:
        for action in actions:
            if isinstance(action, str) and not _SEMANTIC_ACTION.match(action):
                raise ValueError(
                    f'Invalid action format: {action}. Expected format: "resource:Action" '
                    '(e.g., "workflow:Create", "*:*")'
                )
        return actions


class Role(StrictModel):
    name: str = ""
    description: str = ""
    policies: list[RolePolicy] = []
    # Seed 004 writes legacy actions at the top level of a role; stored as given.
    actions: list[LegacyAction] | None = None
    immutable: bool = False
    sync_mode: Literal["import", "force", "ignore"] = "import"
    external_roles: list[str] | None = None
