"""Request bodies of the config API (OSMO's field names; unknown keys rejected)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path, Query
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from corral.domain.configs.types import reject_unstorable
from corral.errors import UserError

#: Revisions are stored in a 32-bit column: a larger number names no revision (and would make
#: the database refuse the query).
REVISION_MAX = 2**31 - 1
RevisionQuery = Annotated[int | None, Query(ge=0, le=REVISION_MAX)]
RevisionPath = Annotated[int, Path(ge=0, le=REVISION_MAX)]
BaseRevision = Annotated[int | None, Field(ge=0, le=REVISION_MAX)]


class StrictBody(BaseModel):
    """A request body outside the config API: unknown keys refused, and nothing a database
    cannot store (NUL characters, NaN): 400 naming the field, never a database error."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _storable(cls, data: Any) -> Any:
        reject_unstorable(data)  # a UserError passes through pydantic: 400 with its path
        return data


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
    base_revision: BaseRevision = None

    def document(self) -> Any:
        return self.configs if self.configs is not None else self.configs_dict


class DeleteBody(Body):
    description: str | None = None
    tags: list[str] = []
    base_revision: BaseRevision = None
    force: bool = False


class RollbackBody(Body):
    config_type: str
    revision: int = Field(gt=0, le=REVISION_MAX)
    description: str | None = None
    tags: list[str] = []
    base_revision: BaseRevision = None


class TagsBody(Body):
    set_tags: list[str] = []
    delete_tags: list[str] = []


class ApplyBody(Body):
    bundle: dict[str, Any]
    dry_run: bool = False
    description: str | None = None
    tags: list[str] = []
