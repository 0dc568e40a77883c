"""OSMO's own client code as the contract: its CLI's folder (``../shared/osmo-cli``), and its
response models and parsers loaded from there (never copied into corral) under the package
name ``osmo_lib``."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import REPO

#: Where OSMO's CLI lies: CORRAL_OSMO_CLI, else beside this repository, else the workplace's.
CANDIDATES = (os.environ.get("CORRAL_OSMO_CLI", ""), str(REPO.parent / "shared" / "osmo-cli"))


def osmo_cli_folder() -> Path:
    """OSMO's CLI folder, or a skip that says how to get it (a failure once ./scripts/test
    found it: then it must be used)."""
    for candidate in (*CANDIDATES, "/work/shared/osmo-cli"):
        if candidate and (Path(candidate) / "src" / "lib" / "__init__.py").is_file():
            return Path(candidate)
    reason = "OSMO's CLI not found: set CORRAL_OSMO_CLI to its folder (../shared/osmo-cli)"
    if os.environ.get("CORRAL_REQUIRE_OSMO_CLI"):
        pytest.fail(reason)
    pytest.skip(reason)


def osmo_module(name: str) -> ModuleType:
    """``src/lib/<name>`` of OSMO's CLI, e.g. ``api.profile`` or ``utils.version``."""
    if "osmo_lib" not in sys.modules:
        lib = osmo_cli_folder() / "src" / "lib"
        spec = importlib.util.spec_from_file_location(
            "osmo_lib", lib / "__init__.py", submodule_search_locations=[str(lib)]
        )
        assert spec is not None and spec.loader is not None
        package = importlib.util.module_from_spec(spec)
        sys.modules["osmo_lib"] = package
        spec.loader.exec_module(package)
    return importlib.import_module(f"osmo_lib.{name}")
