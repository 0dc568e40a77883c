"""``--help`` as a newcomer reads it: text in brackets is kept, values are named (``--pool
POOL``), never shown as Python types (``<str>``, ``<bool>``, ``<list[str]>``), and a group's
help names every verb it has."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from corral.cli.main import build_command

PYTHON_TYPES = re.compile(r"<(str|int|float|bool|path|list\[[^\]]*\]|[a-z]+\|[a-z|]+)>")


def command_paths(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from command_paths(sub, (*path, name))


def help_of(path: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> str:
    command = build_command()
    with pytest.raises(SystemExit) as ended:
        command.main([*path, "--help"], prog_name="corral")
    assert ended.value.code == 0
    return capsys.readouterr().out


PATHS = list(command_paths(build_command()))


@pytest.mark.parametrize("path", PATHS, ids=[" ".join(p) or "corral" for p in PATHS])
def test_no_help_shows_a_python_type(path: tuple[str, ...], capsys: Any) -> None:
    text = help_of(path, capsys)
    assert PYTHON_TYPES.findall(text) == []


def test_submit_help_keeps_text_in_brackets(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    lines = help_of(("workflow", "submit"), capsys).splitlines()
    start = next(i for i, line in enumerate(lines) if "--pool" in line)
    assert lines[start : start + 2] == [
        "  -p, --pool POOL                 The pool [default: your default pool, else",
        "                                  the only one you may use].",
    ]


def test_pool_help_names_every_verb(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    assert help_of(("pool",), capsys) == (
        "Usage: corral pool [OPTIONS] COMMAND [ARGS]...\n"
        "\n"
        "  Pools you may use: quota and usage (list), what a platform's templates\n"
        "  render to (render), the topology keys a workflow may use (topology), free\n"
        "  shapes per rack or clique (shapes).\n"
        "\n"
        "Options:\n"
        "  --help  Show this message and exit.\n"
        "\n"
        "Commands:\n"
        "  list      GPU quota and usage of the pools you may use, grouped by the...\n"
        "  render    Merge and render a platform's templates for a sample task,...\n"
        "  topology  Show the topology keys a workflow may use in this pool,...\n"
        "  shapes    Per rack or clique (the pool's finest topology level): trays...\n"
    )
