"""Workflow templating: sections, variables, token shielding, in-process rendering, tokens."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corral.domain.workflows.spec import TaskFile, TaskFileContents, TaskInput, TaskSpec
from corral.domain.workflows.spec_parser import parse_workflow_spec
from corral.domain.workflows.template import (
    parse_set_values,
    render_workflow,
    substitute_tokens,
)
from corral.errors import UserError


def render(text: str, **kwargs: Any) -> Any:
    return render_workflow(textwrap.dedent(text).lstrip(), **kwargs)


def render_error(text: str, **kwargs: Any) -> str:
    with pytest.raises(UserError) as caught:
        render(text, **kwargs)
    return caught.value.message


REJECTIONS = [
    (
        "version: 2\n",
        "workflow.yaml:1:1: Workflow spec not found. Put the workflow under a top-level "
        '"workflow:" key (at column 0).',
    ),
    (
        "workflow:\n  name: w\nresources:\n  default: {}\n",
        'workflow.yaml:3:1: Unknown top-level key "resources" found in the workflow spec. The '
        'top level may only hold "workflow", "default-values" and "version"; indent the key if '
        'it belongs under "workflow".',
    ),
    (
        "workflow:\n  name: w\nworkflow:\n  name: v\n",
        'workflow.yaml:3:1: Duplicate top-level key "workflow" found in the workflow spec (first '
        "at line 1); keep one of them.",
    ),
    (
        "default-values:\n  a: 1\nworkflow:\n  name: w\n  image: {{ b }}\n",
        'workflow.yaml:5:13: variable "b" is undefined; give it a value with --set b=VALUE, or '
        "under default-values: in the workflow file.",
    ),
    (
        "workflow:\n  name: {% if %}\n",
        "workflow.yaml:2:1: Jinja syntax error: Expected an expression, got 'end of statement "
        "block'; fix the template.",
    ),
    (
        "workflow:\n  name: {{ ''.__class__ }}\n",
        "workflow.yaml:2:1: Jinja Template Error: access to attribute '__class__' of 'str' object "
        "is unsafe; fix the template.",
    ),
    (
        "workflow:\n  name: {{ 1 // 0 }}\n",
        "workflow.yaml:2:1: Jinja substitution failure: ZeroDivisionError: integer division or "
        "modulo by zero; fix the template.",
    ),
    (
        "default-values: [1]\nworkflow:\n  name: w\n",
        "workflow.yaml: default-values must be a mapping of variable names to values.",
    ),
    (
        "default-values:\n  a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n"
        "  b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
        "  c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
        "  d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
        "  e: [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nworkflow:\n  name: w\n",
        # refused by the document reader before any value is built (docs/workflows.md#limits)
        "workflow.yaml:6:35: its aliases (*name) make the document more than 10 times larger "
        "than it is written; repeat the values instead of aliasing them",
    ),
]


@pytest.mark.parametrize(("document", "message"), REJECTIONS)
def test_rejections(document: str, message: str) -> None:
    assert render_error(document) == message


@pytest.mark.parametrize(
    ("option", "item", "message"),
    [
        (
            "set_values",
            "gpus",
            "Data gpus is incorrectly formatted: write --set NAME=VALUE (e.g. --set gpus=8).",
        ),
        (
            "set_strings",
            "=x",
            "Data =x is incorrectly formatted: write --set-string NAME=VALUE "
            "(e.g. --set-string gpus=8).",
        ),
    ],
)
def test_set_without_equals(option: str, item: str, message: str) -> None:
    assert render_error("workflow:\n  name: w\n", **{option: [item]}) == message


def test_set_values_are_coerced_and_split_on_the_first_equals() -> None:
    assert parse_set_values(["a=1", "b=1.5", "c=x", "expr=a=b", "e="], as_string=False) == {
        "a": 1, "b": 1.5, "c": "x", "expr": "a=b", "e": "",
    }  # fmt: skip
    assert parse_set_values(["a=1"], as_string=True) == {"a": "1"}


def test_variable_precedence() -> None:
    rendered = render(
        """
        default-values:
          a: default
          b: default
          c: default
        workflow:
          name: "{{ a }}-{{ b }}-{{ c }}"
        """,
        set_values=["b=2", "c=3"],
        set_strings=["c=s"],
    )
    assert rendered.variables == {"a": "default", "b": 2, "c": "s"}
    assert 'name: "default-2-s"' in rendered.text
    assert rendered.templated


def test_plain_file_skips_jinja_and_keeps_line_numbers() -> None:
    text = "default-values:\n  x: 1\nversion: 2\nworkflow:\n  name: w\n  command: ['{{output}}']\n"
    rendered = render_workflow(text)
    assert not rendered.templated
    assert rendered.text == "\n\nversion: 2\nworkflow:\n  name: w\n  command: ['{{output}}']\n"


def test_for_loop_generates_tasks_with_the_first_as_lead() -> None:
    rendered = render(
        """
        default-values:
          n: 2
        workflow:
          name: w
          groups:
          - name: g
            tasks:
        {% for i in range(n) %}
            - name: worker{{ i }}
              image: ubuntu
              command:
              - "echo {{output}} {{ workflow_id }} {{host:worker0}} {{ input:0 }} {{uuid}}"
              lead: {{ i == 0 }}
        {% endfor %}
        """,
        set_values=["n=3"],
    )
    spec = parse_workflow_spec(rendered.text, rendered=rendered.templated)
    tasks = spec.tasks()
    assert [t.name for t in tasks] == ["worker0", "worker1", "worker2"]
    assert [t.lead for t in tasks] == [True, False, False]
    assert tasks[0].command[0] == (
        "echo {{output}} {{ workflow_id }} {{host:worker0}} {{ input:0 }} {{uuid}}"
    )


def test_rendered_errors_are_flagged() -> None:
    rendered = render("workflow:\n  name: {{ 'bad name' }}\n")
    with pytest.raises(UserError) as caught:
        parse_workflow_spec(rendered.text, rendered=rendered.templated)
    assert caught.value.message.startswith(
        'workflow.yaml:2:3: workflow.name (in the rendered workflow): Workflow name "bad name"'
    )


def test_a_custom_renderer_is_used() -> None:
    calls: list[str] = []

    def renderer(text: str, variables: Any) -> str:
        calls.append(text)
        return text.replace("{{ x }}", "w")

    assert "name: w" in render("workflow:\n  name: {{ x }}\n", renderer=renderer).text
    assert len(calls) == 1


# ---------------------------------------------------------------------------- substitution

TASK = TaskSpec(
    name="train",
    image="x",
    command=("run", "{{workflow_id}}", "{{ output }}/model"),
    args=("--in={{input:0}}", "--prev={{input:prep}}", "--old={{input:old}}", "{{uuid}}"),
    environment={"MASTER": "{{host:master}}", "PLAIN": "x"},
    inputs=(TaskInput(task="prep"), TaskInput(url="s3://b"), TaskInput(task="wf-1:old")),
    files=(TaskFile("/run.sh", "cd {{output}} && echo {{ workflow_id }}"),),
)


def test_substitute_tokens() -> None:
    task = substitute_tokens(TASK, workflow_id="wf-7", hosts={"master": "m.svc"}, task_uuid="u1")
    assert task.command == ("run", "wf-7", "/osmo/data/output/model")
    assert task.args == (
        "--in=/osmo/data/input/0", "--prev=/osmo/data/input/0", "--old=/osmo/data/input/2", "u1",
    )  # fmt: skip
    assert task.environment == {"MASTER": "m.svc", "PLAIN": "x"}
    assert task.files[0].contents == "cd /osmo/data/output && echo wf-7"
    kept = substitute_tokens(TASK, workflow_id="wf-7", hosts={"master": "m"})
    assert kept.args[3] == "{{uuid}}"


@pytest.mark.parametrize(
    ("task", "hosts", "message"),
    [
        (
            TaskSpec(name="t", image="x", command=("{{host:other}}",)),
            {"a": "h", "t": "h2"},
            "Task t: {{host:other}} names no task of its group; {{host:<task>}} can address the "
            "tasks of the same group only: a, t.",
        ),
        (
            TaskSpec(
                name="t", image="x", command=("{{input:3}}",), inputs=(TaskInput(url="s3://x"),)
            ),
            {},
            "Task t: {{input:3}} names no input of the task; its inputs are: 0 (s3://x). Use "
            "{{input:<index>}} or {{input:<task>}}.",
        ),
    ],
)
def test_substitution_errors(task: TaskSpec, hosts: dict[str, str], message: str) -> None:
    with pytest.raises(UserError) as caught:
        substitute_tokens(task, workflow_id="w", hosts=hosts)
    assert caught.value.message == message


# -------------------------------------------------------------------------------- fuzz

LINES = st.sampled_from([
    "workflow:", "default-values:", "version: 2", "resources:", "  name: w", "  tasks:",
    "  - {name: t, image: x, command: [a]}", "  a: 1", "{% for i in range(2) %}", "{% endfor %}",
    "  - name: t{{ i }}", "{{ a }}", "{{output}}", "{{ host:x }}", "{% if %}", "  x: [", "",
])  # fmt: skip


@settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.lists(st.one_of(LINES, st.text(max_size=20)), max_size=12),
    st.lists(st.text(max_size=6), max_size=2),
)
def test_fuzz_only_user_errors_escape(lines: list[str], sets: list[str]) -> None:
    try:
        rendered = render_workflow("\n".join(lines), set_values=sets)
        parse_workflow_spec(rendered.text, rendered=rendered.templated)
    except UserError:
        pass


# ------------------------------------------------------------------------------- docs

DOCS = Path(__file__).resolve().parents[3] / "docs" / "workflows.md"
YAML_BLOCK = re.compile(r"```yaml\n(.*?)```", re.S)
LOCALPATH = re.compile(r"localpath: (\S+)")


def test_docs_examples_render_and_parse() -> None:
    blocks = [b for b in YAML_BLOCK.findall(DOCS.read_text()) if re.search(r"^workflow:", b, re.M)]
    assert len(blocks) >= 5
    for block in blocks:
        rendered = render_workflow(block, source="docs/workflows.md")
        # what the CLI would read for each localpath (docs/workflows.md#local-files)
        local = {path: TaskFileContents(f"# {path}\n") for path in LOCALPATH.findall(block)}
        spec = parse_workflow_spec(rendered.text, rendered=rendered.templated, local_files=local)
        assert spec.tasks()
        for path in local:
            assert f"# {path}\n" in [f.contents for t in spec.tasks() for f in t.files]
