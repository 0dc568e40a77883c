"""Field types come from the real Kubernetes schemas, and rendered text becomes the value the
API server expects only when the schema says so."""

from __future__ import annotations

import importlib.util
import json
from importlib.resources import files
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corral.domain.schemas.field_types import FieldType, coerce, expected_type

REPO = Path(__file__).resolve().parents[3]
GENERATOR = REPO / "scripts" / "generate_field_types.py"
POD = ("v1", "Pod")
COMPUTE_DOMAIN = ("resource.nvidia.com/v1beta1", "ComputeDomain")
PODGROUP = ("scheduling.run.ai/v2alpha2", "PodGroup")


def _load_generator(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("generate_field_types", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generator() -> ModuleType:
    return _load_generator(GENERATOR)


def test_shipped_json_is_up_to_date_with_the_schemas(generator: ModuleType) -> None:
    shipped = (
        files("corral.domain.schemas").joinpath("field_types.json").read_text(encoding="utf-8")
    )
    assert shipped == generator.render(generator.build()), (
        "field_types.json is stale: run .venv/bin/python scripts/generate_field_types.py"
    )


def test_generator_check_mode_fails_on_a_stale_file(
    generator: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stale = tmp_path / "field_types.json"
    stale.write_text("{}\n", encoding="utf-8")
    monkeypatch.setattr(generator, "OUTPUT", stale)
    monkeypatch.setattr(generator, "ROOT", tmp_path)
    assert generator.main(["--check"]) == 1
    assert generator.main([]) == 0
    assert generator.main(["--check"]) == 0


def test_generated_table_covers_every_vendored_crd_and_stays_small(generator: ModuleType) -> None:
    table = generator.build()
    assert set(table["kinds"]) == {
        "v1/Pod",
        "resource.nvidia.com/v1beta1/ComputeDomain",
        "scheduling.run.ai/v2alpha2/PodGroup",
        "scheduling.run.ai/v2/Queue",
        "kai.scheduler/v1alpha1/Topology",
    }
    assert table["source"]["kubernetes"].startswith("1.")
    assert sum(len(fields) for fields in table["kinds"].values()) < 1000
    # status is written by the server, never rendered
    assert not any(path.startswith("status.") for path in table["kinds"]["v1/Pod"])


def test_generator_stops_at_recursive_refs(generator: ModuleType) -> None:
    definitions = {
        "$defs": {
            "Props": {
                "properties": {
                    "maxLength": {"type": "integer"},
                    "items": {"$ref": "#/$defs/Props"},
                }
            }
        }
    }
    found = dict(generator.walk({"$ref": "#/$defs/Props"}, generator.Resolver(definitions)))
    assert found == {"maxLength": "integer"}


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": ["integer", "null"], "format": "int64"}, "integer"),
        ({"type": "number"}, "number"),
        ({"type": "boolean"}, "boolean"),
        ({"type": "string"}, None),
        ({"type": "object"}, None),
        ({"x-kubernetes-int-or-string": True}, "int-or-string"),
        ({"type": "string", "format": "int-or-string"}, "int-or-string"),
        ({"anyOf": [{"type": "integer"}, {"type": "string"}]}, "int-or-string"),
        ({"oneOf": [{"type": ["string", "null"]}, {"type": ["number", "null"]}]}, "int-or-string"),
    ],
)
def test_generator_classifies_scalar_schemas(
    generator: ModuleType, schema: dict[str, Any], expected: str | None
) -> None:
    assert generator.scalar_type(schema) == expected


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (["spec", "terminationGracePeriodSeconds"], "integer"),
        (["spec", "containers", 0, "ports", 1, "containerPort"], "integer"),
        (["spec", "containers", 0, "resources", "limits", "cpu"], "int-or-string"),
        (["spec", "containers", 2, "resources", "requests", "nvidia.com/gpu"], "int-or-string"),
        (["spec", "containers", 0, "securityContext", "privileged"], "boolean"),
        (["spec", "securityContext", "runAsUser"], "integer"),
        (["spec", "securityContext", "supplementalGroups", 0], "integer"),
        (["spec", "hostNetwork"], "boolean"),
        (["spec", "volumes", 0, "emptyDir", "sizeLimit"], "int-or-string"),
        (["spec", "containers", 0, "livenessProbe", "httpGet", "port"], "int-or-string"),
        (["spec", "containers", 0, "image"], None),
        (["spec", "containers", 0, "env", 0, "value"], None),
        (["metadata", "labels", "app"], None),
        (["spec", "containers", 0], None),
        (["spec", "noSuchField"], None),
        (["spec", "terminationGracePeriodSeconds", "deeper"], None),
        (["spec", 0], None),  # a list index never matches a named field
    ],
)
def test_pod_field_types(path: list[str | int], expected: FieldType | None) -> None:
    assert expected_type(*POD, path) == expected


def test_crd_field_types() -> None:
    assert expected_type(*COMPUTE_DOMAIN, ["spec", "numNodes"]) == "integer"
    assert expected_type(*COMPUTE_DOMAIN, ["spec", "channel", "allocationMode"]) is None
    assert expected_type(*PODGROUP, ["spec", "subGroups", 3, "minMember"]) == "integer"
    assert expected_type(*PODGROUP, ["spec", "markUnschedulable"]) == "boolean"
    assert expected_type("scheduling.run.ai/v2", "Queue", ["spec", "priority"]) == "integer"


def test_unknown_kinds_and_versions_have_no_types() -> None:
    path = ["spec", "terminationGracePeriodSeconds"]
    assert expected_type("v1", "Widget", path) is None
    assert expected_type("v2", "Pod", path) is None
    assert expected_type("apps/v1", "Deployment", ["spec", "replicas"]) is None


def test_json_is_sorted_and_uses_only_known_types() -> None:
    text = files("corral.domain.schemas").joinpath("field_types.json").read_text(encoding="utf-8")
    table = json.loads(text)
    for fields in table["kinds"].values():
        assert list(fields) == sorted(fields)
        assert set(fields.values()) <= {"integer", "number", "boolean", "int-or-string"}


@pytest.mark.parametrize(
    ("text", "expected", "value"),
    [
        ("30", "integer", 30),
        (" 30\n", "integer", 30),
        ("-1", "integer", -1),
        ("+7", "integer", 7),
        ("007", "integer", 7),
        ("1.5", "integer", "1.5"),
        ("thirty", "integer", "thirty"),
        ("", "integer", ""),
        ("1_000", "integer", "1_000"),
        ("\u0663", "integer", "\u0663"),  # an Arabic-Indic digit: not what Kubernetes means
        ("9" * 5000, "integer", "9" * 5000),  # beyond int()'s digit limit: left as text
        ("8080", "int-or-string", 8080),
        ("http", "int-or-string", "http"),
        ("500m", "int-or-string", "500m"),
        ("0.5", "int-or-string", "0.5"),
        ("1Gi", "int-or-string", "1Gi"),
        ("2", "number", 2),
        ("1.5", "number", 1.5),
        ("-.5", "number", -0.5),
        ("1e3", "number", "1e3"),
        ("nan", "number", "nan"),
        ("9" * 400 + ".0", "number", "9" * 400 + ".0"),  # would overflow to inf
        ("true", "boolean", True),
        ("False", "boolean", False),
        (" TRUE ", "boolean", True),
        ("yes", "boolean", "yes"),
        ("1", "boolean", "1"),
        ("30", None, "30"),
        ("true", None, "true"),
    ],
)
def test_coerce(text: str, expected: FieldType | None, value: object) -> None:
    result = coerce(text, expected)
    assert result == value
    assert type(result) is type(value)


FIELD_TYPES = st.sampled_from(["integer", "number", "boolean", "int-or-string", None])


@given(st.text(), FIELD_TYPES)
def test_coerce_never_raises_and_returns_text_or_a_scalar(
    text: str, expected: FieldType | None
) -> None:
    result = coerce(text, expected)
    assert result == text or type(result) in (int, float, bool)
    if expected is None:
        assert result is text


@given(st.integers(), st.sampled_from(["integer", "int-or-string", "number"]))
def test_coerce_round_trips_rendered_integers(number: int, expected: FieldType) -> None:
    assert coerce(str(number), expected) == number
