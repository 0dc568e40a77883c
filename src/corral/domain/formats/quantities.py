"""Kubernetes quantities (``500m``, ``16Gi``, ``1e3``), exact, and arithmetic over them.

OSMO converts every size to integer KiB with its own unit table (``M`` == ``Mi``, ``m`` is a
1/1024 byte); corral follows Kubernetes instead, with :class:`decimal.Decimal` so that nothing
is rounded: ``500m`` is half a core, ``1G`` is 10^9 and ``1Gi`` is 2^30.

Errors here are ``ValueError`` with a message fit for a user; callers turn them into
``UserError`` with the place the text came from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import (
    MAX_EMAX,
    MAX_PREC,
    MIN_EMIN,
    Context,
    Decimal,
    DivisionByZero,
    InvalidOperation,
    Overflow,
)

#: Binary suffixes, with their power of 1024. The ``*iB`` spellings are OSMO's.
BINARY_SUFFIXES: dict[str, int] = {
    "Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6,
    "KiB": 1, "MiB": 2, "GiB": 3, "TiB": 4, "PiB": 5,
}  # fmt: skip
#: Decimal suffixes, with their power of ten. ``B`` (bytes) is OSMO's.
DECIMAL_SUFFIXES: dict[str, int] = {
    "n": -9, "u": -6, "m": -3, "": 0, "B": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18,
}  # fmt: skip
ACCEPTED_SUFFIXES = "Ki Mi Gi Ti Pi Ei KiB MiB GiB TiB PiB n u m k M G T P E B"

#: Largest exponent accepted in ``1e<exponent>`` (bigger numbers are mistakes, and costly).
MAX_EXPONENT = 1_000
#: Longest arithmetic expression and deepest nesting :func:`evaluate_arithmetic` accepts.
MAX_EXPRESSION_LENGTH = 1_000
MAX_DEPTH = 50

_QUANTITY = re.compile(
    r"(?P<sign>[+-]?)(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<exponent>[eE][+-]?[0-9]+)|(?P<suffix>[A-Za-z]*))"
)
# Scaling by a power of ten or multiplying by a power of two must not round: this context has
# room for every digit (it is never used for division, where that would be endless).
_EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)
# Arithmetic in expressions: 100 digits is exact for anything a rule can mean; overflow and
# invalid operations raise instead of producing infinities.
_ARITHMETIC = Context(
    prec=100, Emax=100_000, Emin=-100_000, traps=[InvalidOperation, DivisionByZero, Overflow]
)


def parse_quantity(text: str) -> Decimal:
    """The exact value of a Kubernetes quantity such as ``500m``, ``1.5Gi``, ``1e3`` or ``-2``.

    Also accepts OSMO's ``KiB`` .. ``PiB`` (binary) and ``B`` (bytes). Raises ValueError naming
    the text and the accepted suffixes otherwise.
    """
    match = _QUANTITY.fullmatch(text.strip())
    if match is None:
        raise ValueError(
            f"invalid quantity {text!r}: write a number (4, 1.5, .5) with an optional suffix "
            f"({ACCEPTED_SUFFIXES}) or exponent (1e3)"
        )
    value = Decimal(match["number"])
    if match["exponent"] is not None:
        value = value.scaleb(_exponent(text, match["exponent"][1:]), _EXACT)
    else:
        value = _apply_suffix(text, value, match["suffix"])
    return value.copy_negate() if match["sign"] == "-" else value


class ExponentRangeError(ValueError):
    """A well-formed quantity whose exponent is out of range (not merely text)."""


def _exponent(text: str, digits: str) -> int:
    magnitude = digits.lstrip("+-").lstrip("0") or "0"
    # Compare lengths first: int() of thousands of digits is slow (and limited in Python 3.11).
    if len(magnitude) > len(str(MAX_EXPONENT)) or int(magnitude) > MAX_EXPONENT:
        raise ExponentRangeError(
            f"invalid quantity {text!r}: the exponent must be between -{MAX_EXPONENT} "
            f"and {MAX_EXPONENT}"
        )
    return -int(magnitude) if digits.startswith("-") else int(magnitude)


def _apply_suffix(text: str, value: Decimal, suffix: str) -> Decimal:
    if suffix in BINARY_SUFFIXES:
        return _EXACT.multiply(value, Decimal(1024 ** BINARY_SUFFIXES[suffix]))
    if suffix in DECIMAL_SUFFIXES:
        return value.scaleb(DECIMAL_SUFFIXES[suffix], _EXACT)
    if suffix == "K":
        raise ValueError(f"invalid quantity {text!r}: use k (10^3) or Ki (2^10)")
    raise ValueError(
        f"invalid quantity {text!r}: unknown suffix {suffix!r}; use one of {ACCEPTED_SUFFIXES}"
    )


# ------------------------------------------------------------------------------- formatting

_BINARY_BY_SIZE = (("Ei", 6), ("Pi", 5), ("Ti", 4), ("Gi", 3), ("Mi", 2), ("Ki", 1))
# Above this the value is shown as plain digits (a binary suffix would not help a reader).
_FORMAT_LIMIT = Decimal(10) ** 100


def format_quantity(value: Decimal) -> str:
    """A byte count as the shortest exact Kubernetes quantity.

    The largest binary suffix that divides the value (``255Gi``), else the integer (``1000``),
    else milli-units (``1500m``), else the plain decimal. ``parse_quantity`` reads it back
    to the same value.
    """
    _require_finite(value)
    if abs(value) >= _FORMAT_LIMIT:
        return _plain(value)
    if value == value.to_integral_value():
        whole = int(value)
        for suffix, power in _BINARY_BY_SIZE:
            if whole and whole % 1024**power == 0:
                return f"{whole // 1024**power}{suffix}"
        return str(whole)
    milli = value.scaleb(3, _EXACT)
    if milli == milli.to_integral_value():
        return f"{int(milli)}m"
    return _plain(value)


def format_cores(value: Decimal) -> str:
    """CPU cores as a plain exact number: ``4``, ``63.75``, ``0.001``."""
    _require_finite(value)
    return _plain(value)


def _require_finite(value: Decimal) -> None:
    if not value.is_finite():
        raise ValueError(f"{value} is not a finite quantity")


def _plain(value: Decimal) -> str:
    """Fixed-point digits, no exponent, no trailing zeros after the point."""
    text = format(value, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


# ------------------------------------------------------------------------------- arithmetic


@dataclass(frozen=True)
class _Token:
    kind: str  # "number" or one of "+-*/()"
    value: Decimal = Decimal(0)


class _NotArithmetic(Exception):
    """The text is not an arithmetic expression of quantities (a plain string instead)."""


_LITERAL = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+|[A-Za-z]*)")


def evaluate_arithmetic(text: str) -> Decimal | None:
    """The value of ``+ - * /`` and parentheses over quantities (``255Gi * 0.8``, ``-1``).

    None when ``text`` is not such an expression (``abc``, ``NVIDIA-A100``, ``1g.10gb``), so
    that callers can compare it as text. ValueError for division by zero, an expression longer
    than ``MAX_EXPRESSION_LENGTH`` or nested deeper than ``MAX_DEPTH``, or a result out of range.
    """
    try:
        tokens = _tokenize(text)
    except _NotArithmetic:
        return None
    if not tokens:
        return None
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise ValueError(
            f"arithmetic expression is longer than {MAX_EXPRESSION_LENGTH} characters: "
            f"{_short(text)}; shorten it"
        )
    parser = _Parser(text, tokens)
    try:
        value = parser.expression(0)
        if parser.position != len(tokens):
            return None
    except _NotArithmetic:
        return None
    except ArithmeticError:  # decimal Overflow / InvalidOperation
        raise ValueError(f"the value of {_short(text)} is out of range") from None
    return value


def _short(text: str) -> str:
    """``text`` quoted, cut to its first 40 characters when it is long."""
    return repr(text) if len(text) <= 60 else f"{text[:40]!r}..."


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    position = 0
    while position < len(text):
        char = text[position]
        if char.isspace():
            position += 1
        elif char in "+-*/()":
            tokens.append(_Token(char))
            position += 1
        else:
            literal = _LITERAL.match(text, position)
            if literal is None:
                raise _NotArithmetic
            try:
                tokens.append(_Token("number", parse_quantity(literal[0])))
            except ExponentRangeError:
                raise  # a number, but out of range: say so rather than compare it as text
            except ValueError:
                raise _NotArithmetic from None
            position = literal.end()
    return tokens


class _Parser:
    """Recursive descent: expression = term (('+'|'-') term)*; term = factor (('*'|'/')
    factor)*; factor = ('+'|'-') factor | number | '(' expression ')'."""

    def __init__(self, text: str, tokens: list[_Token]) -> None:
        self.text = text
        self.tokens = tokens
        self.position = 0

    def _peek(self) -> str | None:
        return self.tokens[self.position].kind if self.position < len(self.tokens) else None

    def _take(self) -> _Token:
        if self.position >= len(self.tokens):
            raise _NotArithmetic
        token = self.tokens[self.position]
        self.position += 1
        return token

    def _deeper(self, depth: int) -> int:
        if depth >= MAX_DEPTH:
            raise ValueError(
                f"arithmetic expression {_short(self.text)} nests deeper than {MAX_DEPTH} "
                "levels; simplify it"
            )
        return depth + 1

    def expression(self, depth: int) -> Decimal:
        value = self.term(depth)
        while self._peek() in ("+", "-"):
            operator = self._take().kind
            right = self.term(depth)
            value = (
                _ARITHMETIC.add(value, right)
                if operator == "+"
                else _ARITHMETIC.subtract(value, right)
            )
        return value

    def term(self, depth: int) -> Decimal:
        value = self.factor(depth)
        while self._peek() in ("*", "/"):
            operator = self._take().kind
            right = self.factor(depth)
            if operator == "*":
                value = _ARITHMETIC.multiply(value, right)
            elif right == 0:
                raise ValueError(f"division by zero in {_short(self.text)}")
            else:
                value = _ARITHMETIC.divide(value, right)
        return value

    def factor(self, depth: int) -> Decimal:
        token = self._take()
        if token.kind == "number":
            return token.value
        if token.kind in ("+", "-"):
            value = self.factor(self._deeper(depth))
            return value.copy_negate() if token.kind == "-" else value
        if token.kind == "(":
            value = self.expression(self._deeper(depth))
            if self._take().kind != ")":
                raise _NotArithmetic
            return value
        raise _NotArithmetic
