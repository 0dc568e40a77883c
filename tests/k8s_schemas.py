"""Test helper: the pipeline's own manifest schema check (``corral.domain.schemas.objects``)."""

from corral.domain.schemas.objects import (
    _validator,
    assert_valid_manifest,
    format_path,
    manifest_problems,
)

__all__ = ["_validator", "assert_valid_manifest", "format_path", "manifest_problems"]
