"""``python -m corral.backends.task_runner ATTEMPT_DIR``: the runner's name before it moved to
``backends/embedded/task_runner.py``, kept so that whatever still starts it by that name (a
script, or a server of the previous release in a rolling restart) starts the same runner. It
imports no more than the runner does (``backends/embedded/__init__.py`` is empty)."""

import sys

from corral.backends.embedded.task_runner import main

if __name__ == "__main__":
    sys.exit(main(sys.argv))
