"""The JSON examples in docs/configs/ are valid configs, identical to examples/configs/."""

from __future__ import annotations

import json
import re

import pytest

from corral.domain.bundles import parse_bundle
from corral.domain.config_types import ConfigType, parse_items, parse_singleton
from corral.files import read_bundle_directory
from tests.conftest import REPO

DOCS = REPO / "docs" / "configs"
JSON_BLOCK = re.compile(r"```json\n(.*?)\n```", re.S)


@pytest.mark.parametrize("ctype", list(ConfigType), ids=lambda t: t.url_segment)
def test_config_page_examples_are_valid_and_match_the_examples(ctype: ConfigType) -> None:
    blocks = JSON_BLOCK.findall((DOCS / f"{ctype.url_segment}.md").read_text())
    assert blocks, f"docs/configs/{ctype.url_segment}.md has no JSON example"
    examples = parse_bundle(read_bundle_directory(REPO / "examples" / "configs")[0])
    for block in blocks:
        document = json.loads(block)
        if ctype is ConfigType.WORKFLOW:
            assert parse_singleton(ctype, document) == examples.workflow
            continue
        items, _ = parse_items(ctype, document)
        for name, item in items.items():
            assert examples.items[ctype][name] == item, name
