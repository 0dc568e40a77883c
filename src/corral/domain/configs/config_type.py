"""The config types, without what parsing them needs (the CLI names types in its arguments;
importing the models, pydantic and the Kubernetes schemas cost it half a second a call)."""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING

from corral.errors import UserError

if TYPE_CHECKING:
    from corral.domain.configs.types import TypeSpec


class ConfigType(StrEnum):
    POOL = "POOL"
    POD_TEMPLATE = "POD_TEMPLATE"
    GROUP_TEMPLATE = "GROUP_TEMPLATE"
    RESOURCE_VALIDATION = "RESOURCE_VALIDATION"
    ROLE = "ROLE"
    BACKEND = "BACKEND"
    WORKFLOW = "WORKFLOW"

    @property
    def spec(self) -> TypeSpec:
        from corral.domain.configs.types import SPECS  # the models, loaded when first needed

        return SPECS[self]

    @property
    def url_segment(self) -> str:
        return self.value.lower()

    @classmethod
    def parse(cls, text: str) -> ConfigType:
        """Accept ``POOL``, ``pool``, ``pod-template``; reject anything else with the list."""
        normalized = text.strip().upper().replace("-", "_")
        try:
            return cls(normalized)
        except ValueError:
            raise UserError(
                f"Unknown config type {text!r}. Config types: {', '.join(t.value for t in cls)}"
            ) from None
