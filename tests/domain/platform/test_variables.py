"""The variable table of a task and of a group, and rendering templates with it."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.domain.jinja.rendering import MissingVariableError, render_text
from corral.domain.platform.manifests import render_pod_template
from corral.domain.platform.template_merge import merge_templates
from corral.domain.platform.variables import (
    GroupIdentity,
    ResourceRequest,
    TaskIdentity,
    default_variables,
    group_variables,
    parse_set_values,
    resource_variables,
    submitted_by_label,
    task_variables,
)
from corral.errors import CorralError, UserError

DEFAULTS = {"USER_CPU": 1, "USER_GPU": 0, "USER_MEMORY": "1Gi", "USER_STORAGE": "10Gi"}
GROUP = GroupIdentity(
    workflow_id="train-3",
    workflow_uuid="a" * 32,
    group_name="trainers",
    group_uuid="b" * 32,
    submitted_by="jane.doe@example.com",
    pool="team-a",
    priority="HIGH",
)
TASK = TaskIdentity(name="Worker_0", uuid="c" * 32, platform="h100", retry_id=2, lead=True)


def test_user_values_override_the_defaults() -> None:
    variables = resource_variables(ResourceRequest(cpu=4, gpu=8, memory="64Gi"), DEFAULTS)
    assert (variables["USER_CPU"], variables["USER_GPU"], variables["USER_MEMORY"]) == (
        4,
        8,
        "64Gi",
    )
    assert variables["USER_STORAGE"] == "10Gi"


def test_explicit_zero_means_zero_not_the_default() -> None:
    variables = resource_variables(ResourceRequest(cpu=0, gpu=0), {**DEFAULTS, "USER_GPU": 4})
    assert (variables["USER_CPU"], variables["USER_GPU"]) == (0, 0)


def test_whole_cpu_counts_are_integers() -> None:
    assert resource_variables(ResourceRequest(cpu=2.0), {})["USER_CPU"] == 2
    assert resource_variables(ResourceRequest(cpu=0.5), {})["USER_CPU"] == 0.5


def test_derived_values_follow_the_default_when_the_user_gave_none() -> None:
    variables = resource_variables(ResourceRequest(memory="1536Mi"), DEFAULTS)
    assert {k: v for k, v in variables.items() if k.startswith("USER_MEMORY_")} == {
        "USER_MEMORY_VAL": "1536",
        "USER_MEMORY_UNIT": "Mi",
        "USER_MEMORY_Ti": 1536 / 2**20,
        "USER_MEMORY_Gi": 1.5,
        "USER_MEMORY_Mi": 1536,
        "USER_MEMORY_Ki": 1536 * 1024,
        "USER_MEMORY_B": 1536 * 2**20,
        "USER_MEMORY_m": 1536 * 2**20 * 1000,
    }
    # OSMO leaves these None when the storage comes from a default (defect 21).
    assert variables["USER_STORAGE_Gi"] == 10
    assert variables["USER_STORAGE_UNIT"] == "Gi"


def test_a_unitless_quantity_is_bytes() -> None:
    variables = resource_variables(ResourceRequest(memory="2048"), {})
    assert (variables["USER_MEMORY_UNIT"], variables["USER_MEMORY_Ki"]) == ("B", 2)


def test_no_value_and_no_default_leaves_the_variable_empty() -> None:
    variables = resource_variables(ResourceRequest(), {})
    assert "USER_GPU" not in variables
    assert variables["USER_MEMORY_Gi"] is None
    assert variables["USER_CACHE"] is None


@pytest.mark.parametrize(
    ("cache_size", "storage", "expected"),
    [
        (None, "10Gi", "9216Mi"),
        ("50%", "10Gi", "5120Mi"),
        ("100%", "1Gi", "1024Mi"),
        ("2Gi", "10Gi", "2Gi"),
        (None, "1000", "900"),
        ("50%", None, None),
    ],
)
def test_user_cache(cache_size: str | None, storage: str | None, expected: str | None) -> None:
    request = ResourceRequest(storage=storage, cache_size=cache_size)
    assert resource_variables(request, {})["USER_CACHE"] == expected


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (ResourceRequest(memory="lots"), "USER_MEMORY 'lots' is not a quantity"),
        (ResourceRequest(storage="1Gi", cache_size="101%"), "cacheSize '101%' is more than 100%"),
        (ResourceRequest(cache_size="big"), "cacheSize 'big' is not a quantity"),
    ],
)
def test_bad_quantities_are_user_errors(request_: ResourceRequest, message: str) -> None:
    with pytest.raises(UserError) as raised:
        resource_variables(request_, {})
    assert raised.value.message.startswith(message)


def test_excluded_nodes_become_an_array_token() -> None:
    variables = resource_variables(ResourceRequest(nodes_excluded=("n1", "n2")), {})
    assert variables["USER_EXCLUDED_NODES"] == "ARRAY:[n1,n2]"


def test_the_full_task_table() -> None:
    variables = task_variables(ResourceRequest(gpu=8), DEFAULTS, GROUP, TASK)
    assert {k: v for k, v in variables.items() if k.startswith("WF_")} == {
        "WF_ID": "train-3",
        "WF_UUID": "a" * 32,
        "WF_GROUP_NAME": "trainers",
        "WF_GROUP_UUID": "b" * 32,
        "WF_SUBMITTED_BY": "jane.doe",
        "WF_POOL": "team-a",
        "WF_PRIORITY": "high",
        "WF_TASK_NAME": "Worker_0",
        "WF_TASK_UUID": "c" * 32,
        "WF_RETRY_ID": "2",
        "WF_PLATFORM": "h100",
        "WF_LEAD_CONTAINER": "true",
    }
    assert variables["USER_CONTAINER_NAME"] == "worker-0"


def test_only_the_lead_task_has_wf_lead_container() -> None:
    follower = TaskIdentity(name="w1", uuid="d" * 32, platform="h100")
    assert "WF_LEAD_CONTAINER" not in task_variables(ResourceRequest(), {}, GROUP, follower)


def test_group_variables_include_the_defaults_but_nothing_per_task() -> None:
    variables = group_variables(GROUP, DEFAULTS)
    assert variables["USER_MEMORY"] == "1Gi"
    assert "WF_TASK_NAME" not in variables and "USER_CONTAINER_NAME" not in variables


@pytest.mark.parametrize(
    ("user", "label"),
    [("jane", "jane"), ("jane.doe@example.com", "jane.doe"), ("@@@", None), ("a" * 70, None)],
)
def test_submitted_by_is_a_valid_label_or_absent(user: str, label: str | None) -> None:
    assert submitted_by_label(user) == label


def test_platform_defaults_override_pool_defaults_and_nested_values_merge() -> None:
    pool = {"USER_CPU": 1, "EXTRA": {"a": 1, "b": 2}}
    platform = {"USER_CPU": 16, "EXTRA": {"b": 3}}
    assert default_variables(pool, platform) == {"USER_CPU": 16, "EXTRA": {"a": 1, "b": 3}}


def test_set_values_are_typed() -> None:
    assert parse_set_values(["USER_GPU=8", "USER_CPU=0.5", "NAME=a=b", "EMPTY="]) == {
        "USER_GPU": 8,
        "USER_CPU": 0.5,
        "NAME": "a=b",
        "EMPTY": "",
    }
    with pytest.raises(UserError) as raised:
        parse_set_values(["8"])
    assert raised.value.message == (
        "--set '8' must look like NAME=VALUE, NAME being a variable name (letters, digits, '_')"
    )


# ------------------------------------------------------------------------------ rendering

USER_TEMPLATE = {
    "spec": {
        "containers": [
            {
                "name": "{{USER_CONTAINER_NAME}}",
                "resources": {
                    "limits": {
                        "cpu": "{{USER_CPU}}",
                        "memory": "{{USER_MEMORY}}",
                        "nvidia.com/gpu": "{{USER_GPU}}",
                    }
                },
                "env": [{"name": "GPUS", "value": "{{USER_GPU}}"}],
                "args": ["--exclude", "{{USER_EXCLUDED_NODES}}"],
            }
        ],
        "terminationGracePeriodSeconds": "{{GRACE}}",
        "securityContext": {"supplementalGroups": [1000, "{{GROUP_ID}}"]},
        "hostNetwork": "{{ USER_GPU > 4 }}",
    }
}


def _render(template: dict[str, Any], variables: dict[str, Any]) -> dict[str, Any]:
    return render_pod_template(merge_templates([("default_user", template)]), variables)


def test_rendered_values_take_the_type_kubernetes_expects() -> None:
    request = ResourceRequest(cpu=4, gpu=8, nodes_excluded=("n1", "n2"))
    variables = {**task_variables(request, DEFAULTS, GROUP, TASK), "GRACE": "30", "GROUP_ID": 2000}
    spec = _render(USER_TEMPLATE, variables)["spec"]
    container = spec["containers"][0]
    assert container["name"] == "worker-0"
    assert container["resources"]["limits"] == {"cpu": 4, "memory": "1Gi", "nvidia.com/gpu": 8}
    assert container["env"] == [{"name": "GPUS", "value": "8"}]  # env values stay text
    assert container["args"] == ["--exclude", "n1", "n2"]  # ARRAY spliced into the list
    assert spec["terminationGracePeriodSeconds"] == 30
    assert spec["securityContext"]["supplementalGroups"] == [1000, 2000]
    assert spec["hostNetwork"] is True


def test_an_undefined_variable_names_itself_and_the_template() -> None:
    with pytest.raises(MissingVariableError) as raised:
        _render(USER_TEMPLATE, task_variables(ResourceRequest(), DEFAULTS, GROUP, TASK))
    assert raised.value.variable == "GRACE"
    assert raised.value.message == (
        "pod template default_user, field spec.terminationGracePeriodSeconds: variable "
        "GRACE has no value (it is undefined or null); give it one in the task's "
        "resources, with --set, or as a default variable of the pool or platform"
    )


def test_a_null_default_is_an_error_not_the_text_none() -> None:
    template = {
        "spec": {
            "containers": [
                {"name": "u", "resources": {"limits": {"nvidia.com/gpu": "{{USER_GPU}}"}}}
            ]
        }
    }
    variables = task_variables(ResourceRequest(), {"USER_GPU": None}, GROUP, TASK)
    with pytest.raises(MissingVariableError) as raised:
        _render(template, variables)
    assert raised.value.message == (
        'pod template default_user, field spec.containers[0].resources.limits["nvidia.com/gpu"]: '
        "variable USER_GPU has no value (it is undefined or null); give it one in the task's "
        "resources, with --set, or as a default variable of the pool or platform"
    )


def test_array_of_nothing_is_one_empty_string_as_in_osmo() -> None:
    template = {"spec": {"containers": [{"name": "u", "args": "{{USER_EXCLUDED_NODES}}"}]}}
    variables = task_variables(ResourceRequest(), {}, GROUP, TASK)
    assert _render(template, variables)["spec"]["containers"][0]["args"] == [""]


def test_keys_are_never_rendered() -> None:
    template = {"metadata": {"labels": {"{{WF_POOL}}": "{{WF_POOL}}"}}}
    assert _render(template, {"WF_POOL": "p"}) == {"metadata": {"labels": {"{{WF_POOL}}": "p"}}}


_jinja_bits = st.sampled_from(
    [
        "{{",
        "}}",
        "{%",
        "%}",
        "{{ X }}",
        "{{ Y * 3 }}",
        "{{ X / 0 }}",
        "{{ X ** 99999 }}",
        "{{ 'a' * 999999 }}",
        "{{ X.y }}",
        "{{ range(10**9) | list }}",
        "{{ ().__class__ }}",
        "{% for i in X %}{{ i }}{% endfor %}",
        "ARRAY:[",
        "]",
        "text",
        "{{ MISSING }}",
        "{# #}",
        "{{ X | int }}",
        "{{ Z }}",
        "{% if X > Y %}",
        "{% endif %}",
        "{{ X > Y }}",
    ]
)
_values = st.one_of(
    st.none(),
    st.integers(),
    st.floats(allow_nan=True),
    st.text(max_size=5),
    st.lists(st.integers(), max_size=3),
    st.booleans(),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_jinja_bits, max_size=6).map("".join), _values, _values, _values)
def test_rendering_raises_only_user_errors(text: str, x: Any, y: Any, z: Any) -> None:
    try:
        result = render_text(text, {"X": x, "Y": y, "Z": z}, where="fuzz")
    except CorralError:
        return
    assert isinstance(result, str)


def test_a_number_too_long_to_print_is_a_user_error() -> None:
    for text in ("{{X}}", "{{ X }}-suffix"):
        with pytest.raises(UserError) as raised:
            render_text(text, {"X": 10**5000}, where="w")
        assert raised.value.message.startswith(f"w: cannot render {text!r}: Exceeds the limit")
