"""The JSON examples in docs/configs/ are valid configs, identical to examples/configs/."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from corral.domain.configs.bundles import parse_bundle
from corral.domain.configs.types import ConfigType, parse_items, parse_singleton
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


LINK = re.compile(r"\]\(([^)\s]+)\)")
CODE_BLOCK = re.compile(r"```.*?```", re.S)


def heading_anchors(page: Path) -> set[str]:
    """GitHub's anchors for the headings of ``page``."""
    found = set()
    for line in page.read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return found


def test_every_relative_link_in_the_docs_resolves() -> None:
    broken = []
    for page in sorted((REPO / "docs").rglob("*.md")):
        text = CODE_BLOCK.sub("", page.read_text())
        for link in LINK.findall(text):
            if link.startswith(("http://", "https://", "mailto:")):
                continue
            path, _, anchor = link.partition("#")
            target = (page.parent / path).resolve() if path else page
            if not target.exists():
                broken.append(f"{page.relative_to(REPO)}: {link} (no such file)")
            elif anchor and target.suffix == ".md" and anchor not in heading_anchors(target):
                broken.append(f"{page.relative_to(REPO)}: {link} (no such heading)")
    assert broken == []


#: How a comment would point at material outside the repository: OSMO's research notes, the
#: seed documents, their section numbers and defect numbers, KAI's section labels.
OUTSIDE = re.compile(
    r"osmo-(?:topology|workflow|config)\.md|\bseed \d{3}\b|§\s*\d|[Dd]efect \d+"
    r"|\b(?:KAI )?[AB]\d+ step\b|\([AB]\d+(?:\.\d+)?\)|\b[AB]\d+(?:-[AB]?\d+)? fixed\b"
)


def test_no_source_comment_points_outside_the_repository() -> None:
    """Comments cite docs/ (docs/osmo-reference.md keeps what corral follows of OSMO and KAI)."""
    found = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for path in sorted((REPO / "src").rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert found == []
