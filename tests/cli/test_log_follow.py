"""``corral workflow logs --follow`` (issue 25, item 15): what each poll adds is printed once,
several tasks' lines are prefixed, a retry starts over, and it ends with the workflow; end to
end against local tasks that print while they run."""

from __future__ import annotations

import io
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from corral.cli.log_follow import LogFollower, added_text
from tests.cli.results import succeeded
from tests.conftest import LiveServer


@given(st.text(max_size=50), st.text(max_size=50))
def test_what_a_log_adds_is_found_after_what_was_seen(before: str, more: str) -> None:
    assert added_text(before, before + more) == (more, False)


def test_a_log_whose_head_was_cut_is_followed_from_where_it_left_off() -> None:
    """Past a MiB the server sends a log's tail, under a note: the head moves on."""
    seen = "".join(f"line {i}\n" for i in range(1000))
    now = "corral: log truncated\n" + seen[3000:] + "line 1000\n"
    assert added_text(seen, now) == ("line 1000\n", False)
    assert added_text(seen, "something else\n") == ("something else\n", True)


class FakeClient:
    """A workflow whose answers are scripted per poll."""

    def __init__(self, polls: list[tuple[str, dict[str, tuple[int, str]]]]) -> None:
        self.polls = polls
        self.index = -1

    def get(self, path: str, **params: Any) -> Any:
        self.index += 1
        status, tasks = self.polls[self.index]
        listed = [
            {"name": name, "retry_id": retry, "start_time": "then"}
            for name, (retry, _) in tasks.items()
        ]
        return {"status": status, "groups": [{"tasks": listed}]}

    def get_text(self, path: str, **params: Any) -> str:
        return self.polls[self.index][1][params["task_name"]][1]


def test_several_tasks_are_prefixed_and_a_retry_starts_over() -> None:
    client = FakeClient(
        [
            ("RUNNING", {"a": (0, "one\ntw"), "bb": (0, "")}),
            ("RUNNING", {"a": (0, "one\ntwo\n"), "bb": (0, "x\n")}),
            ("RUNNING", {"a": (1, "again\n"), "bb": (0, "x\ny")}),
            ("FAILED", {"a": (1, "again\n"), "bb": (0, "x\ny")}),
        ]
    )
    out = io.StringIO()
    LogFollower(client, "wf-1", None, out, sleep=lambda _: None).run()  # type: ignore[arg-type]
    assert out.getvalue().splitlines() == [
        "a  | one",
        "a  | two",
        "bb | x",
        "a  | corral: retry 1 started",
        "a  | again",
        "bb | y",
    ]


def test_one_task_is_printed_as_it_is() -> None:
    client = FakeClient([("RUNNING", {"a": (0, "one\ntw")}), ("COMPLETED", {"a": (0, "one\ntwo")})])
    out = io.StringIO()
    LogFollower(client, "wf-1", "a", out, sleep=lambda _: None).run()  # type: ignore[arg-type]
    assert out.getvalue() == "one\ntwo"


def test_follow_prints_a_running_tasks_lines_until_the_workflow_ends(
    live_server: LiveServer, tmp_path: Path
) -> None:
    spec = tmp_path / "ticks.yaml"
    spec.write_text(
        "workflow:\n"
        "  name: ticks\n"
        "  tasks:\n"
        "  - {name: tick, image: busybox, command: [sh, -c,"
        " 'for i in 1 2 3 4 5 6; do echo tick $i; sleep 0.5; done']}\n"
    )
    succeeded(live_server.cli("workflow", "submit", str(spec), "--pool", "default"))
    started = time.monotonic()
    followed = subprocess.run(
        [sys.executable, "-m", "corral", "workflow", "logs", "ticks-1", "--follow"],
        capture_output=True,
        text=True,
        env=live_server.env,
        timeout=60,
    )
    assert followed.returncode == 0, followed.stderr
    assert followed.stdout.splitlines() == [f"tick | tick {i}" for i in range(1, 7)]
    assert time.monotonic() - started >= 2  # it followed the task, not its finished log
