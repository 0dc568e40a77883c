from __future__ import annotations

import contextlib
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corral.domain.formats.quantities import (
    evaluate_arithmetic,
    format_cores,
    format_quantity,
    parse_quantity,
)

SUFFIXES = "Ki Mi Gi Ti Pi Ei KiB MiB GiB TiB PiB n u m k M G T P E B"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("1", Decimal(1)),
        ("1.5", Decimal("1.5")),
        (".5", Decimal("0.5")),
        ("1.", Decimal(1)),
        ("+2", Decimal(2)),
        ("-2", Decimal(-2)),
        ("500m", Decimal("0.5")),
        ("1n", Decimal("1e-9")),
        ("3u", Decimal("3e-6")),
        ("2k", Decimal(2000)),
        ("1M", Decimal(10**6)),
        ("1G", Decimal(10**9)),
        ("1T", Decimal(10**12)),
        ("1P", Decimal(10**15)),
        ("1E", Decimal(10**18)),
        ("1Ki", Decimal(1024)),
        ("1Mi", Decimal(2**20)),
        ("1Gi", Decimal(2**30)),
        ("1.5Gi", Decimal(3 * 2**29)),
        ("1Ti", Decimal(2**40)),
        ("1Pi", Decimal(2**50)),
        ("1Ei", Decimal(2**60)),
        ("1KiB", Decimal(1024)),
        ("2GiB", Decimal(2**31)),
        ("1PiB", Decimal(2**50)),
        ("7B", Decimal(7)),
        ("1E3", Decimal(1000)),
        ("1e3", Decimal(1000)),
        ("1e-3", Decimal("0.001")),
        ("2.5e+2", Decimal(250)),
        ("  16Gi\n", Decimal(16 * 2**30)),
        ("-1.5Gi", Decimal(-3 * 2**29)),
    ],
)
def test_parse_quantity(text: str, expected: Decimal) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(
    "text, message",
    [
        ("4K", "invalid quantity '4K': use k (10^3) or Ki (2^10)"),
        ("4x", f"invalid quantity '4x': unknown suffix 'x'; use one of {SUFFIXES}"),
        ("4 Gi", f"invalid quantity '4 Gi': write a number (4, 1.5, .5) with an optional suffix "
                 f"({SUFFIXES}) or exponent (1e3)"),
        ("", f"invalid quantity '': write a number (4, 1.5, .5) with an optional suffix "
             f"({SUFFIXES}) or exponent (1e3)"),
        ("Gi", f"invalid quantity 'Gi': write a number (4, 1.5, .5) with an optional suffix "
               f"({SUFFIXES}) or exponent (1e3)"),
        ("1e", f"invalid quantity '1e': unknown suffix 'e'; use one of {SUFFIXES}"),
        ("1EiB", f"invalid quantity '1EiB': unknown suffix 'EiB'; use one of {SUFFIXES}"),
        ("1e1001", "invalid quantity '1e1001': the exponent must be between -1000 and 1000"),
        ("1e-99999999999999", "invalid quantity '1e-99999999999999': the exponent must be "
                              "between -1000 and 1000"),
    ],
)  # fmt: skip
def test_parse_quantity_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_quantity(text)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    "value, expected",
    [
        (Decimal(2**30 * 255), "255Gi"),
        (Decimal(1536), "1536"),
        (Decimal(1024), "1Ki"),
        (Decimal(2**60 * 3), "3Ei"),
        (Decimal(2**70), "1024Ei"),
        (Decimal(1000), "1000"),
        (Decimal(0), "0"),
        (Decimal("-0.000"), "0"),
        (Decimal(-2048), "-2Ki"),
        (Decimal("1.5"), "1500m"),
        (Decimal("2.000"), "2"),
        (Decimal("0.0001"), "0.0001"),
        (Decimal("1E+101"), "1" + "0" * 101),
    ],
)
def test_format_quantity(value: Decimal, expected: str) -> None:
    assert format_quantity(value) == expected


@pytest.mark.parametrize(
    "value, expected",
    [(Decimal(4), "4"), (Decimal("63.750"), "63.75"), (Decimal("1E+2"), "100"),
     (Decimal("0.001"), "0.001"), (Decimal("-0"), "0")],
)  # fmt: skip
def test_format_cores(value: Decimal, expected: str) -> None:
    assert format_cores(value) == expected


def test_format_refuses_infinity() -> None:
    with pytest.raises(ValueError, match=r"^Infinity is not a finite quantity$"):
        format_quantity(Decimal("Infinity"))


@given(st.decimals(places=3, allow_nan=False, allow_infinity=False))
def test_format_quantity_round_trips(value: Decimal) -> None:
    assert parse_quantity(format_quantity(value)) == value


@given(st.decimals(allow_nan=False, allow_infinity=False, min_value=-(10**30), max_value=10**30))
def test_format_cores_round_trips(value: Decimal) -> None:
    assert parse_quantity(format_cores(value)) == value


@given(st.integers(-(2**80), 2**80), st.sampled_from(["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]))
def test_binary_suffix_is_a_power_of_1024(amount: int, suffix: str) -> None:
    power = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"].index(suffix) + 1
    assert parse_quantity(f"{amount}{suffix}") == amount * 1024**power


@pytest.mark.parametrize(
    "text, expected",
    [
        ("4", Decimal(4)),
        ("-1", Decimal(-1)),
        ("+1", Decimal(1)),
        ("--1", Decimal(1)),
        ("255Gi * 0.8", Decimal(255 * 2**30) * Decimal("0.8")),
        ("(4 + 4) * 2", Decimal(16)),
        ("4 + 4 * 2", Decimal(12)),
        ("10 - 2 - 3", Decimal(5)),
        ("12 / 4 / 3", Decimal(1)),
        ("1Gi - 1G", Decimal(2**30 - 10**9)),
        ("500m + 500m", Decimal(1)),
        ("2*-3", Decimal(-6)),
        ("1e3/10", Decimal(100)),
        ("2E - 1E", Decimal(10**18)),
        ("((((7))))", Decimal(7)),
        ("1 / 4", Decimal("0.25")),
    ],
)
def test_evaluate_arithmetic(text: str, expected: Decimal) -> None:
    assert evaluate_arithmetic(text) == expected


@pytest.mark.parametrize(
    "text",
    ["", "   ", "abc", "NVIDIA-A100", "1g.10gb", "4K", "4 +", "1 2", "(1", "1)", "()", "*1",
     "1.2.3", "inf", "nan", "None", "{{X}}", "4Gi4"],
)  # fmt: skip
def test_not_arithmetic(text: str) -> None:
    assert evaluate_arithmetic(text) is None


@pytest.mark.parametrize(
    "text, message",
    [
        ("1/0", "division by zero in '1/0'"),
        ("4Gi / (2 - 2)", "division by zero in '4Gi / (2 - 2)'"),
        ("1e1001 + 1", "invalid quantity '1e1001': the exponent must be between -1000 and 1000"),
        ("(" * 60 + "1" + ")" * 60,
         f"arithmetic expression '{'(' * 40}'... nests deeper than 50 levels; simplify it"),
        ("-" * 60 + "1",
         f"arithmetic expression '{'-' * 40}'... nests deeper than 50 levels; simplify it"),
        ("1+" * 600 + "1",
         "arithmetic expression is longer than 1000 characters: "
         "'1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+'...; shorten it"),
        ("1e1000*" * 101 + "1", "the value of '1e1000*1e1000*1e1000*1e1000*1e1000*1e100'... "
         "is out of range"),
        ("1/0" + " " * 100, "division by zero in '1/0                                     '..."),
    ],
)  # fmt: skip
def test_arithmetic_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        evaluate_arithmetic(text)
    assert str(caught.value) == message


_PIECES = st.sampled_from(
    ["1", "0", "-", "+", "*", "/", "(", ")", " ", ".5", "1e3", "1E", "Gi", "Ki", "m", "K",
     "x", "9" * 40, "e", "e-999", "1e1000", "{{", "}}", "%", "\n", "\u00a0", "٣"]
)  # fmt: skip


@given(st.one_of(st.text(max_size=60), st.lists(_PIECES, max_size=80).map("".join)))
def test_fuzz_only_value_errors(text: str) -> None:
    try:
        value = evaluate_arithmetic(text)
    except ValueError:
        return
    assert value is None or value.is_finite()
    with contextlib.suppress(ValueError):
        parse_quantity(text)


@given(st.integers(-(10**6), 10**6), st.integers(-(10**6), 10**6))
def test_arithmetic_matches_integers(a: int, b: int) -> None:
    assert evaluate_arithmetic(f"{a} + {b} * 2 - ({a})") == b * 2
    assert evaluate_arithmetic(f"({a}) * ({b})") == a * b
