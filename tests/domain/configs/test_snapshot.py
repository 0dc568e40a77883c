"""The typed config snapshot: the stored JSON as given, each item's model built once."""

from __future__ import annotations

import pickle
import threading

import pytest

from corral.domain.configs.backend_models import Backend
from corral.domain.configs.defaults import initial_bundle
from corral.domain.configs.models import Pool, ResourceRule
from corral.domain.configs.snapshot import Configs
from corral.domain.configs.types import ConfigType
from corral.errors import NotFoundError, UserError

POOL = {
    "backend": "default",
    "default_platform": "gpu",
    "topology_keys": [{"key": "rack", "label": "topology.kubernetes.io/rack"}],
    "platforms": {"gpu": {"description": "GPUs"}},
}
RULE = {
    "operator": "LE",
    "left_operand": "{{USER_GPU}}",
    "right_operand": "8",
    "assert_message": "m",
}
STATE = {
    ConfigType.POOL: {"p": POOL},
    ConfigType.RESOURCE_VALIDATION: {"gpus": [RULE]},
    ConfigType.BACKEND: {"k": {"k8s_namespace": "team"}},
    ConfigType.ROLE: {"r": {"policies": [{"actions": ["pool:List"]}]}},
    ConfigType.WORKFLOW: {"max_num_tasks": 7},
}


def test_the_mapping_is_the_stored_json_and_the_views_are_its_models() -> None:
    configs = Configs(STATE)
    assert dict(configs) == STATE
    assert configs[ConfigType.POOL]["p"] is POOL
    assert configs.pool("p") == Pool.model_validate(POOL)
    assert configs.pool("p").topology_keys[0].label == "topology.kubernetes.io/rack"
    assert configs.pools() == {"p": configs.pool("p")}
    assert configs.rules("gpus") == (ResourceRule.model_validate(RULE),)
    assert configs.backend("k").k8s_namespace == "team"
    assert configs.backend_names() == ["k"]
    assert [role.name for role in configs.roles] == ["r"]
    assert configs.workflow.max_num_tasks == 7
    assert configs.workflow.max_retry_per_task == 0  # the model's default


def test_each_model_is_built_once() -> None:
    configs = Configs(STATE)
    assert configs.pool("p") is configs.pool("p")
    assert configs.rules("gpus") is configs.rules("gpus")
    assert configs.workflow is configs.workflow
    assert configs.roles is configs.roles


def test_missing_items() -> None:
    configs = Configs(STATE)
    with pytest.raises(NotFoundError, match=r"^Pool nope not found\.$"):
        configs.pool("nope")
    assert configs.find_pool("nope") is None
    with pytest.raises(UserError, match=r"^Resource validation nope does not exist!$"):
        configs.rules("nope")
    # An unconfigured backend is the embedded cluster with the defaults.
    assert configs.backend("embedded") == Backend()
    empty = Configs({})
    assert (empty.pool_names(), empty.roles, empty.workflow.max_num_tasks) == ([], (), 100)


def test_the_initial_configuration_reads_as_models() -> None:
    bundle = initial_bundle()
    configs = Configs(
        {
            ConfigType.POOL: bundle["pools"],
            ConfigType.BACKEND: bundle["backends"],
            ConfigType.ROLE: bundle["roles"],
        }
    )
    assert set(configs.pools()) == set(bundle["pools"])
    assert {role.name for role in configs.roles} == set(bundle["roles"])


def test_a_pickled_snapshot_keeps_its_models_and_can_be_pickled_while_read() -> None:
    pools = {f"p{index}": POOL for index in range(300)}
    configs = Configs({**STATE, ConfigType.POOL: pools})
    configs.pool("p0")
    copy = pickle.loads(pickle.dumps(configs))
    assert dict(copy) == dict(configs)
    assert copy.pool("p0") == configs.pool("p0")
    assert copy.pool("p1") == Pool.model_validate(POOL)
    errors: list[BaseException] = []

    def read_every_pool() -> None:
        try:
            configs.pools()
        except BaseException as err:  # a race would show here or in the pickling below
            errors.append(err)

    readers = [threading.Thread(target=read_every_pool) for _ in range(4)]
    for reader in readers:
        reader.start()
    for _ in range(50):
        pickle.dumps(configs)
    for reader in readers:
        reader.join()
    assert errors == []
    assert configs.pools() == pickle.loads(pickle.dumps(configs)).pools()
