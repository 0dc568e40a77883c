"""Fuzzing the config API with arbitrary JSON: every answer is 2xx or 4xx, never a 500."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corral.domain.configs.types import ConfigType
from tests.conftest import Api

FIELD_NAMES = [
    "backend",
    "platforms",
    "common_pod_template",
    "topology_keys",
    "resources",
    "gpu",
    "key",
    "label",
    "spec",
    "metadata",
    "name",
    "policies",
    "actions",
    "operator",
    "left_operand",
    "scheduler_settings",
    "scheduler_type",
    "default_platform",
    "default_exit_actions",
    "apiVersion",
    "kind",
    "$action",
    "$index",
    "max_num_tasks",
    "default_exec_timeout",
    "description",
]
values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(allow_nan=False, allow_infinity=False, width=16)
    | st.sampled_from(["default", "kai", "GT", "NE", "{{USER_CPU}}", "{{", "1d", "", "a/b"])
    | st.text(max_size=6),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(FIELD_NAMES) | st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=15,
)
segments = st.sampled_from([t.url_segment for t in ConfigType])


def _assert_not_500(status: int, body: Any) -> None:
    assert status < 500, body
    if status >= 400:
        assert set(body) >= {"message", "error_code"}


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    segment=segments,
    name=st.text(max_size=8).filter(lambda s: s not in (".", "..")),
    document=values,
    patch=values,
)
def test_config_writes_never_fail_with_500(
    api: Api, segment: str, name: str, document: Any, patch: Any
) -> None:
    _assert_not_500(*api.call("PUT", f"/api/configs/{segment}", json={"configs": document}))
    if name:
        name = quote(name, safe="")
        _assert_not_500(
            *api.call("PUT", f"/api/configs/{segment}/{name}", json={"configs": document})
        )
        _assert_not_500(
            *api.call("PATCH", f"/api/configs/{segment}/{name}", json={"configs_dict": patch})
        )
        _assert_not_500(*api.call("DELETE", f"/api/configs/{segment}/{name}"))
    _assert_not_500(*api.call("PATCH", f"/api/configs/{segment}", json={"configs_dict": patch}))
    _assert_not_500(*api.call("POST", "/api/configs/apply", json={"bundle": {"pools": document}}))


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=values)
def test_history_endpoints_never_fail_with_500(api: Api, body: Any) -> None:
    _assert_not_500(*api.call("POST", "/api/configs/history/rollback", json=body))
    _assert_not_500(*api.call("POST", "/api/configs/history/pool/revision/1/tags", json=body))
    _assert_not_500(*api.call("POST", "/api/configs/apply", json=body))
    _assert_not_500(
        *api.call(
            "PUT",
            "/api/configs/pool/p",
            json={
                "configs": {"backend": "default"},
                "description": body if isinstance(body, str) else "",
                "tags": [body] if isinstance(body, str) else [],
            },
        )
    )


_template_text = st.sampled_from(
    ["{{USER_CPU}}", "{{USER_GPU * 2}}", "{{ X }}", "{{ X / 0 }}", "ARRAY:[a,b]",
     "{{USER_EXCLUDED_NODES}}", "{{ USER_MEMORY_Gi }}", "{{ 'a' * 9 }}", "plain", "{{WF_POOL}}",
     "{% if USER_GPU > 1 %}x{% endif %}", "{{ X ** 2 }}", "{{ X.y }}", "{{ X | int }}"]
)  # fmt: skip
_template_values = st.recursive(
    _template_text | st.integers(-3, 3) | st.booleans() | st.none(),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "name",
                    "containers",
                    "resources",
                    "limits",
                    "cpu",
                    "args",
                    "env",
                    "value",
                    "nodeSelector",
                    "terminationGracePeriodSeconds",
                ]
            ),
            children,
            max_size=3,
        )
    ),
    max_leaves=10,
)
_set_values = st.lists(
    st.sampled_from(["USER_GPU=8", "USER_CPU=0.5", "USER_MEMORY=lots", "X=3", "X=0", "X=a",
                     "USER_GPU=x", "=", "bad", "USER_STORAGE=1e3", "X="]),
    max_size=3,
)  # fmt: skip


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(spec=_template_values, defaults=_template_values, set_values=_set_values)
def test_pool_render_never_fails_with_500(
    api: Api, spec: Any, defaults: Any, set_values: list[str]
) -> None:
    template = {"spec": spec if isinstance(spec, dict) else {"x": spec}}
    pool = {
        "backend": "default",
        "default_platform": "p",
        "common_pod_template": ["fuzz"],
        "common_default_variables": defaults if isinstance(defaults, dict) else {"X": defaults},
        "platforms": {"p": {}},
    }
    _assert_not_500(*api.call("PUT", "/api/configs/pod_template/fuzz", json={"configs": template}))
    _assert_not_500(*api.call("PUT", "/api/configs/pool/fuzz", json={"configs": pool}))
    status, body = api.call("GET", "/api/pool/fuzz/render", params={"set": set_values})
    _assert_not_500(status, body)
    _assert_not_500(*api.call("GET", "/api/configs/pool/fuzz", params={"verbose": "true"}))
