"""The example configs load, and their copies of the built-in defaults do not drift."""

from __future__ import annotations

import json

from corral.domain.configs.bundles import parse_bundle
from corral.domain.configs.defaults import initial_bundle
from corral.domain.configs.types import ConfigType
from corral.errors import UserError
from corral.files import read_bundle_directory, read_document
from tests.conftest import REPO

EXAMPLES = REPO / "examples" / "configs"


#: The one deliberate difference: the demo runs the default backend's tasks as local processes
#: (a laptop), a new server simulates them (docs/configs/backend.md#execution).
DEMO_ONLY = {("BACKEND", "default"): ("description", "execution")}


def test_examples_repeat_the_built_in_defaults_exactly() -> None:
    builtin = parse_bundle(initial_bundle())
    bundle, _ = read_bundle_directory(EXAMPLES)
    examples = parse_bundle(bundle)
    for ctype, items in builtin.items.items():
        for name, item in items.items():
            example = examples.items[ctype][name]
            if (ctype.value, name) in DEMO_ONLY:
                overrides = {f: item[f] for f in DEMO_ONLY[ctype.value, name]}
                example = {**example, **overrides}
            assert example == item, (ctype, name)
    assert examples.workflow == builtin.workflow
    assert examples.items[ConfigType.BACKEND]["default"]["execution"]["mode"] == "local_processes"
    assert builtin.items[ConfigType.BACKEND]["default"]["execution"]["mode"] == "simulate"


def test_seed_a100_template_reports_file_line_and_column() -> None:
    """Seed 001's a100 template closes its tolerations list with '}' instead of ']'."""
    path = EXAMPLES / "negative" / "a100_pod_template.json"
    text = path.read_text()
    lines = text.splitlines()
    # The offending brace: the first line after the toleration object that is a bare '}'.
    toleration_end = next(i for i, line in enumerate(lines) if '"effect"' in line) + 1
    bad_line = toleration_end + 2  # 1-based line of the '}' that should be ']'
    bad_column = lines[bad_line - 1].index("}") + 1
    opened_line = next(i for i, line in enumerate(lines) if '"tolerations"' in line) + 1
    opened_column = lines[opened_line - 1].index("[") + 1
    try:
        read_document(path)
    except UserError as err:
        assert err.message == (
            f"{path}:{bad_line}:{bad_column}: invalid JSON: Expecting ',' delimiter (found '}}' "
            f"but the list opened at line {opened_line}, column {opened_column} must be closed "
            "with ']' first)"
        )
    else:
        raise AssertionError("the broken seed template parsed")


NEGATIVE = {
    "robotics-training-missing-default-platform.json": (
        "pools.robotics-training.default_platform: Default platform h100-platform not in "
        "platforms (gb200-platform)"
    ),
    "role-singular-keys.json": (
        "roles.osmo-team.policies.0.action: unknown field 'action' (did you mean 'actions'?); "
        "the fields here are effect, actions, resources."
    ),
    "override_resource_validations.json": (
        "pools.simulation-pool.platforms.l40s_platform.override_resource_validations: unknown "
        "field 'override_resource_validations' (did you mean 'resource_validations'?); the "
        "fields here are description, host_network_allowed, privileged_allowed, allowed_mounts, "
        "default_variables, resource_validations, override_pod_template."
    ),
}


def test_negative_examples_are_rejected_with_their_documented_errors() -> None:
    readme = (EXAMPLES / "negative" / "README.md").read_text()
    for name, expected in NEGATIVE.items():
        document = json.loads((EXAMPLES / "negative" / name).read_text())
        bundle = document if set(document) <= {"pools", "roles"} else {"pools": document}
        try:
            parse_bundle(bundle)
        except UserError as err:
            assert err.to_dict()["message"] == expected
        else:
            raise AssertionError(f"{name} was accepted")
        assert name in readme
