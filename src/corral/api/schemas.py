"""Request bodies of the config API (OSMO's field names; unknown keys rejected)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any

from fastapi import Path, Query
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from starlette.convertors import Convertor, register_url_convertor

from corral.domain.configs.bundles import BUNDLE_SECTIONS
from corral.domain.configs.config_type import ConfigType
from corral.domain.configs.types import reject_unstorable
from corral.domain.formats.names import CONFIG_NAME_PATTERN, MAX_NAME_LENGTH
from corral.domain.formats.shown_text import SHOWN_PATTERN, shown_text_refusal
from corral.domain.formats.wire_time import in_utc
from corral.errors import UserError


def _iso_time(value: Any) -> Any:
    """A date and time as ISO 8601 text (UTC where it names no offset), never a number: pydantic
    would read ``0.5`` as seconds since 1970."""
    if isinstance(value, datetime):
        return value
    text = str(value)
    if _NUMBER.fullmatch(text.strip()):
        raise ValueError(f"give a date and time such as 2026-11-27T08:30:00Z, not {text!r}")
    try:
        found = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        raise ValueError(
            f"give a date and time such as 2026-11-27T08:30:00Z, not {text!r}"
        ) from None
    return in_utc(found)


_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")

#: A moment in a query: ISO 8601 text (declared as an RFC 3339 date-time).
IsoTime = Annotated[
    datetime,
    BeforeValidator(_iso_time),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]

#: How the API takes a config type: OSMO's name (``POOL``) or its URL segment (``pool``).
CONFIG_TYPE_NAMES = [t.value for t in ConfigType] + [t.url_segment for t in ConfigType]


def _config_type(text: Any) -> ConfigType:
    if isinstance(text, ConfigType):
        return text
    if text not in CONFIG_TYPE_NAMES:
        raise ValueError(
            f"Unknown config type {text!r}. Config types: {', '.join(t.value for t in ConfigType)}"
        )
    return ConfigType(str(text).upper())


#: A config type named in a path, a query or a body: declared as the enum of its spellings.
ConfigTypeName = Annotated[
    ConfigType,
    BeforeValidator(_config_type),
    WithJsonSchema({"type": "string", "enum": CONFIG_TYPE_NAMES}),
]

#: A config type that is one object (WORKFLOW): what a PATCH of a whole type names. The
#: document declares only those; the route refuses another, after the caller's access check,
#: with where to PATCH it.
SingletonTypeName = Annotated[
    ConfigType,
    BeforeValidator(_config_type),
    WithJsonSchema(
        {
            "type": "string",
            "enum": [name for name in CONFIG_TYPE_NAMES if ConfigType(name.upper()).singleton],
        }
    ),
]

#: OSMO's config types corral has no configs of: a history query may name them (OSMO's CLI
#: names them all) and finds no revisions of them.
OSMO_ONLY_TYPES = ("BACKEND_TEST", "DATASET", "SERVICE")


def _history_type(text: Any) -> ConfigType | None:
    if isinstance(text, str) and text.upper() in OSMO_ONLY_TYPES:
        return None
    return _config_type(text)


#: A config type a history query names: corral's, or one of OSMO's it has none of (None).
HistoryTypeName = Annotated[
    ConfigType | None,
    BeforeValidator(_history_type),
    WithJsonSchema(
        {
            "type": "string",
            "enum": [*CONFIG_TYPE_NAMES, *OSMO_ONLY_TYPES, *(n.lower() for n in OSMO_ONLY_TYPES)],
        }
    ),
]

#: Revisions are stored in a 32-bit column: a larger number names no revision (and would make
#: the database refuse the query).
REVISION_MAX = 2**31 - 1
RevisionQuery = Annotated[int | None, Query(ge=0, le=REVISION_MAX)]


def _whole(value: Any) -> Any:
    """A JSON integer: an int, or a number with nothing after its point (JSON Schema's
    ``integer`` takes ``5.0``); never a string or a boolean (strict bodies refuse those)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


#: Reads an integer of a strict body as JSON Schema reads one; it comes after the field's
#: bounds in an ``Annotated`` (before them, the document would not declare the bounds).
WHOLE = BeforeValidator(_whole)
RevisionPath = Annotated[int, Path(ge=0, le=REVISION_MAX)]
#: A config item's name in a write's path, declared as what a stored item may be called
#: (OSMO's rule); the write refuses another with the rule, naming the item's type.
ItemName = Annotated[
    str,
    Path(),
    WithJsonSchema(
        {"type": "string", "pattern": CONFIG_NAME_PATTERN, "maxLength": MAX_NAME_LENGTH}
    ),
]
BaseRevision = Annotated[int, Field(ge=0, le=REVISION_MAX), WHOLE] | None


class StrictBody(BaseModel):
    """A request body outside the config API: unknown keys refused, nothing a database
    cannot store (NUL characters, NaN): 400 naming the field, never a database error; and
    every value of its declared JSON type (strict: ``"yes"`` is no boolean, ``"5"`` no
    number)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="before")
    @classmethod
    def _storable(cls, data: Any) -> Any:
        reject_unstorable(data)  # a UserError passes through pydantic: 400 with its path
        return data


#: Text a database can store: declared without NUL (``Body`` refuses one, naming the field).
StoredText = Annotated[str, WithJsonSchema({"type": "string", "pattern": "^[^\\u0000]*$"})]


def _shown(text: str) -> str:
    refusal = shown_text_refusal(text)
    if refusal is not None:
        raise ValueError(refusal)
    return text


#: Text shown to other people as written (``formats/shown_text.py``): no NUL, and no
#: bidirectional control that would make it read as other text.
ShownText = Annotated[
    str, AfterValidator(_shown), WithJsonSchema({"type": "string", "pattern": SHOWN_PATTERN})
]


class Body(BaseModel):
    """A config API body: unknown keys refused, every value of its declared JSON type."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @field_validator("description", "tags", "set_tags", "delete_tags", check_fields=False)
    @classmethod
    def _storable(cls, value: Any) -> Any:
        try:
            reject_unstorable(value)
        except UserError as err:  # report it at this field, like any body error
            raise ValueError(err.message) from None
        return value


#: A config document in a body: any JSON value but null (its type's checks say the rest).
_DOCUMENT = {"anyOf": [{"type": t} for t in ("object", "array", "string", "number", "boolean")]}


class WriteBody(Body):
    """PUT/PATCH body. OSMO sends ``configs`` (PUT) or ``configs_dict`` (PATCH, bulk rules);
    one of them is required."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"anyOf": [{"required": ["configs"]}, {"required": ["configs_dict"]}]},
    )

    configs: Annotated[Any, WithJsonSchema(_DOCUMENT)] = None
    configs_dict: Annotated[Any, WithJsonSchema(_DOCUMENT)] = None

    @model_validator(mode="before")
    @classmethod
    def _no_null_document(cls, data: Any) -> Any:
        for key in ("configs", "configs_dict"):
            if isinstance(data, dict) and key in data and data[key] is None:
                raise UserError("give a config document, not null", path=(key,))
        return data

    description: ShownText | None = None
    tags: list[ShownText] = []
    base_revision: BaseRevision = None

    def document(self) -> Any:
        return self.configs if self.configs is not None else self.configs_dict


class PatchBody(WriteBody):
    """PATCH body: the patch is a JSON object (OSMO's strategic merge)."""

    configs: Annotated[Any, WithJsonSchema({"type": "object"})] = None
    configs_dict: Annotated[Any, WithJsonSchema({"type": "object"})] = None


class DeleteBody(Body):
    description: ShownText | None = None
    tags: list[ShownText] = []
    base_revision: BaseRevision = None
    force: StrictBool = False


class RollbackBody(Body):
    config_type: ConfigTypeName
    revision: Annotated[int, Field(gt=0, le=REVISION_MAX), WHOLE]
    description: ShownText | None = None
    tags: list[ShownText] = []
    base_revision: BaseRevision = None


class TagsBody(Body):
    """At least one tag to set or to delete."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "anyOf": [
                {"required": [key], "properties": {key: {"minItems": 1}}}
                for key in ("set_tags", "delete_tags")
            ]
        },
    )

    set_tags: list[ShownText] = []
    delete_tags: list[ShownText] = []


def _bundle_schema() -> dict[str, Any]:
    """A bundle as the document declares it: its known sections only (Helm's camelCase names
    too), each a map of items by their names, or (roles, backends) a list; the workflow one
    object."""
    items = {"type": "object", "propertyNames": {"pattern": CONFIG_NAME_PATTERN}}
    listed = {"anyOf": [items, {"type": "array", "items": {"type": "object"}}]}
    sections: dict[str, Any] = {
        key: (
            {"type": "object"}
            if ctype is ConfigType.WORKFLOW
            else listed
            if ctype in (ConfigType.ROLE, ConfigType.BACKEND)
            else items
        )
        for key, ctype in BUNDLE_SECTIONS.items()
    }
    return {"type": "object", "properties": sections, "additionalProperties": False}


class ApplyBody(Body):
    bundle: Annotated[dict[str, Any], WithJsonSchema(_bundle_schema())]
    dry_run: StrictBool = False
    description: ShownText | None = None
    tags: list[ShownText] = []


class ConfigTypeConvertor(Convertor[ConfigType]):
    """``{segment:config_type}`` in a route's path: only a config type's name matches, so
    ``/api/configs/apply`` is never taken for a type (a wrong method there is a 405)."""

    regex = "|".join(CONFIG_TYPE_NAMES)

    def convert(self, value: str) -> ConfigType:
        return _config_type(value)

    def to_string(self, value: ConfigType) -> str:
        return value.url_segment


register_url_convertor("config_type", ConfigTypeConvertor())
