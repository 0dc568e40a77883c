"""Declarative bundles in OSMO's Helm-values shape: several config types in one document.

A bundle is ``{"pools": {...}, "pod_templates": {...}, "group_templates": {...},
"resource_validations": {...}, "roles": {...}, "backends": {...}, "workflow": {...}}``; the Helm
chart's camelCase keys (``podTemplates`` ...) are accepted too. A directory of files becomes one
bundle: each file is either a bundle fragment or, when named after a type (``pools.json``,
``pod_templates.yaml``), a document of that type.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from corral.domain.configs.types import ConfigType, Item, parse_items, parse_singleton
from corral.errors import UserError

BUNDLE_KEYS: dict[str, ConfigType] = {
    "pools": ConfigType.POOL,
    "pod_templates": ConfigType.POD_TEMPLATE,
    "group_templates": ConfigType.GROUP_TEMPLATE,
    "resource_validations": ConfigType.RESOURCE_VALIDATION,
    "roles": ConfigType.ROLE,
    "backends": ConfigType.BACKEND,
    "workflow": ConfigType.WORKFLOW,
}
_HELM_KEYS = {
    "podTemplates": "pod_templates",
    "groupTemplates": "group_templates",
    "resourceValidations": "resource_validations",
}
#: Every section name a bundle may use (Helm's too), and its type.
BUNDLE_SECTIONS: dict[str, ConfigType] = {
    **BUNDLE_KEYS,
    **{helm: BUNDLE_KEYS[key] for helm, key in _HELM_KEYS.items()},
}
_UNSUPPORTED = {
    "service": "SERVICE config is not managed by corral",
    "backend_tests": "BACKEND_TEST configs are not supported by corral",
    "backendTests": "BACKEND_TEST configs are not supported by corral",
    "dataset": "DATASET configs are not supported by corral",
}


@dataclass(frozen=True)
class ParsedBundle:
    """Items per named type, and the WORKFLOW object if the bundle has one."""

    items: dict[ConfigType, dict[str, Item]]
    workflow: Item | None


def canonical_key(key: str) -> str:
    return _HELM_KEYS.get(key, key)


def parse_bundle(bundle: Any) -> ParsedBundle:
    """Validate every item of a bundle; errors carry the path inside the bundle."""
    if not isinstance(bundle, dict):
        raise UserError("a bundle must be an object with keys such as pools, pod_templates, roles")
    items: dict[ConfigType, dict[str, Item]] = {}
    workflow: Item | None = None
    for key, value in bundle.items():
        ctype = _bundle_type(key)
        if ctype is ConfigType.WORKFLOW:
            try:
                workflow = parse_singleton(ctype, value)
            except UserError as err:
                raise err.under(key) from None
            continue
        try:
            parsed, _ = parse_items(ctype, value)
        except UserError as err:
            raise err.under(key) from None
        items.setdefault(ctype, {}).update(parsed)
    return ParsedBundle(items, workflow)


def _bundle_type(key: str) -> ConfigType:
    if key in _UNSUPPORTED:
        raise UserError(f"{_UNSUPPORTED[key]}; remove the '{key}' section.", path=(key,))
    ctype = BUNDLE_KEYS.get(canonical_key(key))
    if ctype is None:
        close = difflib.get_close_matches(key, [*BUNDLE_KEYS, *_HELM_KEYS], n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise UserError(
            f"Unknown bundle section '{key}'{hint}. Sections: {', '.join(BUNDLE_KEYS)}.",
            path=(key,),
        )
    return ctype


@dataclass(frozen=True)
class Origin:
    """Where a bundle entry came from: file, its text, and the path of the entry in it."""

    filename: str
    text: str
    path: tuple[str | int, ...]


def merge_files(
    documents: Sequence[tuple[str, str, Any]],
) -> tuple[dict[str, Any], dict[tuple[str, str], Origin]]:
    """Merge parsed files ``(filename, text, document)`` into one bundle.

    Returns the bundle and, per ``(section, item name)``, the origin of that entry, so that an
    error on ``pools.x.backend`` can be shown at its line in the file that defined pool ``x``.
    The same item defined in two files is an error naming both.
    """
    bundle: dict[str, Any] = {}
    origins: dict[tuple[str, str], Origin] = {}
    for filename, text, document in documents:
        for section, body, prefix in _sections(filename, document):
            if section == "workflow":
                _claim(origins, (section, ""), Origin(filename, text, prefix))
                bundle[section] = body
                continue
            target = bundle.setdefault(section, {})
            for name, item, item_path in _named_entries(section, body, prefix):
                _claim(origins, (section, name), Origin(filename, text, item_path))
                target[name] = item
    return bundle, origins


def _sections(filename: str, document: Any) -> list[tuple[str, Any, tuple[str | int, ...]]]:
    if (
        isinstance(document, dict)
        and document
        and all(canonical_key(k) in BUNDLE_KEYS or k in _UNSUPPORTED for k in document)
    ):
        return [(canonical_key(k), v, (k,)) for k, v in document.items()]
    stem = canonical_key(PurePath(filename).stem)
    if stem in BUNDLE_KEYS:
        return [(stem, document, ())]
    raise UserError(
        f"{filename}: cannot tell which config type this file holds. Name the file after its "
        f'type ({", ".join(BUNDLE_KEYS)}) or wrap its content, e.g. {{"pools": {{...}}}}.'
    )


def _named_entries(
    section: str, body: Any, prefix: tuple[str | int, ...]
) -> list[tuple[str, Any, tuple[str | int, ...]]]:
    wrapper = section
    if isinstance(body, dict) and set(body) == {wrapper} and isinstance(body[wrapper], dict | list):
        body, prefix = body[wrapper], (*prefix, wrapper)
    if isinstance(body, list):  # roles/backends as OSMO lists
        entries = []
        for index, item in enumerate(body):
            name = item.get("name") if isinstance(item, dict) else None
            if not isinstance(name, str):
                raise UserError(f"every entry of '{section}' needs a name", path=(*prefix, index))
            entries.append((name, item, (*prefix, index)))
        return entries
    if not isinstance(body, dict):
        raise UserError(f"'{section}' must map names to items", path=prefix)
    return [(name, item, (*prefix, name)) for name, item in body.items()]


def _claim(origins: dict[tuple[str, str], Origin], key: tuple[str, str], origin: Origin) -> None:
    if key in origins:
        first = origins[key].filename
        what = "the workflow config" if key[0] == "workflow" else f"{key[0]} entry '{key[1]}'"
        raise UserError(f"{what} is defined in both {first} and {origin.filename}; keep one.")
    origins[key] = origin
