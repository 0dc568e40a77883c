"""The error outputs documented in examples/configs/negative/README.md are what the CLI prints."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.conftest import REPO, LiveServer

NEGATIVE = REPO / "examples" / "configs" / "negative"
DOCUMENTED = re.compile(r"`corral (config [^`]+)` fails with:\n\n```\n(.*?)\n```", re.S)


def test_documented_negative_examples(live_server: LiveServer) -> None:
    documented = DOCUMENTED.findall((NEGATIVE / "README.md").read_text())
    assert len(documented) == 4
    for command, expected in documented:
        result = subprocess.run(
            [sys.executable, "-m", "corral", *command.split()],
            capture_output=True,
            text=True,
            env=live_server.env,
            cwd=NEGATIVE,
            timeout=60,
        )
        assert (result.returncode, result.stdout, result.stderr.strip()) == (1, "", expected)
