"""Request bodies of the config API (OSMO's field names; unknown keys rejected)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from corral.domain.config_types import reject_unstorable
from corral.errors import UserError


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @field_validator("description", "tags", "set_tags", "delete_tags", check_fields=False)
    @classmethod
    def _storable(cls, value: Any) -> Any:
        try:
            reject_unstorable(value)
        except UserError as err:  # report it at this field, like any body error
            raise ValueError(err.message) from None
        return value


class WriteBody(Body):
    """PUT/PATCH body. OSMO sends ``configs`` (PUT) or ``configs_dict`` (PATCH, bulk rules)."""

    configs: Any = None
    configs_dict: Any = None
    description: str | None = None
    tags: list[str] = []
    base_revision: int | None = Field(default=None, ge=0)

    def document(self) -> Any:
        return self.configs if self.configs is not None else self.configs_dict


class DeleteBody(Body):
    description: str | None = None
    tags: list[str] = []
    base_revision: int | None = Field(default=None, ge=0)
    force: bool = False


class RollbackBody(Body):
    config_type: str
    revision: int = Field(gt=0)
    description: str | None = None
    tags: list[str] = []
    base_revision: int | None = Field(default=None, ge=0)


class TagsBody(Body):
    set_tags: list[str] = []
    delete_tags: list[str] = []


class ApplyBody(Body):
    bundle: dict[str, Any]
    dry_run: bool = False
    description: str | None = None
    tags: list[str] = []
