"""Fuzzing the submission pipeline through the HTTP API: generated workflow specs, and generated
pool configs under a fixed workflow. Every answer is a 200 whose objects are schema-valid, or a
4xx with a message; never a 500. (2,000+ examples per run: 1,500 specs, 500 configs.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from corral.api.app import create_app
from corral.files import read_bundle_directory
from corral.services.runtime import open_runtime
from tests.conftest import REPO, Api
from tests.k8s_schemas import manifest_problems

POOLS = ["nvl72", "heterogeneous_pool", "default", "my-pool", "robotics-training", "nope"]
PLATFORMS = [None, "gb200", "l40s_platform", "a100_platform", "h100-platform", "x"]
KEYS = ["gpu-clique", "rack", "spine", "zone", "row"]
NAMES = ["a", "main", "model-1", "shard-2", "w0", "w1", "w2", "w3", "w4", "w5"]
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-2, 20)
    | st.sampled_from(
        ["", "1Gi", "16Gi", "10A", "Gi", "0.5", "{{output}}", "{{workflow_id}}", "{{host:a}}"]
    )
)


@pytest.fixture
def sqlite_api(tmp_path: Path) -> Iterator[Api]:
    """The example configs on SQLite (the pipeline is the same on both databases; the
    PostgreSQL run is covered by the other API tests)."""
    runtime = open_runtime(f"sqlite:///{tmp_path / 'fuzz.db'}")
    token = runtime.tokens.create(name="fuzz", username="admin", roles=["osmo-admin"])
    client = TestClient(create_app(runtime), raise_server_exceptions=False)
    api = Api(client, token, runtime)
    bundle, _ = read_bundle_directory(REPO / "examples" / "configs")
    assert api.call("POST", "/api/configs/apply", json={"bundle": bundle})[0] == 200
    yield api
    runtime.engine.dispose()


# Generation must be cheap (thousands of examples per run): fields are drawn as (key, value)
# pairs from fixed menus of valid and invalid values, not built from nested strategies.
TOPOLOGY_ENTRIES = [
    {"key": key, **extra}
    for key in KEYS
    for extra in (
        {},
        {"group": "g1"},
        {"group": "g2", "requirementType": "preferred"},
        {"group": "a-b"},
    )
]
RESOURCE_FIELDS = [
    *(("cpu", value) for value in (0, 2, 16, 200)),
    *(("gpu", value) for value in (0, 1, 4, 8)),
    *(("memory", value) for value in ("1Gi", "300Gi", "2000Gi", "1.5Gi")),
    *(("storage", value) for value in ("1Gi", "50Gi", "5Ti")),
    *(("platform", value) for value in PLATFORMS),
    ("nodesExcluded", ["cpu-0", "l40s-1"]),
    ("nodesExcluded", ["zz"]),
]
TASK_FIELDS = [
    ("args", ["{{output}}", 1]),
    *(("resource", value) for value in ("default", "r1", "r2", "default")),
    ("environment", {"A": "{{workflow_id}}", "B_1": 2}),
    ("environment", {"WORLD": "{{host:a}}"}),
    ("files", [{"path": "/run.sh", "contents": "echo {{output}}"}]),
    ("inputs", [{"task": "a"}]),
    ("exitActions", {"COMPLETE": "0", "fail": "1-10,255"}),
    ("exitActions", {"COMPLETE": "0-3", "RESCHEDULE": "137"}),
]
#: One of these breaks an otherwise plausible spec (a third of the examples).
BREAKAGES: list[tuple[str, Any]] = [
    ("task", {"command": []}),
    ("task", {"lead": "yes"}),
    ("task", {"name": "osmo-ctrl"}),
    ("task", {"name": "x" * 70}),
    ("task", {"name": "Shard_2"}),
    ("task", {"exitActions": {"RESTART": "x"}}),
    ("task", {"credentials": {"c": "/creds"}}),
    ("task", {"colour": "red"}),
    ("task", {"environment": {"bad key": True}}),
    ("task", {"volumeMounts": ["/a:/b", "/x:/y:/z"]}),
    ("task", {"files": [{"path": "/osmo/z", "contents": 3}, {"path": "x/y", "contents": ""}]}),
    ("task", {"inputs": [{"task": "nope"}]}),
    ("task", {"privileged": True}),
    ("task", {"volumeMounts": ["/data"]}),
    ("task", {"hostNetwork": True}),
    ("task", {"resource": "missing"}),
    ("resource", {"cpu": -1}),
    ("resource", {"gpu": "2"}),
    ("resource", {"memory": "10A"}),
    ("resource", {"storage": "x"}),
    ("resource", {"topology": [{"key": "rack", "requirementType": "maybe"}]}),
    ("resource", {"topology": [{"key": "rack"}, {"key": "rack", "group": "g"}]}),
    ("workflow", {"labels": {"-x": None}}),
    ("workflow", {"timeout": {"exec_timeout": "10h5m"}}),
    ("workflow", {"timeout": {"queue_timeout": -1}}),
    ("workflow", {"name": ""}),
    ("workflow", {"tasks": [], "groups": []}),
    ("document", {"version": 3}),
    ("document", {"resources": {}}),
    ("task", {"image": ""}),
]


@st.composite
def resource(draw: st.DrawFn) -> dict[str, Any]:
    found: dict[str, Any] = dict(draw(st.lists(st.sampled_from(RESOURCE_FIELDS), max_size=3)))
    if draw(st.booleans()):
        found["topology"] = draw(st.lists(st.sampled_from(TOPOLOGY_ENTRIES), max_size=2))
    return found


@st.composite
def task(draw: st.DrawFn, name: str) -> dict[str, Any]:
    found: dict[str, Any] = {
        "name": name,
        "image": draw(st.sampled_from(["busybox", "nvcr.io/nvidia/pytorch:25.01-py3"])),
        "command": draw(st.sampled_from([["sh", "-c", "echo {{output}}"], ["true"]])),
    }
    found.update(draw(st.lists(st.sampled_from(TASK_FIELDS), max_size=2)))
    return found


@st.composite
def workflow_specs(draw: st.DrawFn) -> dict[str, Any]:
    """A plausible spec (unique names, known fields), broken in one place a third of the time."""
    names = draw(st.lists(st.sampled_from(NAMES), min_size=2, max_size=6, unique=True))
    tasks = [draw(task(name)) for name in names[1:]]
    body: dict[str, Any] = {"name": "wf"}
    if draw(st.booleans()):
        specs = st.dictionaries(st.sampled_from(["default", "r1", "r2"]), resource(), max_size=3)
        body["resources"] = draw(specs)
    if draw(st.booleans()):
        body["tasks"] = tasks
    else:
        split = draw(st.integers(1, len(tasks)))
        body["groups"] = [{"name": names[0], "tasks": tasks[:split]}]
        tasks[0]["lead"] = True
        if tasks[split:]:
            body["groups"].append({"name": f"{names[0]}-2", "tasks": tasks[split:]})
            tasks[split]["lead"] = True
    if draw(st.booleans()):
        body["timeout"] = draw(st.sampled_from([{"exec_timeout": "1h"}, {"queue_timeout": 60}]))
    document: dict[str, Any] = {"workflow": body}
    if draw(st.integers(0, 2)) == 0:
        where, change = draw(st.sampled_from(BREAKAGES))
        targets = {"task": tasks[0], "workflow": body, "document": document}
        if where == "resource":
            targets[where] = body.setdefault("resources", {}).setdefault("default", {})
        targets[where].update(change)
    return document


def mangle(text: str, cut: int, junk: str) -> str:
    """Damage the YAML a little: cut it somewhere and insert junk."""
    cut = cut % (len(text) + 1)
    return text[:cut] + junk + text[cut:]


def assert_sane(status: int, body: Any) -> None:
    event(f"HTTP {status}")  # --hypothesis-show-statistics: how many examples reach the end
    assert status < 500, body
    if status >= 400:
        assert isinstance(body["message"], str) and body["message"]
        assert body["error_code"] in ("USER", "NOT_FOUND", "FORBIDDEN", "CONFLICT")
        return
    for group in body["groups"]:
        for manifest in group["manifests"]:
            assert manifest_problems(manifest) == [], manifest


def submit(api: Api, pool: str, text: str, *sets: str) -> tuple[int, Any]:
    return api.call(
        "POST",
        f"/api/pool/{pool}/workflow",
        params={"dry_run": "true"},
        json={"file": text, "set_variables": list(sets)},
    )


@settings(
    max_examples=1200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(pool=st.sampled_from(POOLS), document=workflow_specs())
def test_generated_specs_never_cause_a_500(sqlite_api: Api, pool: str, document: Any) -> None:
    assert_sane(*submit(sqlite_api, pool, yaml.safe_dump(document, sort_keys=False)))


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    document=workflow_specs(),
    cut=st.integers(0, 10_000),
    junk=st.sampled_from(["{", "]", ": :", "\t", "\n  - x", "{{", "{% if %}", "---\n", "&a *a"]),
)
def test_damaged_specs_never_cause_a_500(
    sqlite_api: Api, document: Any, cut: int, junk: str
) -> None:
    text = mangle(yaml.safe_dump(document, sort_keys=False), cut, junk)
    assert_sane(*submit(sqlite_api, "nvl72", text))


POD_TEMPLATE_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 300)
    | st.sampled_from(
        [
            "{{USER_GPU}}",
            "{{USER_CPU}}",
            "{{ WF_GROUP_UUID }}",
            "{{nope}}",
            "{{",
            "ARRAY:[a,b]",
            "{{USER_EXCLUDED_NODES}}",
            "1Gi",
            "busybox",
            "osmo-ctrl",
            "{{USER_CONTAINER_NAME}}",
        ]
    ),
    lambda children: (
        st.lists(children, max_size=2)
        | st.dictionaries(
            st.sampled_from(
                [
                    "spec",
                    "containers",
                    "name",
                    "image",
                    "resources",
                    "limits",
                    "cpu",
                    "nodeSelector",
                    "tolerations",
                    "metadata",
                    "labels",
                    "env",
                    "value",
                ]
            ),
            children,
            max_size=3,
        )
    ),
    max_leaves=12,
)
RULE = st.fixed_dictionaries(
    {
        "operator": st.sampled_from(["GT", "GE", "LT", "LE", "EQ", "NE"]),
        "left_operand": st.sampled_from(
            ["{{USER_GPU}}", "{{USER_MEMORY}}", "{{K8_CPU}}", "4", "x"]
        ),
        "right_operand": st.sampled_from(["{{K8_GPU}}", "{{K8_MEMORY}} * 0.5", "0", "10Gi", "{{"]),
        "assert_message": st.sampled_from(["no", "{{USER_GPU}} too many", "{{ oops"]),
    }
)


@settings(
    max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    template=POD_TEMPLATE_VALUES,
    group_template=POD_TEMPLATE_VALUES,
    defaults=st.dictionaries(
        st.sampled_from(["USER_CPU", "USER_GPU", "USER_MEMORY", "USER_STORAGE", "X"]),
        st.sampled_from([1, 4, 0, -1, "1Gi", "300Gi", "x", None]),
        max_size=3,
    ),
    rules=st.lists(RULE, max_size=2),
    example=st.sampled_from(
        ["nvl72-single-rack.yaml", "compute-domain.yaml", "nvl72-one-zone.yaml"]
    ),
)
def test_generated_pool_configs_never_cause_a_500(
    sqlite_api: Api,
    template: Any,
    group_template: Any,
    defaults: dict[str, Any],
    rules: list[dict[str, Any]],
    example: str,
) -> None:
    bundle = {
        "pod_templates": {"fuzzed": template},
        "group_templates": {
            "fuzzed-group": {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "cm-{{WF_GROUP_UUID}}"},
                "data": group_template,
            }
        },
        "resource_validations": {"fuzzed": rules},
    }
    status, body = sqlite_api.call("POST", "/api/configs/apply", json={"bundle": bundle})
    assert status < 500, body
    patch = {
        "common_pod_template": ["default_ctrl", "default_user", "use-compute-domain", "fuzzed"],
        "common_group_templates": ["compute-domain", "fuzzed-group"],
        "common_default_variables": defaults,
        "common_resource_validations": ["default_gpu", "fuzzed"],
    }
    status, body = sqlite_api.call("PATCH", "/api/configs/pool/nvl72", json={"configs_dict": patch})
    assert status < 500, body
    text = (REPO / "examples" / "workflows" / example).read_text()
    assert_sane(*submit(sqlite_api, "nvl72", text))
