"""Generate ``src/corral/domain/schemas/field_types.json``: the non-string scalar fields of the
kinds corral renders, read from the real Kubernetes schemas.

Jinja always renders text, but the API server rejects ``"30"`` where it wants ``30``. Rather
than guess from the text (``"0755"``, ``"yes"``, ``"1e3"`` are all traps), corral looks up the
type the schema declares for the field being rendered. This script derives that table from:

- the Pod v1 schema of the newest Kubernetes version ``kubernetes_validate`` ships, and
- every version's ``openAPIV3Schema`` in the CRDs vendored under ``schemas/crds/``.

Only ``integer``, ``number``, ``boolean`` and ``int-or-string`` leaves are listed (a string
needs no conversion); ``*`` stands for any list item or any map value. ``status`` is skipped:
the server writes it, a template never does, and it would double the table.

Usage::

    python scripts/generate_field_types.py          # rewrite the JSON
    python scripts/generate_field_types.py --check  # exit 1 if the JSON is out of date
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator, Mapping
from importlib.resources import files
from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml

ROOT = Path(__file__).resolve().parents[1]
CRD_DIR = ROOT / "schemas" / "crds"
OUTPUT = ROOT / "src" / "corral" / "domain" / "schemas" / "field_types.json"

#: Deeper than any real Pod or CRD field; stops runaway recursion through self-similar schemas.
MAX_DEPTH = 32
#: Top-level fields that are written by the server, never rendered from a template.
SKIPPED_TOP_LEVEL = frozenset({"status"})
SCALAR_TYPES = ("integer", "number", "boolean")

Schema = Mapping[str, Any]
Resolve = Callable[[str], Schema]


def newest_kubernetes_version() -> str:
    """``major.minor`` of the newest Kubernetes schemas ``kubernetes_validate`` ships."""
    major, minor, *_ = kubernetes_validate.latest_version().split(".")
    return f"{major}.{minor}"


def _load_kubernetes_schema(version: str, name: str) -> Any:
    folder = files("kubernetes_validate") / "kubernetes-json-schema" / f"v{version}.0-local-strict"
    return json.loads((folder / name).read_text(encoding="utf-8"))


class Resolver:
    """Resolves the ``$ref``s of the kubernetes_validate schemas, which all point into the
    ``$defs`` of ``_definitions.json`` (``/api/_definitions.json#/$defs/X`` from a kind's file,
    ``#/$defs/X`` from inside the definitions)."""

    def __init__(self, definitions: Schema) -> None:
        self._definitions = definitions

    def __call__(self, ref: str) -> Schema:
        document, _, pointer = ref.partition("#")
        if document and not document.endswith("_definitions.json"):
            raise ValueError(f"unsupported $ref {ref!r}")
        target: Any = self._definitions
        for part in pointer.strip("/").split("/"):
            target = target[part.replace("~1", "/").replace("~0", "~")]
        if not isinstance(target, Mapping):
            raise ValueError(f"$ref {ref!r} does not point at a schema")
        return target


def _no_refs(ref: str) -> Schema:
    raise ValueError(f"unexpected $ref {ref!r} in a CRD schema")


def _types(schema: Schema) -> set[str]:
    """The non-null JSON types ``schema`` allows through ``type`` (a string or a list)."""
    declared = schema.get("type")
    if isinstance(declared, str):
        return {declared} - {"null"}
    if isinstance(declared, list):
        return {t for t in declared if isinstance(t, str)} - {"null"}
    return set()


def scalar_type(schema: Schema, resolve: Resolve = _no_refs) -> str | None:
    """The field type corral converts rendered text to, or None for strings and containers.

    ``int-or-string`` covers the Kubernetes extensions (``format: int-or-string``,
    ``x-kubernetes-int-or-string``) and the ``oneOf``/``anyOf`` of a number and a string that
    the JSON schemas use for IntOrString and Quantity.
    """
    if schema.get("x-kubernetes-int-or-string") is True or schema.get("format") == "int-or-string":
        return "int-or-string"
    branches = schema.get("oneOf") or schema.get("anyOf")
    types = _types(schema)
    if isinstance(branches, list):
        for branch in branches:
            if isinstance(branch, Mapping):
                types |= _types(resolve(branch["$ref"]) if "$ref" in branch else branch)
    if "string" in types and types & {"integer", "number"}:
        return "int-or-string"
    if len(types) == 1 and (only := next(iter(types))) in SCALAR_TYPES:
        return only
    return None


def walk(
    schema: Schema,
    resolve: Resolve,
    path: tuple[str, ...] = (),
    refs: frozenset[str] = frozenset(),
) -> Iterator[tuple[str, str]]:
    """Yield ``(dotted path, type)`` for every typed scalar leaf below ``schema``.

    ``refs`` holds the ``$ref``s already followed on the way down, so a schema that contains
    itself (JSONSchemaProps, for one) ends the branch instead of recursing forever.
    """
    if len(path) > MAX_DEPTH:
        return
    ref = schema.get("$ref")
    if isinstance(ref, str):
        if ref in refs:
            return
        refs = refs | {ref}
        schema = {**resolve(ref), **{k: v for k, v in schema.items() if k != "$ref"}}
    found = scalar_type(schema, resolve)
    if found is not None:
        yield ".".join(path), found
        return
    properties = schema.get("properties")
    values = schema.get("additionalProperties")
    if isinstance(properties, Mapping) and properties and isinstance(values, Mapping):
        # The JSON has one ``*`` for list items and map values alike, and lookups try an
        # exact key before ``*``: a schema with both would make that ambiguous.
        raise ValueError(f"{'.'.join(path)!r} has both properties and additionalProperties")
    if isinstance(properties, Mapping):
        for name, child in properties.items():
            if not path and name in SKIPPED_TOP_LEVEL:
                continue
            yield from walk(child, resolve, (*path, name), refs)
    for key in ("items", "additionalProperties"):
        child = schema.get(key)
        if isinstance(child, Mapping):
            yield from walk(child, resolve, (*path, "*"), refs)


def pod_fields(version: str) -> dict[str, str]:
    """Typed fields of the core Pod v1 schema."""
    definitions = _load_kubernetes_schema(version, "_definitions.json")
    pod = _load_kubernetes_schema(version, "pod-v1.json")
    return dict(walk(pod, Resolver(definitions)))


def crd_versions(crd_dir: Path = CRD_DIR) -> Iterator[tuple[str, Schema]]:
    """``("group/version/Kind", openAPIV3Schema)`` for every version of every vendored CRD."""
    for path in sorted(crd_dir.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if not isinstance(document, dict) or document.get("kind") != "CustomResourceDefinition":
                continue
            spec = document["spec"]
            for version in spec["versions"]:
                key = f"{spec['group']}/{version['name']}/{spec['names']['kind']}"
                yield key, version["schema"]["openAPIV3Schema"]


def build(crd_dir: Path = CRD_DIR) -> dict[str, Any]:
    """The whole table, as written to ``field_types.json``."""
    version = newest_kubernetes_version()
    kinds: dict[str, dict[str, str]] = {"v1/Pod": pod_fields(version)}
    for key, schema in crd_versions(crd_dir):
        kinds[key] = dict(walk(schema, _no_refs))
    return {
        "source": {"kubernetes": version},
        "kinds": {key: dict(sorted(fields.items())) for key, fields in sorted(kinds.items())},
    }


def render(table: Mapping[str, Any]) -> str:
    """Deterministic JSON text: sorted keys, 2-space indent, trailing newline."""
    return json.dumps(table, indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="fail if the JSON is out of date")
    args = parser.parse_args(argv)
    table = build()
    text = render(table)
    if args.check:
        current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else ""
        if current != text:
            print(
                f"{OUTPUT.relative_to(ROOT)} is out of date; "
                "run: python scripts/generate_field_types.py",
                file=sys.stderr,
            )
            return 1
        return 0
    OUTPUT.write_text(text, encoding="utf-8")
    counts = ", ".join(f"{kind}: {len(fields)}" for kind, fields in table["kinds"].items())
    print(f"wrote {OUTPUT.relative_to(ROOT)} ({counts})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
