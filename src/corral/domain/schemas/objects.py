"""Check a rendered manifest against the schema Kubernetes would apply to it.

The submission pipeline refuses a workflow whose objects the API server would refuse, and tests
use the same check: comparing dictionaries cannot tell ``"30"`` from ``30``; the API server
can. This module validates like the server would (as far as schemas go; CEL rules and
admission are out of scope):

- core kinds (``CORE_KINDS``) with ``kubernetes_validate`` in strict mode (unknown fields are
  errors), against the newest Kubernetes version it ships;
- the CRDs vendored in ``schemas/crds/`` with ``jsonschema``, after translating the Kubernetes
  extensions of their ``openAPIV3Schema`` into plain JSON Schema (see ``_to_json_schema``).

Every object is first checked by ``jsonschema_rs`` against the same schemas (about 400 times
faster: the schema check was two thirds of planning a submission); only an object it refuses
goes through ``jsonschema``, whose messages and paths are the ones users see. A test holds the
two to the same verdicts.

``metadata`` is checked by hand for every kind: CRD schemas only say it is an object, and the
core schemas do not check that the name is a DNS-1123 subdomain.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema_rs
import kubernetes_validate  # type: ignore[import-untyped]
import yaml
from jsonschema import Draft202012Validator, ValidationError
from kubernetes_validate.utils import schema_contents  # type: ignore[import-untyped]
from referencing import Registry, Resource


def _crd_directory() -> Path:
    """The vendored CRDs: in the source tree, or packaged inside the wheel."""
    source_tree = Path(__file__).resolve().parents[4] / "schemas" / "crds"
    packaged = Path(__file__).resolve().parents[2] / "_schemas" / "crds"
    return source_tree if source_tree.is_dir() else packaged


CRD_DIR = _crd_directory()
KUBERNETES_VERSION: str = kubernetes_validate.latest_version()
#: Core ``v1`` kinds validated with kubernetes_validate; any other core kind is "no schema".
CORE_KINDS = frozenset({"Pod", "Service", "ConfigMap", "Secret"})

_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS_SUBDOMAIN_MAX = 253
#: Keywords whose value is a schema, or a list or map of schemas; everything else (``enum``,
#: ``default``, ``example``, ...) is data and must not be translated.
_SCHEMA_KEYWORDS = ("items", "additionalProperties", "not")
_SCHEMA_LIST_KEYWORDS = ("anyOf", "oneOf", "allOf")
_SCHEMA_MAP_KEYWORDS = ("properties", "patternProperties")


def format_path(path: Sequence[str | int]) -> str:
    """``spec.containers[0].image``: the way ``kubectl explain`` users read a field path."""
    text = ""
    for segment in path:
        text += f"[{segment}]" if isinstance(segment, int) else f".{segment}"
    return text.removeprefix(".")


Problem = tuple[tuple[str | int, ...], str]


def _problem(path: Sequence[str | int], message: str) -> str:
    where = format_path(path)
    return f"{where}: {message}" if where else message


def _to_json_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Translate one node of a CRD structural schema into JSON Schema a validator understands.

    - ``nullable: true`` allows ``null``;
    - ``x-kubernetes-int-or-string`` without its usual ``anyOf`` becomes integer-or-string;
    - an object with ``properties`` rejects unknown fields (as ``kubectl`` does with the default
      strict field validation) unless it has ``x-kubernetes-preserve-unknown-fields``;
    - the other ``x-kubernetes-*`` keys (CEL rules, list types) are dropped: they are not JSON
      Schema and a schema-only check cannot evaluate them.
    """
    out: dict[str, Any] = {
        key: value
        for key, value in schema.items()
        if not key.startswith("x-kubernetes-") and key != "nullable"
    }
    for key in _SCHEMA_KEYWORDS:
        if isinstance(schema.get(key), Mapping):
            out[key] = _to_json_schema(schema[key])
    for key in _SCHEMA_LIST_KEYWORDS:
        if isinstance(schema.get(key), list):
            out[key] = [_to_json_schema(branch) for branch in schema[key]]
    for key in _SCHEMA_MAP_KEYWORDS:
        if isinstance(schema.get(key), Mapping):
            out[key] = {name: _to_json_schema(child) for name, child in schema[key].items()}
    if schema.get("x-kubernetes-int-or-string") is True and not ("anyOf" in out or "oneOf" in out):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if schema.get("nullable") is True and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    if (
        "properties" in out
        and "additionalProperties" not in out
        and schema.get("x-kubernetes-preserve-unknown-fields") is not True
    ):
        out["additionalProperties"] = False
    return out


def _validator(schema: Mapping[str, Any]) -> Draft202012Validator:
    translated = _to_json_schema(schema)
    Draft202012Validator.check_schema(translated)
    return Draft202012Validator(translated)


@cache
def _fast_custom(group: str, kind: str, version: str) -> jsonschema_rs.Validator:
    """The same check as ``_custom_kinds()[(group, kind)][version]``, compiled."""
    schema = _custom_kinds()[(group, kind)][version].schema
    assert isinstance(schema, dict)  # built by _to_json_schema
    return jsonschema_rs.Draft202012Validator(schema)


@cache
def _custom_kinds() -> dict[tuple[str, str], dict[str, Draft202012Validator]]:
    """``(group, kind) -> {served version: validator}`` for the vendored CRDs, built once."""
    kinds: dict[tuple[str, str], dict[str, Draft202012Validator]] = {}
    for path in sorted(CRD_DIR.glob("*.yaml")):
        for crd in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if not isinstance(crd, dict) or crd.get("kind") != "CustomResourceDefinition":
                continue
            spec = crd["spec"]
            served = kinds.setdefault((spec["group"], spec["names"]["kind"]), {})
            for version in spec["versions"]:
                if version.get("served", True):
                    served[version["name"]] = _validator(version["schema"]["openAPIV3Schema"])
    return kinds


def _metadata_problems(metadata: object) -> list[Problem]:
    if not isinstance(metadata, Mapping):
        return [(("metadata",), "must be a mapping")]
    name = metadata.get("name")
    if not isinstance(name, str):
        return [(("metadata", "name"), "must be a string")]
    if len(name) > _DNS_SUBDOMAIN_MAX or not _DNS_SUBDOMAIN.fullmatch(name):
        return [
            (
                ("metadata", "name"),
                f"{name!r} is not a DNS-1123 subdomain (lowercase letters, digits, "
                f"'-' and '.', starting and ending with a letter or digit, at most "
                f"{_DNS_SUBDOMAIN_MAX} characters)",
            )
        ]
    return []


@cache
def _core_schema_file(name: str) -> dict[str, Any]:
    """A file of kubernetes_validate's strict schemas, read once (treat it as read-only)."""
    directory = f"kubernetes-json-schema/v{KUBERNETES_VERSION}-local-strict"
    found: dict[str, Any] = schema_contents(f"{directory}/{name}", KUBERNETES_VERSION)
    return found


@cache
def _core_validator(kind: str) -> Draft202012Validator:
    """kubernetes_validate's strict schema of a core ``v1`` kind, loaded once (its own
    ``validate`` re-reads the 4 MB definitions file on every call)."""
    schema = core_schema(kind)
    registry: Registry[Any] = Resource.from_contents(schema) @ Registry()
    registry = Resource.from_contents(_core_schema_file("_definitions.json")) @ registry
    return Draft202012Validator(schema, registry=registry)


@cache
def _fast_core(kind: str) -> jsonschema_rs.Validator:
    """The same check as :func:`_core_validator`, compiled."""
    definitions = _core_schema_file("_definitions.json")
    registry = jsonschema_rs.Registry([(definitions["$id"], definitions)])
    return jsonschema_rs.Draft202012Validator(core_schema(kind), registry=registry)


@cache
def core_schema(kind: str) -> dict[str, Any]:
    """The strict JSON schema of a core ``v1`` kind; its ``$ref``s go to :func:`core_ref`."""
    return _core_schema_file(f"{kind.lower()}-v1.json")


def core_ref(ref: str) -> Mapping[str, Any]:
    """The schema a core schema's ``$ref`` (``.../_definitions.json#/$defs/X``) points at."""
    definitions = _core_schema_file("_definitions.json")["$defs"]
    found: Mapping[str, Any] = definitions[ref.rpartition("/")[2]]
    return found


def custom_schema(api_version: str, kind: str) -> dict[str, Any] | None:
    """The JSON schema of a vendored CRD's kind at ``api_version``, if corral has it."""
    group, _, version = api_version.rpartition("/")
    validator = _custom_kinds().get((group, kind), {}).get(version)
    if validator is None or not isinstance(validator.schema, Mapping):
        return None
    return dict(validator.schema)


def _core_problems(obj: Mapping[str, Any]) -> list[Problem]:
    if _fast_core(str(obj["kind"])).is_valid(obj):
        return []
    try:
        _core_validator(str(obj["kind"])).validate(dict(obj))
    except ValidationError as error:
        return [(tuple(error.absolute_path), error.message)]
    return []


def _custom_problems(obj: Mapping[str, Any], kind: str, group: str, version: str) -> list[Problem]:
    served = _custom_kinds()[(group, kind)]
    validator = served.get(version)
    if validator is None:
        versions = ", ".join(f"{group}/{name}" for name in sorted(served))
        return [
            (("apiVersion",), f"{group}/{version} is not a served version of {kind} ({versions})")
        ]
    if _fast_custom(group, kind, version).is_valid(obj):
        return []
    found = [(tuple(error.absolute_path), error.message) for error in validator.iter_errors(obj)]
    return sorted(found, key=lambda problem: _problem(*problem))


def manifest_problem_paths(obj: Mapping[str, Any]) -> list[Problem]:
    """Everything the API server's schema check would reject in ``obj``, as (field path,
    message); empty when valid."""
    if not isinstance(obj, Mapping):
        return [((), f"a manifest must be a mapping, not {type(obj).__name__}")]
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return [((), "apiVersion and kind must both be strings")]
    group, _, version = api_version.rpartition("/")
    if not group and kind in CORE_KINDS:
        problems = _core_problems(obj)
    elif (group, kind) in _custom_kinds():
        problems = _custom_problems(obj, kind, group, version)
    else:
        return [((), f"no schema for {api_version} {kind}")]
    if any(path[:1] == ("metadata",) for path, _ in problems):
        return problems  # one report per field is enough
    return problems + _metadata_problems(obj.get("metadata"))


def manifest_problems(obj: Mapping[str, Any]) -> list[str]:
    """Everything the API server's schema check would reject in ``obj``; empty when valid."""
    return [_problem(path, message) for path, message in manifest_problem_paths(obj)]


def assert_valid_manifest(obj: Mapping[str, Any]) -> None:
    """Fail the test with every problem in ``obj``, one per line."""
    problems = manifest_problems(obj)
    if problems:
        listed = "\n".join(f"  - {problem}" for problem in problems)
        raise AssertionError(f"{obj.get('kind')} manifest is not valid:\n{listed}")
