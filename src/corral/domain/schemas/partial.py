"""A template is a partial object: its fields are checked along the schema of its kind when
it is written (docs/templates.md#checked-on-write).

Text may stand anywhere (it is rendered, and ``ARRAY:[...]`` becomes a list), but a mapping, a
list, a number or a boolean must be what the schema wants there, and field names must exist:
``{"spec": {"containers": 0}}`` is refused at once instead of failing every submission.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from corral.domain.formats.json_paths import Path
from corral.domain.formats.unknown_fields import unknown_field
from corral.domain.schemas.objects import CORE_KINDS, core_ref, core_schema, custom_schema

Schema = Mapping[str, Any]
Resolve = Callable[[str], Schema]
#: What a scalar of each JSON schema type is called in messages.
_TYPE_NAMES = {
    "object": "a mapping",
    "array": "a list",
    "string": "text",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
}


def template_problem(template: Any, api_version: str, kind: str) -> tuple[Path, str] | None:
    """The first field of ``template`` that cannot be part of a ``kind`` object, if any."""
    if not api_version.rpartition("/")[0] and kind in CORE_KINDS:
        return _problem(template, core_schema(kind), core_ref, ())
    schema = custom_schema(api_version, kind)
    if schema is None:
        return None  # no schema: pool_problems reports it where a pool uses the template
    return _problem(template, schema, _no_refs, ())


def _no_refs(ref: str) -> Schema:
    raise KeyError(ref)


def _problem(value: Any, schema: Schema, resolve: Resolve, path: Path) -> tuple[Path, str] | None:
    schema = _resolved(schema, resolve)
    if value is None or isinstance(value, str):
        return None  # null, or text a template renders into whatever the field takes
    types = _types(schema, resolve)
    if not types:
        return None  # anything goes here (preserve-unknown-fields, quantities, ...)
    if isinstance(value, dict):
        return _mapping_problem(value, schema, types, resolve, path)
    if isinstance(value, list):
        if "array" not in types:
            return path, _wrong(types, "a list")
        items = schema.get("items")
        for index, item in enumerate(value):
            if isinstance(items, Mapping) and (
                found := _problem(item, items, resolve, (*path, index))
            ):
                return found
        return None
    return _scalar_problem(value, types, path)


def _mapping_problem(
    value: dict[Any, Any], schema: Schema, types: set[str], resolve: Resolve, path: Path
) -> tuple[Path, str] | None:
    if "object" not in types:
        return path, _wrong(types, "a mapping")
    properties = schema.get("properties") or {}
    values = schema.get("additionalProperties")
    for key, child in value.items():
        child_path = (*path, str(key))
        if key in properties:
            found = _problem(child, properties[key], resolve, child_path)
        elif isinstance(values, Mapping):
            found = _problem(child, values, resolve, child_path)
        elif properties or values is False:
            return child_path, unknown_field(key, list(properties))
        else:
            found = None
        if found:
            return found
    return None


def _scalar_problem(value: Any, types: set[str], path: Path) -> tuple[Path, str] | None:
    if isinstance(value, bool):
        fits = "boolean" in types
    elif isinstance(value, int):
        fits = bool(types & {"integer", "number", "int-or-string"})
    elif isinstance(value, float):
        fits = bool(types & {"number", "int-or-string"}) or (
            "integer" in types and value.is_integer()
        )
    else:
        fits = False
    return None if fits else (path, _wrong(types, repr(value)))


def _wrong(types: set[str], given: str) -> str:
    wanted = " or ".join(sorted(_TYPE_NAMES.get(t, t) for t in types - {"int-or-string"}))
    if "int-or-string" in types:
        wanted = "an integer or text"
    return f"must be {wanted}, not {given}"


def _resolved(schema: Schema, resolve: Resolve) -> Schema:
    seen = 0
    while "$ref" in schema and seen < 32:
        schema = {**resolve(schema["$ref"]), **{k: v for k, v in schema.items() if k != "$ref"}}
        seen += 1
    return schema


def _types(schema: Schema, resolve: Resolve) -> set[str]:
    """The non-null JSON types ``schema`` allows (``int-or-string`` for Kubernetes' union)."""
    if schema.get("x-kubernetes-int-or-string") or schema.get("format") == "int-or-string":
        return {"int-or-string"}
    declared = schema.get("type")
    types = {declared} if isinstance(declared, str) else set(declared or ())
    for branch in schema.get("oneOf") or schema.get("anyOf") or ():
        if isinstance(branch, Mapping):
            types |= _types(_resolved(branch, resolve), resolve)
    types.discard("null")
    if "string" in types and types & {"integer", "number"}:
        return {"int-or-string"}
    if types == set() and ("properties" in schema or "additionalProperties" in schema):
        return {"object"}
    return types
