"""The worked examples of docs/templates.md are true: every ``merge-example`` and
``render-example`` block is run against the template engine, and the variables table names
every variable a pod template can see."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from corral.domain.platform.manifests import render_pod_template
from corral.domain.platform.template_merge import merge_templates
from corral.domain.platform.variables import (
    GroupIdentity,
    ResourceRequest,
    TaskIdentity,
    resource_variables,
    task_variables,
)
from corral.errors import UserError
from tests.conftest import REPO

PAGE = REPO / "docs" / "templates.md"
TEXT = PAGE.read_text()
BLOCK = re.compile(r"^```json (merge-example|render-example)\n(.*?)\n```$", re.S | re.M)
REQUEST_KEYS = {"cpu", "gpu", "memory", "storage"}


def examples(kind: str) -> list[tuple[int, dict[str, Any]]]:
    """``(line, example)`` for every block of ``kind``, in page order."""
    found = []
    for match in BLOCK.finditer(TEXT):
        if match[1] == kind:
            line = TEXT.count("\n", 0, match.start()) + 1
            found.append((line, json.loads(match[2])))
    return found


MERGE_EXAMPLES = examples("merge-example")
RENDER_EXAMPLES = examples("render-example")


def test_the_page_has_examples_for_every_rule() -> None:
    # one per merge rule (8) plus the order example; render: defaults, gpu 0, null, undefined,
    # expressions, ARRAY, typed rendering
    assert len(MERGE_EXAMPLES) >= 9
    assert len(RENDER_EXAMPLES) >= 7
    blocks = TEXT.count("```json merge-example") + TEXT.count("```json render-example")
    assert blocks == len(MERGE_EXAMPLES) + len(RENDER_EXAMPLES), "a block is malformed"


@pytest.mark.parametrize(
    "example", [e for _, e in MERGE_EXAMPLES], ids=[f"line{n}" for n, _ in MERGE_EXAMPLES]
)
def test_merge_example(example: dict[str, Any]) -> None:
    assert set(example) == {"templates", "merged"}
    templates = [(str(name), template) for name, template in example["templates"]]
    assert merge_templates(templates).value == example["merged"]


@pytest.mark.parametrize(
    "example", [e for _, e in RENDER_EXAMPLES], ids=[f"line{n}" for n, _ in RENDER_EXAMPLES]
)
def test_render_example(example: dict[str, Any]) -> None:
    assert {"template", "request", "defaults"} <= set(example)
    assert len(set(example) & {"rendered", "error"}) == 1
    assert set(example["request"]) <= REQUEST_KEYS
    variables = resource_variables(ResourceRequest(**example["request"]), example["defaults"])
    merged = merge_templates([("example", example["template"])])
    if "error" in example:
        with pytest.raises(UserError) as raised:
            render_pod_template(merged, variables)
        assert raised.value.message == example["error"]
    else:
        assert render_pod_template(merged, variables) == example["rendered"]


def test_every_pod_template_variable_is_documented() -> None:
    group = GroupIdentity(
        workflow_id="wf-1",
        workflow_uuid="u1",
        group_name="g",
        group_uuid="u2",
        submitted_by="ana",
        pool="p",
    )
    task = TaskIdentity(name="t", uuid="u3", platform="x", lead=True)
    request = ResourceRequest(cpu=1, gpu=1, memory="1Gi", storage="1Gi")
    names = set(task_variables(request, {}, group, task))
    table = TEXT[TEXT.index("### Every variable of a pod template") :]
    table = table[: table.index("\n\n", table.index("| variable |"))]
    missing = sorted(name for name in names if f"`{name}`" not in table)
    assert not missing, f"not in the variables table of {PAGE.name}: {missing}"
