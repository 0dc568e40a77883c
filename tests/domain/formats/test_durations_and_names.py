from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corral.domain.formats.durations import parse_duration
from corral.domain.formats.kubernetes_names import label_key_problem
from corral.domain.formats.names import check_name
from corral.errors import UserError


@pytest.mark.parametrize(
    "text, expected",
    [
        ("60d", timedelta(days=60)),
        ("12h", timedelta(hours=12)),
        ("90m", timedelta(minutes=90)),
        ("15s", timedelta(seconds=15)),
        ("250ms", timedelta(milliseconds=250)),
        ("7us", timedelta(microseconds=7)),
        ("PT10S", timedelta(seconds=10)),
        ("P1DT2H", timedelta(days=1, hours=2)),
        ("PT1.5S", timedelta(seconds=1.5)),
    ],
)
def test_durations(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["1.5h", "1w", "", "P", "PT", "P1DT", "10", "h"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="Cannot recognize duration"):
        parse_duration(text)


@given(st.integers(0, 10**6), st.sampled_from(["d", "h", "m", "s"]))
def test_simple_durations_scale(amount: int, unit: str) -> None:
    seconds = {"d": 86400, "h": 3600, "m": 60, "s": 1}[unit]
    assert parse_duration(f"{amount}{unit}") == timedelta(seconds=amount * seconds)


@pytest.mark.parametrize(
    "key, problem",
    [
        ("nvidia.com/gpu-clique", None),
        ("topology.kubernetes.io/zone", None),
        ("rack", None),
        ("/rack", "the prefix before '/' is empty"),
        ("a/", "the name part is empty"),
        (
            "a/-x",
            "the name part '-x' must start and end with a letter or digit and contain only "
            "letters, digits, '-', '_' or '.'",
        ),
        ("x" * 64, f"the name part {'x' * 64!r} is longer than 63 characters"),
    ],
)
def test_label_keys(key: str, problem: str | None) -> None:
    assert label_key_problem(key) == problem


@given(st.from_regex(r"[a-zA-Z]([a-zA-Z0-9_.-]{0,40}[a-zA-Z0-9])?", fullmatch=True))
def test_valid_names_pass(name: str) -> None:
    assert check_name("Pool", name) == name


@given(st.text(max_size=10).filter(lambda s: not s[:1].isascii() or not s[:1].isalpha()))
def test_names_must_start_with_a_letter(name: str) -> None:
    with pytest.raises(UserError):
        check_name("Pool", name)
