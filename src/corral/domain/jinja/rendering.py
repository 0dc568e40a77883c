"""Rendering Jinja text with template variables, safely and with errors a user can act on.

OSMO renders in a sandboxed subprocess; corral renders in-process in Jinja's sandbox with
limits on the operations that could exhaust memory or time (``'x' * 10**9``, ``10 ** 10**9``)
and on the length of the output. Differences from OSMO (docs/templates.md):

- a variable that is undefined *or null* is an error naming the variable and where it was used,
  never the text ``None``;
- every failure (type errors, division by zero, ...) is a user error, never a crash;
- the items of ``ARRAY:[a, b]`` are trimmed;
- rendered values take the type Kubernetes expects at their field (``field_types``).
"""

from __future__ import annotations

import contextlib
import operator
import re
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from functools import lru_cache
from typing import Any

from jinja2 import StrictUndefined, Template, TemplateError, UndefinedError
from jinja2.sandbox import SandboxedEnvironment

from corral.domain.formats.json_paths import Path
from corral.domain.schemas.field_types import FieldType, coerce
from corral.errors import UserError

#: Longest text a single value may render to, and largest sequence ``*`` may build.
MAX_OUTPUT = 100_000
#: Largest exponent accepted by ``**`` (bigger ones can take minutes to compute).
MAX_EXPONENT = 1_000


class RenderTooSlow(Exception):
    """Raised into a render that used up its time (by the guard the sandbox worker installs)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(seconds)
        self.seconds = seconds


#: Wraps every render of a template value. In-process it does nothing; the sandbox worker
#: (services/workers/sandbox.py) installs one that interrupts a render after its CPU time limit.
_render_guard: Callable[[], AbstractContextManager[None]] = contextlib.nullcontext


def install_render_guard(guard: Callable[[], AbstractContextManager[None]]) -> None:
    """Wrap every later render of a template value in ``guard()``."""
    global _render_guard
    _render_guard = guard


class MissingVariableError(UserError):
    """A template used a variable that has no value."""

    def __init__(self, message: str, *, variable: str) -> None:
        super().__init__(message)
        self.variable = variable


#: ``{{ NAME }}`` alone: the most common template, rendered without Jinja.
_SINGLE_VARIABLE = re.compile(r"^\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}$")
#: Jinja's wording for a missing top-level name: ``'USER_GPU' is undefined``.
_UNDEFINED = re.compile(r"^'(?P<name>[^']+)' is undefined$")


def _limited_power(base: Any, exponent: Any) -> Any:
    if isinstance(exponent, int | float) and abs(exponent) > MAX_EXPONENT:
        raise ValueError(f"exponent {exponent} is larger than {MAX_EXPONENT}")
    return operator.pow(base, exponent)


def _limited_multiply(left: Any, right: Any) -> Any:
    for sequence, count in ((left, right), (right, left)):
        repeated = isinstance(sequence, str | list | tuple) and isinstance(count, int)
        if repeated and len(sequence) * count > MAX_OUTPUT:
            raise ValueError(f"the result would be longer than {MAX_OUTPUT} characters")
    return operator.mul(left, right)


class _Sandbox(SandboxedEnvironment):
    intercepted_binops = frozenset({"*", "**"})

    def call_binop(self, context: Any, operator_name: str, left: Any, right: Any) -> Any:
        if operator_name == "**":
            return _limited_power(left, right)
        return _limited_multiply(left, right)


_ENV = _Sandbox(undefined=StrictUndefined, keep_trailing_newline=True)


def sandbox_environment() -> SandboxedEnvironment:
    """The sandbox every user template is rendered in (StrictUndefined, bounded ``*``/``**``).

    For callers that render whole documents (workflow files) and so cannot use the per-value
    cache of :func:`render_text`.
    """
    return _ENV


@lru_cache(maxsize=4096)
def _compile(text: str) -> Template:
    return _ENV.from_string(text)


def is_template(text: str) -> bool:
    """Whether ``text`` contains Jinja markup (plain text renders to itself)."""
    return "{{" in text or "{%" in text or "{#" in text


#: What is being rendered, for error messages; a callable is called only for an error (a pod
#: has dozens of template values, and naming each one's field cost more than rendering it).
Where = str | Callable[[], str]


def render_text(text: str, variables: Mapping[str, Any], *, where: Where) -> str:
    """Render ``text``; ``where`` says what is being rendered, for error messages.

    Variables whose value is None count as missing.
    """
    if not is_template(text):
        return text
    try:
        rendered = _render_text(text, variables)
    except MemoryError:
        raise  # the sandbox worker reports its memory limit
    except Exception as err:
        raise _render_error(err, text, _place(where)) from None
    if len(rendered) > MAX_OUTPUT:
        raise UserError(f"{_place(where)}: {text!r} renders to more than {MAX_OUTPUT} characters")
    return rendered


def _place(where: Where) -> str:
    return where() if callable(where) else where


def _render_error(err: Exception, text: str, where: str) -> UserError:
    if isinstance(err, RenderTooSlow):
        return UserError(
            f"{where}: rendering {_shortened(text)} took longer than {err.seconds:g} s of CPU "
            "time; simplify the template"
        )
    if isinstance(err, UndefinedError):
        missing = _UNDEFINED.match(err.message or "")
        if missing is None:
            return UserError(f"{where}: cannot render {_shortened(text)}: {err.message}")
        return MissingVariableError(
            f"{where}: variable {missing['name']} has no value (it is undefined or null); "
            "give it one in the task's resources, with --set, or as a default variable "
            "of the pool or platform",
            variable=missing["name"],
        )
    if isinstance(err, TemplateError):
        return UserError(f"{where}: cannot render {_shortened(text)}: {err.message}")
    # the template's own arithmetic or types went wrong
    return UserError(f"{where}: cannot render {_shortened(text)}: {err}")


def _shortened(text: str) -> str:
    return repr(text) if len(text) <= 80 else repr(text[:77] + "...")


def _render_text(text: str, variables: Mapping[str, Any]) -> str:
    single = _SINGLE_VARIABLE.match(text)
    if single is not None and variables.get(single[1]) is not None:
        # What Jinja prints, without a Jinja context, and bounded without a guard: most
        # template values are one variable, and arming the CPU timer cost more than this.
        return str(variables[single[1]])
    context = {name: value for name, value in variables.items() if value is not None}
    with _render_guard():
        return _compile(text).render(context)


_ARRAY = re.compile(r"^ARRAY:\[(.*)\]$", re.S)

Describe = Callable[[Path], str]
TypeOf = Callable[[Path], FieldType | None]


def render_tree(
    value: Any, variables: Mapping[str, Any], *, describe: Describe, type_of: TypeOf
) -> Any:
    """A copy of ``value`` with every string value (never a key) rendered.

    ``describe(path)`` names a field for errors (which template, which field); ``type_of(path)``
    is the Kubernetes type expected there, so that a rendered ``"8"`` becomes ``8`` where
    Kubernetes wants an integer and stays text where it wants text. A value rendered to exactly
    ``ARRAY:[a,b]`` becomes the list ``["a", "b"]`` (spliced into a surrounding list).
    """
    return _render(value, (), variables, describe, type_of)


def _render(
    value: Any, path: Path, variables: Mapping[str, Any], describe: Describe, type_of: TypeOf
) -> Any:
    if isinstance(value, dict):
        return {
            key: _render(child, (*path, key), variables, describe, type_of)
            for key, child in value.items()
        }
    if isinstance(value, list):
        items: list[Any] = []
        for child in value:
            rendered = _render(child, (*path, len(items)), variables, describe, type_of)
            if isinstance(child, str) and isinstance(rendered, list):
                items.extend(rendered)
            else:
                items.append(rendered)
        return items
    if isinstance(value, str) and is_template(value):
        return render_leaf(value, path, variables, describe=describe, type_of=type_of)
    return value


def render_leaf(
    text: str,
    path: Path,
    variables: Mapping[str, Any],
    *,
    describe: Describe,
    type_of: TypeOf,
) -> Any:
    """The template value ``text`` at ``path`` rendered, as the type Kubernetes expects there;
    ``ARRAY:[a, b]`` becomes a list (which the caller splices into a surrounding list)."""
    rendered = render_text(text, variables, where=lambda: describe(path))
    array = _ARRAY.match(rendered)
    if array is not None:
        # As OSMO, ARRAY:[] is [""]: `NotIn [""]` excludes nothing and is valid, while an
        # empty `values` list is refused by Kubernetes.
        parts = [part.strip() for part in array[1].split(",")]
        return [coerce(part, type_of((*path, index))) for index, part in enumerate(parts)]
    return coerce(rendered, type_of(path))
