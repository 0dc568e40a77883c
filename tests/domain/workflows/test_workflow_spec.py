"""The workflow spec parser: OSMO's rules and messages, located at the offending line."""

from __future__ import annotations

import textwrap
from datetime import timedelta
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corral.domain.topology.podgroup import TopologyRequirement
from corral.domain.workflows.spec import ExitAction, ResourceSpec, TaskFile, TaskInput, WorkflowSpec
from corral.domain.workflows.spec_parser import parse_workflow_spec
from corral.domain.workflows.spec_reader import k8s_name
from corral.errors import UserError


def parse(text: str, **kwargs: Any) -> WorkflowSpec:
    return parse_workflow_spec(textwrap.dedent(text), **kwargs)


def error(text: str, **kwargs: Any) -> str:
    with pytest.raises(UserError) as caught:
        parse(text, **kwargs)
    return caught.value.message


TASK = "{name: t, image: ubuntu, command: [echo]}"

# (document, exact message) — every rejection the parser makes on OSMO's word.
REJECTIONS = [
    (
        "version: 2\n",
        "workflow.yaml:1:1: Workflow spec not found. Put the workflow under a top-level "
        '"workflow:" key.',
    ),
    (
        f"workflow: {{name: w, tasks: [{TASK}]}}\nresources: {{}}\n",
        'workflow.yaml:2:1: resources: Unknown top-level key "resources" found in the workflow '
        'spec. The top level may only hold "workflow", "version" and "default-values"; indent '
        'the key if it belongs under "workflow".',
    ),
    (
        f"version: 3\nworkflow: {{name: w, tasks: [{TASK}]}}\n",
        "workflow.yaml:1:1: version: Unsupported workflow version 3: this server reads version "
        '2; write "version: 2" or leave it out.',
    ),
    (
        f"version: '1'\nworkflow: {{name: w, tasks: [{TASK}]}}\n",
        "workflow.yaml:1:1: version: Unsupported workflow version '1': this server reads "
        'version 2; write "version: 2" or leave it out.',
    ),
    (
        f"version: true\nworkflow: {{name: w, tasks: [{TASK}]}}\n",
        "workflow.yaml:1:1: version: Unsupported workflow version True: this server reads "
        'version 2; write "version: 2" or leave it out.',
    ),
    (
        f"workflow:\n  name: 1bad\n  tasks: [{TASK}]\n",
        'workflow.yaml:2:3: workflow.name: Workflow name "1bad" is not valid: it must start with '
        'a letter, end with a letter or digit, and contain only letters, digits, "-" and "_".',
    ),
    (
        f"workflow:\n  name: {'w' * 65}\n  tasks: [{TASK}]\n",
        f'workflow.yaml:2:3: workflow.name: Workflow name "{"w" * 65}" is 65 characters long; '
        "the limit is 64.",
    ),
    (
        f"workflow:\n  name: w\n  labels: {{team: ''}}\n  tasks: [{TASK}]\n",
        'workflow.yaml:3:12: workflow.labels.team: label "team" has an empty value; give it a '
        "value.",
    ),
    (
        "workflow:\n  name: w\n  labels: {"
        + ", ".join(f"k{i}: v" for i in range(17))
        + f"}}\n  tasks: [{TASK}]\n",
        "workflow.yaml:3:3: workflow.labels: 17 labels given; at most 16 are allowed.",
    ),
    (
        f"workflow:\n  name: w\n  tasks: [{TASK}]\n  groups: [{{name: g, tasks: [{TASK}]}}]\n",
        "workflow.yaml:1:1: workflow: Cannot use both groups and tasks in the same workflow. "
        "Keep one of them.",
    ),
    (
        "workflow:\n  name: w\n",
        "workflow.yaml:1:1: workflow: Workflows need to have at least one group or one task. Add "
        'a "tasks:" list.',
    ),
    (
        "workflow:\n  name: w\n  tasks:\n  - {name: A_b, image: x, command: [a]}\n"
        "  - {name: a-B, image: x, command: [a]}\n",
        "workflow.yaml:5:6: workflow.tasks[1].name: Multiple tasks/groups have the same name: "
        '"a-B". Note that names are not case sensitive and we consider "-" and "_" the same (it '
        "clashes with the name at line 4); rename one of them.",
    ),
    (
        "workflow:\n  name: w\n  groups:\n  - name: shared\n    tasks:\n"
        "    - {name: shared, image: x, command: [a]}\n",
        "workflow.yaml:6:8: workflow.groups[0].tasks[0].name: Multiple tasks/groups have the "
        'same name: "shared". Note that names are not case sensitive and we consider "-" and "_" '
        "the same (it clashes with the name at line 4); rename one of them.",
    ),
    (
        "workflow:\n  name: w\n  tasks:\n  - {name: osmo_ctrl, image: x, command: [a]}\n",
        'workflow.yaml:4:6: workflow.tasks[0].name: Task name "osmo_ctrl" is reserved for '
        "OSMO's control container; choose another name.",
    ),
    (
        "workflow:\n  name: w\n  tasks:\n  - {name: t, image: x, command: []}\n",
        "workflow.yaml:4:25: workflow.tasks[0].command: Container t should have at least one "
        "command.",
    ),
    (
        "workflow:\n  name: w\n  tasks:\n  - {name: t, image: x}\n",
        "workflow.yaml:4:5: workflow.tasks[0]: Container t should have at least one command. "
        'Add "command:".',
    ),
    (
        "workflow:\n  name: w\n  tasks:\n  - {name: t, image: x, command: [a], args: [[1]]}\n",
        "workflow.yaml:4:46: workflow.tasks[0].args[0]: must be text or a number, not a list; "
        "quote the value if needed.",
    ),
    (
        "workflow:\n  name: w\n  tasks:\n  - name: t\n    image: x\n    command: [a]\n"
        "    credentials: {c: null}\n",
        "workflow.yaml:7:19: workflow.tasks[0].credentials.c: must be a mount directory (text) "
        "or a mapping ENV_VAR: credential_key, not null.",
    ),
    (
        "workflow:\n  name: w\n  tasks:\n  - name: t\n    image: x\n    command: [a]\n"
        "    colour: red\n",
        "workflow.yaml:7:5: workflow.tasks[0].colour: unknown field 'colour'; the fields here are "
        "name, image, command, args, lead, environment, credentials, inputs, outputs, files, "
        "volumeMounts, privileged, hostNetwork, resource, exitActions, checkpoint, "
        "downloadType, cacheSize, kpis, stopNotice, noticeSignal.",
    ),
    (
        "workflow:\n  name: w\n  tasks:\n  - name: t\n    image: x\n    command: [a]\n"
        "    inputs: [{task: t0, url: s3://b}]\n",
        'workflow.yaml:7:14: workflow.tasks[0].inputs[0]: an input needs exactly one of "task" '
        '(a task name, or <workflow_id>:<task>) and "url".',
    ),
    (
        "workflow:\n  name: w\n  tasks:\n  - name: t\n    image: x\n    command: [a]\n"
        "    outputs: [{url: s3://b, regex: '('}]\n",
        "workflow.yaml:7:29: workflow.tasks[0].outputs[0].regex: regex '(' does not compile: "
        "missing ), unterminated subpattern at position 0; fix the expression.",
    ),
    (
        "workflow:\n  name: w\n  tasks:\n  - name: t\n    image: x\n    command: [a]\n"
        "    files: [{path: /osmo/run.sh, contents: x}]\n",
        'workflow.yaml:7:14: workflow.tasks[0].files[0].path: file path "/osmo/run.sh" is inside '
        "/osmo, which is reserved; use another directory (only /osmo/data/output/... is allowed).",
    ),
    (
        "workflow:\n  name: w\n  tasks:\n  - name: t\n    image: x\n    command: [a]\n"
        "    files: [{path: //, contents: x}]\n",
        'workflow.yaml:7:14: workflow.tasks[0].files[0].path: file path "//" is empty; give the '
        "file's path in the container.",
    ),
    (
        "workflow:\n  name: w\n  tasks:\n  - name: t\n    image: x\n    command: [a]\n"
        "    files: [{path: /a, contents: x}, {path: /a, contents: y}]\n",
        'workflow.yaml:7:39: workflow.tasks[0].files[1].path: file path "/a" appears twice in '
        "this task; keep one.",
    ),
    (
        "workflow:\n  name: w\n  groups:\n  - name: g\n    tasks:\n"
        "    - {name: a, image: x, command: [a]}\n    - {name: b, image: x, command: [a]}\n",
        'workflow.yaml:5:5: workflow.groups[0].tasks: Group "g" has 0 leader(s) but must have '
        'exactly one. Set "lead: true" on exactly one of its tasks.',
    ),
    (
        "workflow:\n  name: w\n  groups:\n  - name: g\n    tasks:\n"
        "    - {name: a, image: x, command: [a], lead: true}\n"
        "    - {name: b, image: x, command: [a], lead: true}\n",
        'workflow.yaml:5:5: workflow.groups[0].tasks: Group "g" has 2 leader(s) but must have '
        'exactly one. Set "lead: true" on exactly one of its tasks.',
    ),
    (
        "workflow:\n  name: w\n  groups:\n  - name: g\n    tasks: []\n",
        'workflow.yaml:5:5: workflow.groups[0].tasks: Group "g" needs to have at least one '
        'task. Add a "tasks:" list to it.',
    ),
    (
        "workflow:\n  name: w\n  tasks:\n"
        "  - {name: a, image: x, command: [a], inputs: [{task: z}]}\n",
        "workflow.yaml:4:49: workflow.tasks[0].inputs[0].task: Task input z does not exist. "
        "Name a task of this workflow, or <workflow_id>:<task> for a task of an earlier workflow.",
    ),
    (
        "workflow:\n  name: w\n  tasks:\n"
        "  - {name: a, image: x, command: [a], inputs: [{task: b}]}\n"
        "  - {name: b, image: x, command: [a]}\n",
        'workflow.yaml:4:49: workflow.tasks[0].inputs[0].task: Group "a-group" requires input '
        'group "b-group" exists before itself. List task b before task a.',
    ),
    (
        "workflow:\n  name: w\n  groups:\n  - name: g1\n    tasks:\n"
        "    - {name: a, image: x, command: [a], inputs: [{task: b}]}\n"
        "  - name: g2\n    tasks:\n    - {name: b, image: x, command: [a]}\n",
        'workflow.yaml:6:51: workflow.groups[0].tasks[0].inputs[0].task: Group "g1" requires '
        'input group "g2" exists before itself. Declare group "g2" before group "g1".',
    ),
    (
        "workflow:\n  name: w\n  groups:\n  - name: g\n    tasks:\n"
        "    - {name: a, image: x, command: [a], lead: true}\n"
        "    - {name: b, image: x, command: [a], inputs: [{task: a}]}\n",
        'workflow.yaml:7:51: workflow.groups[0].tasks[1].inputs[0].task: Group "g" requires '
        'input group "g" exists before itself. A task cannot take a task of its own group as '
        "input; move a to an earlier group.",
    ),
    (
        f"workflow:\n  name: w\n  resources:\n    default: {{cpu: true}}\n  tasks: [{TASK}]\n",
        "workflow.yaml:4:15: workflow.resources.default.cpu: must be a whole number (0 or more), "
        "not a boolean (true).",
    ),
    (
        f"workflow:\n  name: w\n  resources:\n    default: {{gpu: 1.5}}\n  tasks: [{TASK}]\n",
        "workflow.yaml:4:15: workflow.resources.default.gpu: must be a whole number (0 or more), "
        "not a number (1.5).",
    ),
    (
        f"workflow:\n  name: w\n  resources:\n    default: {{storage: 10A}}\n  tasks: [{TASK}]\n",
        "workflow.yaml:4:15: workflow.resources.default.storage: Resource storage field has "
        "invalid unit: A. Use one of Ti, TiB, T, Gi, GiB, G, Mi, MiB, M, Ki, KiB, K, B, m (GB and "
        "MB are not accepted; write Gi or Mi).",
    ),
    (
        f"workflow:\n  name: w\n  resources:\n    default: {{memory: Gi}}\n  tasks: [{TASK}]\n",
        "workflow.yaml:4:15: workflow.resources.default.memory: Resource memory field has "
        "invalid value Gi. Write a number with an optional unit, e.g. 16Gi (units: Ti, TiB, T, "
        "Gi, GiB, G, Mi, MiB, M, Ki, KiB, K, B, m).",
    ),
    (
        f"workflow:\n  name: w\n  resources:\n    default: {{memory: 16GB}}\n  tasks: [{TASK}]\n",
        "workflow.yaml:4:15: workflow.resources.default.memory: Resource memory field has "
        "invalid unit: GB. Use one of Ti, TiB, T, Gi, GiB, G, Mi, MiB, M, Ki, KiB, K, B, m (GB and "
        "MB are not accepted; write Gi or Mi).",
    ),
    (
        "workflow:\n  name: w\n  resources:\n    default:\n      topology:\n"
        "      - {key: rack, requirementType: soft}\n"
        f"  tasks: [{TASK}]\n",
        "workflow.yaml:6:21: workflow.resources.default.topology[0].requirementType: "
        'requirementType must be "required" or "preferred", not text (\'soft\').',
    ),
    (
        f"workflow:\n  name: w\n  resources:\n    big: {{gpu: 8}}\n  tasks: [{TASK}]\n",
        "workflow.yaml:5:11: workflow.tasks[0]: Task t has no specified resource. Specify a "
        'default resource in the resources section (defined: big), or set "resource:" on the '
        "task.",
    ),
    (
        "workflow:\n  name: w\n  tasks:\n  - {name: t, image: x, command: [a], resource: huge}\n",
        "workflow.yaml:4:39: workflow.tasks[0].resource: Requesting undefined resource huge. "
        "Defined resources: default.",
    ),
    (
        f"workflow:\n  name: w\n  timeout: {{exec_timeout: 10h5m}}\n  tasks: [{TASK}]\n",
        "workflow.yaml:3:13: workflow.timeout.exec_timeout: Cannot recognize duration: 10h5m. "
        "Only support ISO 8601 (e.g. PT10S) or xd, xh, xm, xs, xms, xus.",
    ),
    (
        f"workflow:\n  name: w\n  timeout: {{queue_timeout: -5}}\n  tasks: [{TASK}]\n",
        "workflow.yaml:3:13: workflow.timeout.queue_timeout: a duration cannot be negative (-5).",
    ),
    (
        "workflow:\n  name: w\n  tasks:\n  - name: t\n    image: x\n    command: [a]\n"
        "    exitActions: {RESTART: '1'}\n",
        "workflow.yaml:7:19: workflow.tasks[0].exitActions.RESTART: Invalid exit action RESTART "
        "for task t. Valid actions are COMPLETE, FAIL, RESCHEDULE; RESTART does not exist, use "
        "RESCHEDULE.",
    ),
    (
        "workflow:\n  name: w\n  tasks:\n  - name: t\n    image: x\n    command: [a]\n"
        "    exitActions: {fail: '1-'}\n",
        "workflow.yaml:7:19: workflow.tasks[0].exitActions.fail: Invalid exit codes 1- for "
        "action fail for task t. Write codes and inclusive ranges separated by commas, e.g. "
        '"0,1-10,16".',
    ),
    (
        "workflow:\n  name: w\n  tasks:\n  - name: t\n    image: x\n    command: [a]\n"
        "    exitActions: {fail: '9-3'}\n",
        "workflow.yaml:7:19: workflow.tasks[0].exitActions.fail: exit code range 9-3 is "
        "reversed; write 3-9.",
    ),
    (
        "workflow:\n  name: w\n  tasks:\n  - name: t\n    image: x\n    command: [a]\n"
        "    resources: {cpu: 1}\n",
        'workflow.yaml:7:5: workflow.tasks[0].resources: tasks have no "resources" field: define '
        'the resources under workflow.resources and name the entry with "resource: <name>".',
    ),
    (
        "workflow:\n  name: w\n  tasks:\n  - name: t\n    image: x\n    command: [a]\n"
        "    downloadType: mount\n",
        'workflow.yaml:7:5: workflow.tasks[0].downloadType: downloadType must be "download" or '
        "left out.",
    ),
    (
        "workflow:\n  name: w\n  tasks:\n  - name: t\n    image: x\n    command: [a]\n"
        "    stopNotice: -5\n",
        "workflow.yaml:7:5: workflow.tasks[0].stopNotice: a duration cannot be negative (-5).",
    ),
    (
        "workflow:\n  name: w\n  tasks:\n  - name: t\n    image: x\n    command: [a]\n"
        "    stopNotice: soon\n",
        "workflow.yaml:7:5: workflow.tasks[0].stopNotice: Cannot recognize duration: soon. Only "
        "support ISO 8601 (e.g. PT10S) or xd, xh, xm, xs, xms, xus.",
    ),
    (
        "workflow:\n  name: w\n  tasks:\n  - name: t\n    image: x\n    command: [a]\n"
        "    cacheSize: 120%\n",
        "workflow.yaml:7:5: workflow.tasks[0].cacheSize: cacheSize 120% is more than 100%; give "
        "0% to 100% or a size.",
    ),
    (
        "workflow:\n  name: w\n  tasks:\n  - name: t\n    image: x\n  command: [a]\n",
        "workflow.yaml:6:3: workflow.command: unknown field 'command'; the fields here are name, "
        "pool, labels, tasks, groups, resources, timeout, backend.",
    ),
    (
        "workflow: [\n",
        "workflow.yaml:2:1: invalid YAML: expected the node content, but found '<stream end>'; "
        "the text ends inside a [ or {; close it",
    ),
    (
        f"workflow: {{name: w, tasks: [{TASK}], name: v}}\n",
        'workflow.yaml:1:73: invalid YAML: key "name" appears twice in the same mapping',
    ),
]


@pytest.mark.parametrize(("document", "message"), REJECTIONS)
def test_rejections_name_line_field_and_reason(document: str, message: str) -> None:
    assert error(document) == message


def test_rendered_positions_are_flagged() -> None:
    assert error("workflow:\n  name: w\n", rendered=True).startswith(
        "workflow.yaml:1:1: workflow (in the rendered workflow): Workflows need"
    )
    assert error("workflow: [\n", rendered=True, source="f.yaml") == (
        "f.yaml:2:1: (in the rendered workflow) invalid YAML: expected the node content, but "
        "found '<stream end>'; the text ends inside a [ or {; close it"
    )


def test_tasks_only_workflow_makes_one_group_per_task() -> None:
    spec = parse(
        """
        version: 2
        workflow:
          name: w
          tasks:
          - {name: prep, image: ubuntu, command: [sh], args: [1, true, 2.5]}
          - name: train
            image: pytorch
            command: [python]
            environment: {A: 42, B: true, C: text}
            credentials: {ngc: /mnt/ngc, s3: {AWS_KEY: key, PORT: 80}}
            inputs: [{task: prep}, {url: "s3://b/x", regex: ".*\\\\.bin"}, {task: "wf-1:old"}]
            outputs: [{url: "s3://b/out"}]
            files:
            - {path: /osmo/data/output/a.txt, contents: hi}
            - {path: run.sh, contents: aGk=, base64: true}
            volumeMounts: [/data, "/a:/b"]
            checkpoint: [{path: /ckpt, url: "s3://c", frequency: 30s}]
            kpis: [{index: loss, path: /k.json}]
            downloadType: download
            cacheSize: 50%
        """
    )
    assert [g.name for g in spec.groups] == ["prep-group", "train-group"]
    assert all(g.tasks[0].lead for g in spec.groups)
    assert spec.groups[1].upstream == ("prep-group",)
    assert not spec.uses_groups
    prep, train = spec.tasks()
    assert prep.args == ("1", "True", "2.5")
    assert train.environment == {"A": "42", "B": "True", "C": "text"}
    assert train.credentials == {"ngc": "/mnt/ngc", "s3": {"AWS_KEY": "key", "PORT": "80"}}
    assert train.inputs == (
        TaskInput(task="prep"),
        TaskInput(url="s3://b/x", regex=".*\\.bin"),
        TaskInput(task="wf-1:old"),
    )
    assert train.files[1] == TaskFile("run.sh", "aGk=", base64=True)
    assert train.volume_mounts == ("/data", "/a:/b")
    assert train.cache_size == "50%"
    assert set(train.extra) == {"checkpoint", "kpis", "downloadType"}
    assert spec.resources == {"default": ResourceSpec()}
    assert spec.resource_of(train) == ResourceSpec()


def test_groups_with_upstream_in_declaration_order() -> None:
    spec = parse(
        """
        workflow:
          name: w
          groups:
          - name: a
            tasks: [{name: a1, image: x, command: [c]}]
          - name: b
            barrier: false
            ignoreNonleadStatus: false
            tasks: [{name: b1, image: x, command: [c]}]
          - name: c
            tasks:
            - {name: c1, image: x, command: [c], lead: true, inputs: [{task: b1}]}
            - {name: c2, image: x, command: [c], inputs: [{task: a1}, {task: b1}]}
        """
    )
    assert spec.uses_groups
    assert [g.upstream for g in spec.groups] == [(), (), ("a", "b")]
    assert (spec.groups[1].barrier, spec.groups[1].ignore_non_lead_status) == (False, False)
    assert [t.lead for t in spec.groups[2].tasks] == [True, False]


def test_resources_timeouts_labels_and_exit_actions() -> None:
    spec = parse(
        """
        version: "2"
        workflow:
          name: w
          labels: {team: vision, example.com/cost: "42"}
          timeout: {exec_timeout: 8h, queue_timeout: PT1H30M}
          resources:
            default: {cpu: 0, gpu: 8, memory: 64Gi, storage: "1024", platform: dgx}
            small:
              cpu: 2
              nodesExcluded: [n1, n2]
              topology:
              - {key: zone}
              - {key: rack, group: r1, requirementType: preferred}
          tasks:
          - name: t
            image: x
            command: [a]
            resource: small
            exitActions: {complete: "0", Reschedule: "3000-3006,137", FAIL: 1-255}
        """
    )
    assert spec.labels == {"team": "vision", "example.com/cost": "42"}
    assert spec.timeout.exec_timeout == timedelta(hours=8)
    assert spec.timeout.queue_timeout == timedelta(hours=1, minutes=30)
    assert spec.resources["default"] == ResourceSpec(  # an explicit 0 is zero (issue 13)
        cpu=0, gpu=8, memory="64Gi", storage="1024", platform="dgx"
    )
    small = spec.resource_of(spec.tasks()[0])
    assert small.nodes_excluded == ("n1", "n2")
    assert small.topology == (
        TopologyRequirement("zone"),
        TopologyRequirement("rack", group="r1", required=False),
    )
    assert spec.tasks()[0].exit_actions == (
        ExitAction("COMPLETE", ((0, 0),)),
        ExitAction("RESCHEDULE", ((3000, 3006), (137, 137))),
        ExitAction("FAIL", ((1, 255),)),
    )


@pytest.mark.parametrize("seconds", [90, 1.5])
def test_timeouts_in_seconds(seconds: float) -> None:
    spec = parse(f"workflow: {{name: w, timeout: {{exec_timeout: {seconds}}}, tasks: [{TASK}]}}")
    assert spec.timeout.exec_timeout == timedelta(seconds=seconds)


@pytest.mark.parametrize("version", ["2", "'2'", "2.0"])
def test_accepted_versions(version: str) -> None:
    assert parse(f"version: {version}\nworkflow: {{name: w, tasks: [{TASK}]}}").name == "w"


def test_default_values_left_in_the_document_are_ignored() -> None:
    assert parse(f"default-values: {{a: 1}}\nworkflow: {{name: w, tasks: [{TASK}]}}").name == "w"


# ---------------------------------------------------------------------------------- fuzz

KEYS = [
    "workflow", "name", "tasks", "groups", "image", "command", "lead", "inputs", "task", "url",
    "resources", "default", "cpu", "memory", "timeout", "exec_timeout", "version",
    "exitActions", "FAIL", "files", "path", "contents", "labels", "args", "resource",
]  # fmt: skip
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 10**12), st.floats(allow_nan=True),
    st.sampled_from(["a", "t1", "t2", "g", "8h", "16Gi", "10A", "0,1-5", "/osmo/x", "(", "2",
                     "default", "A_b", "a-B", "osmo-ctrl", "{{output}}", ""]),
    st.text(max_size=8),
)  # fmt: skip
TREES = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.sampled_from(KEYS), children, max_size=5),
    ),
    max_leaves=30,
)


def _task(name: str, extra: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "image": "x", "command": ["c"], **extra}


TASK_EXTRAS = st.dictionaries(
    st.sampled_from(["lead", "inputs", "resource", "args", "exitActions", "files"]),
    TREES,
    max_size=2,
)
PLAUSIBLE = st.builds(
    lambda names, extras, grouped, sizes, resources: {
        "workflow": {
            "name": "w",
            **({"resources": resources} if resources is not None else {}),
            **(
                {
                    "groups": [
                        {
                            "name": f"g{i}",
                            "tasks": [
                                _task(n, e)
                                for n, e in zip(names[i::sizes], extras[i::sizes], strict=False)
                            ],
                        }
                        for i in range(sizes)
                    ]
                }
                if grouped
                else {"tasks": [_task(n, e) for n, e in zip(names, extras, strict=False)]}
            ),
        }
    },
    st.lists(
        st.sampled_from(["a", "b", "c", "d", "A", "b_x"]), min_size=1, max_size=5, unique=True
    ),
    st.lists(TASK_EXTRAS, min_size=5, max_size=5),
    st.booleans(),
    st.integers(1, 3),
    st.one_of(st.none(), TREES),
)


def _check_invariants(spec: WorkflowSpec) -> None:
    names = [k8s_name(t.name) for t in spec.tasks()]
    assert len(set(names)) == len(names)
    index = {group.name: i for i, group in enumerate(spec.groups)}
    for position, group in enumerate(spec.groups):
        assert sum(task.lead for task in group.tasks) == 1
        assert all(index[up] < position for up in group.upstream)
        for task in group.tasks:
            assert task.resource in spec.resources


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(PLAUSIBLE)
def test_fuzz_plausible_documents(document: dict[str, Any]) -> None:
    text = yaml.safe_dump(document, sort_keys=False)
    try:
        spec = parse_workflow_spec(text)
    except UserError as err:
        assert err.message.startswith("workflow.yaml:")
        return
    _check_invariants(spec)


@settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.one_of(TREES.map(lambda tree: yaml.safe_dump({"workflow": tree})), st.text(max_size=200)))
def test_fuzz_random_text(text: str) -> None:
    try:
        spec = parse_workflow_spec(text)
    except UserError as err:
        assert err.message.startswith("workflow.yaml:")
        return
    _check_invariants(spec)
