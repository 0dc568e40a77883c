"""The config types, how each item is parsed, and how documents of each type are shaped.

Every named type is held as a snapshot ``{item name: item}`` of JSON-ready dicts; WORKFLOW is a
single object. The wire shapes follow OSMO: ``{"pools": {...}}`` for POOL, a list for ROLE,
``{"backends": [...]}`` for BACKEND, a bare map for the template and validation types.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from types import UnionType
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from corral.domain.configs import backend_models, role_models, workflow_models
from corral.domain.configs import models as configs
from corral.domain.configs.config_type import ConfigType as ConfigType  # re-exported
from corral.domain.formats.names import check_name
from corral.domain.formats.unknown_fields import unknown_field
from corral.domain.jinja.templating import check_all_jinja, refuse_task_variables
from corral.errors import UserError

Item = Any


def _model_parser(model: type[BaseModel]) -> Callable[[Any], Item]:
    def parse(raw: Any) -> Item:
        try:
            return model.model_validate(raw).model_dump(mode="json")
        except ValidationError as err:
            raise validation_error(err, raw, model) from None

    return parse


def _free_form_parser(check: Callable[[Any], dict[str, Any]]) -> Callable[[Any], Item]:
    def parse(raw: Any) -> Item:
        try:
            return check(raw)
        except configs.FieldProblem as problem:
            raise UserError(str(problem), path=problem.path) from None
        except ValueError as err:
            raise UserError(str(err)) from None

    return parse


def _parse_rules(raw: Any) -> Item:
    if not isinstance(raw, list):
        raise UserError("a resource validation is a list of rules")
    rule_parser = _model_parser(configs.ResourceRule)
    parsed = []
    for index, rule in enumerate(raw):
        try:
            parsed.append(rule_parser(rule))
        except UserError as err:
            raise err.under(index) from None
    return parsed


def _check_templates_jinja(
    check: Callable[[Any], dict[str, Any]], *, group: bool = False
) -> Callable[[Any], dict[str, Any]]:
    def checked(raw: Any) -> dict[str, Any]:
        template = check(raw)
        check_all_jinja(template)
        if group:
            refuse_task_variables(template)
        return template

    return checked


#: How each type's items are parsed.
PARSERS: dict[ConfigType, Callable[[Any], Item]] = {
    ConfigType.POOL: _model_parser(configs.Pool),
    ConfigType.POD_TEMPLATE: _free_form_parser(_check_templates_jinja(configs.check_pod_template)),
    ConfigType.GROUP_TEMPLATE: _free_form_parser(
        _check_templates_jinja(configs.check_group_template, group=True)
    ),
    ConfigType.RESOURCE_VALIDATION: _parse_rules,
    ConfigType.ROLE: _model_parser(role_models.Role),
    ConfigType.BACKEND: _model_parser(backend_models.Backend),
    ConfigType.WORKFLOW: _model_parser(workflow_models.WorkflowConfig),
}

# Types whose items carry their own name (filled from the key on write).
_NAMED_ITEMS = (ConfigType.POOL, ConfigType.ROLE, ConfigType.BACKEND)


def reject_unstorable(value: Any, path: tuple[str | int, ...] = ()) -> None:
    """Refuse what JSON or PostgreSQL cannot hold although Python's JSON reader accepts it:
    NaN, Infinity, and NUL characters in text."""
    if isinstance(value, float) and not math.isfinite(value):
        shown = "NaN" if math.isnan(value) else "Infinity"
        raise UserError(
            f"{shown} is not a JSON number; write a finite number or a string", path=path
        )
    if isinstance(value, str) and "\x00" in value:
        raise UserError("text must not contain NUL characters (\\u0000)", path=path)
    if isinstance(value, dict):
        for key, child in value.items():
            reject_unstorable(key, path)
            reject_unstorable(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            reject_unstorable(child, (*path, index))


def parse_item(ctype: ConfigType, name: str, raw: Any) -> Item:
    """Validate one item written under ``name``; errors carry a path relative to the item."""
    reject_unstorable(raw)
    if not ctype.singleton:
        check_name(ctype.label, name)
    if ctype in _NAMED_ITEMS and isinstance(raw, dict):
        given = raw.get("name")
        if given not in (None, "", name):
            raise UserError(
                f'{ctype.label} name "{given}" in the body does not match "{name}", '
                "the name it is written under. Make them equal or drop the name field.",
                path=("name",),
            )
        raw = {**raw, "name": name}
    return PARSERS[ctype](raw)


def parse_items(ctype: ConfigType, document: Any) -> tuple[dict[str, Item], tuple[str, ...]]:
    """Parse a bulk document of ``ctype`` into items.

    Accepts the wrapped form (``{"pools": {...}}``), the bare map (``{"name": {...}}``) and,
    for ROLE and BACKEND, OSMO's list of named objects. Returns the items and the path prefix
    at which they were found, so that errors can point into the original document.
    """
    if ctype.singleton:
        raise UserError(f"{ctype.value} is a single object, not a map of named items")
    body, prefix = _unwrap(ctype, document)
    if isinstance(body, list):
        return _parse_named_list(ctype, body, prefix), prefix
    if not isinstance(body, dict):
        raise UserError(
            f"a {ctype.value} document must be an object mapping names to items", path=prefix
        )
    items: dict[str, Item] = {}
    for name, raw in body.items():
        try:
            items[name] = parse_item(ctype, name, raw)
        except UserError as err:
            raise err.under(*prefix, name) from None
    return items, prefix


def _unwrap(ctype: ConfigType, document: Any) -> tuple[Any, tuple[str, ...]]:
    key = ctype.bundle_key
    assert key is not None
    if isinstance(document, dict) and set(document) == {key}:
        inner = document[key]
        # A lone item that happens to be named like the wrapper is still an item.
        is_single_item = isinstance(inner, dict) and _looks_like_item(ctype, inner)
        if not is_single_item:
            return inner, (key,)
    return document, ()


def _looks_like_item(ctype: ConfigType, value: dict[str, Any]) -> bool:
    markers = {
        ConfigType.POOL: "backend",
        ConfigType.ROLE: "policies",
        ConfigType.BACKEND: "scheduler_settings",
        ConfigType.POD_TEMPLATE: "spec",
        ConfigType.GROUP_TEMPLATE: "apiVersion",
    }
    marker = markers.get(ctype)
    return marker is not None and marker in value and not isinstance(value[marker], dict | list)


def _parse_named_list(
    ctype: ConfigType, body: list[Any], prefix: tuple[str, ...]
) -> dict[str, Item]:
    if ctype not in (ConfigType.ROLE, ConfigType.BACKEND):
        raise UserError(
            f"a {ctype.value} document must be an object mapping names to items, not a list",
            path=prefix,
        )
    items: dict[str, Item] = {}
    for index, raw in enumerate(body):
        name = raw.get("name") if isinstance(raw, dict) else None
        if not isinstance(name, str) or not name:
            raise UserError(
                f"every {ctype.label.lower()} in a list needs a name", path=(*prefix, index)
            )
        if name in items:
            raise UserError(
                f'{ctype.label} "{name}" appears twice in the list', path=(*prefix, index)
            )
        try:
            items[name] = parse_item(ctype, name, raw)
        except UserError as err:
            raise err.under(*prefix, index) from None
    return items


def parse_singleton(ctype: ConfigType, document: Any) -> Item:
    if not isinstance(document, dict):
        raise UserError(f"the {ctype.value} config must be a JSON object")
    reject_unstorable(document)
    return PARSERS[ctype](document)


# -------------------------------------------------------------------- pydantic -> UserError

_KNOWN_RENAMES = {
    "override_resource_validations": "resource_validations",
    "action": "actions",
    "resource": "resources",
}


def _all_field_names() -> set[str]:
    names: set[str] = set()
    for model in (
        configs.Pool,
        configs.Platform,
        configs.GpuQuota,
        configs.PoolResources,
        configs.TopologyKey,
        configs.ResourceRule,
        role_models.Role,
        role_models.RolePolicy,
        role_models.LegacyAction,
        backend_models.Backend,
        backend_models.SchedulerSettings,
        backend_models.NodeConditions,
        workflow_models.WorkflowConfig,
        workflow_models.WorkflowInfo,
        workflow_models.UserWorkflowLimits,
    ):
        names.update(model.model_fields)
    return names


_FIELD_NAMES = _all_field_names()


def _fields_at(model: type[BaseModel], loc: Sequence[str | int]) -> list[str]:
    """The fields of the model at pydantic's location ``loc`` (which names the member it
    tried of a union), or none when no model is there."""
    found: list[Any] = [model]
    for step in loc:
        found = [child for kind in found for child in _children(kind, step)]
    models = [kind for kind in found if isinstance(kind, type) and issubclass(kind, BaseModel)]
    return list(models[0].model_fields) if models else []


def _children(kind: Any, step: str | int) -> list[Any]:
    """The types one step below ``kind``: a model's field, a list's item, a dict's value, or
    the member of a union that pydantic names."""
    if get_origin(kind) in (Union, UnionType):
        return [child for member in get_args(kind) for child in _children(member, step)]
    if isinstance(kind, type) and issubclass(kind, BaseModel):
        if step in kind.model_fields:
            return [kind.model_fields[str(step)].annotation]
        return [kind] if step == kind.__name__ else []
    origin, args = get_origin(kind), get_args(kind)
    if origin is list and isinstance(step, int):
        return [args[0]]
    if origin is dict and isinstance(step, str):
        return [args[1]]
    return []


def validation_error(err: ValidationError, raw: Any, model: type[BaseModel]) -> UserError:
    """The most specific pydantic error as a UserError naming its path, in plain words.

    For unions pydantic reports one error per member; the deepest is the one that explains
    what went wrong (e.g. a bad ``base`` inside a legacy action rather than "not a string").
    """
    details = max(err.errors(), key=lambda d: (len(d["loc"]), d["type"] == "extra_forbidden"))
    path = _real_path(raw, details["loc"])
    kind = details["type"]
    if kind == "extra_forbidden":
        key = str(path[-1])
        allowed = _fields_at(model, details["loc"][:-1])
        message = unknown_field(key, allowed, suggestion=_KNOWN_RENAMES.get(key))
    elif kind == "missing":
        message = f"Required key '{details['loc'][-1]}' is missing."
    elif kind in ("value_error", "assertion_error"):
        message = str(details["msg"]).removeprefix("Value error, ")
        cause = details.get("ctx", {}).get("error")
        if isinstance(cause, configs.FieldProblem):
            path = (*path, *cause.path)
    else:
        shown = details.get("input")
        text = (
            "Input should be an object" if kind in ("model_type", "dict_type") else details["msg"]
        )
        message = f"{text} (got {type(shown).__name__} {shown!r})."
    return UserError(message, path=path)


def _has_child(node: Any, step: str | int) -> bool:
    if isinstance(node, dict):
        return step in node
    return isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node)


def _real_path(raw: Any, loc: tuple[str | int, ...]) -> tuple[str | int, ...]:
    """Drop the union member names pydantic inserts into a location, keeping real keys."""
    path: list[str | int] = []
    node = raw
    for step in loc:
        if _has_child(node, step):
            path.append(step)
            node = node[step]
        elif not isinstance(node, dict | list) or isinstance(step, int):
            break
        elif step in _FIELD_NAMES:  # a missing key: name it
            path.append(step)
            node = None
    return tuple(path)
