"""Test helper: the pipeline's own manifest schema check (``corral.domain.manifest_schemas``)."""

from corral.domain.manifest_schemas import (
    _validator,
    assert_valid_manifest,
    format_path,
    manifest_problems,
)

__all__ = ["_validator", "assert_valid_manifest", "format_path", "manifest_problems"]
