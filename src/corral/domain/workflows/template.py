"""From a submitted workflow file to the rendered document
(docs/osmo-reference.md#the-workflow-file).

1. Split the file into its top-level sections by a regex over column-0 lines, as OSMO does
   (Jinja control lines such as ``{% for %}`` stay inside the current section).
2. Variables: ``default-values`` < ``--set k=v`` < ``--set-string k=v``.
3. Shield the special tokens (``{{output}}``, ``{{input:0}}``, ...) from Jinja, render the rest in
   the sandbox (a subprocess on the server), and put the tokens back verbatim.
4. After submission assigns the workflow id, :func:`substitute_tokens` fills the tokens per task.

The rendered text keeps the file's line numbers: the ``default-values`` lines become empty
lines, so an error before any Jinja-generated text points at the line the user wrote.

Differences from OSMO: the spaced token forms (``{{ output }}``) are shielded too; a ``--set``
without ``=`` says how to write it; an undefined variable names itself, its line and the fix.
"""

from __future__ import annotations

import re
import traceback
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from jinja2 import TemplateSyntaxError, UndefinedError
from jinja2.exceptions import TemplateError

from corral.domain.formats.documents import parse_document
from corral.domain.jinja.rendering import is_template, sandbox_environment
from corral.domain.workflows.spec import TaskSpec
from corral.errors import UserError

#: ``(template text, variables) -> rendered text``; raises :class:`JinjaError`.
Renderer = Callable[[str, Mapping[str, Any]], str]

#: Largest rendered workflow (characters): a template that generates more is a mistake.
MAX_RENDERED_CHARS = 4_000_000
#: Largest ``default-values`` (nodes after expanding YAML aliases) and its deepest nesting.
MAX_DEFAULT_VALUES_NODES = 100_000
MAX_DEFAULT_VALUES_DEPTH = 50

SECTIONS = ("workflow", "default-values", "version")
_SECTION = re.compile(r"^(?P<key>[A-Za-z][A-Za-z0-9_.-]*)[ \t]*:(?=\s|$)")
#: The service-substituted tokens, with the spaced forms OSMO does not shield.
_TOKEN = re.compile(r"\{\{[ \t]*(?P<key>workflow_id|output|uuid|(?:input|host):[^{}\s]+)[ \t]*\}\}")
_UNDEFINED = re.compile(r"^'(?P<name>[^']+)' is undefined$")
OUTPUT_DIR = "/osmo/data/output"
INPUT_DIR = "/osmo/data/input"


class JinjaError(UserError):
    """Rendering failed; ``line`` (1-based, in the template) when Jinja knows it, and the
    ``variable`` that was undefined, if that was the problem."""

    def __init__(
        self,
        reason: str,
        *,
        line: int | None = None,
        column: int | None = None,
        variable: str | None = None,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.line = line
        self.column = column
        self.variable = variable


@dataclass(frozen=True)
class RenderedWorkflow:
    #: The rendered document (version + workflow sections), tokens restored verbatim.
    text: str
    #: The variables used (default-values < --set < --set-string).
    variables: dict[str, Any]
    #: Whether Jinja rendering was needed.
    templated: bool
    #: ``--set``/``--set-string`` names the file never mentions: they change nothing.
    unused: tuple[str, ...] = ()


# ------------------------------------------------------------------------------- sections


def split_sections(text: str, source: str) -> tuple[str, str | None]:
    """``(document to render, default-values text)``, both with the file's line numbers.

    Raises OSMO's errors for unknown, duplicated or missing top-level keys.
    """
    lines = text.splitlines(keepends=True)
    seen = _sections(lines, source)
    if "default-values" not in seen:
        return text, None
    rendered: list[str] = []
    defaults: list[str] = []
    current: str | None = None
    for line in lines:
        opening = _SECTION.match(line)
        if opening:
            current = opening["key"]
        blank = _blank(line)
        rendered.append(blank if current == "default-values" else line)
        defaults.append(line if current == "default-values" else blank)
    return "".join(rendered), "".join(defaults)


def _sections(lines: list[str], source: str) -> dict[str, int]:
    """The top-level keys and the line each opens on; OSMO's errors for unknown, duplicated
    or missing ones."""
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        if line[:1].isalpha():  # a top-level key starts with a letter: most lines are indented
            opening = _SECTION.match(line)
            if opening:
                _open_section(opening["key"], number, seen, source)
    if "workflow" not in seen:
        raise UserError(
            f"{source}:1:1: Workflow spec not found. Put the workflow under a top-level "
            '"workflow:" key (at column 0).'
        )
    return seen


def _open_section(key: str, number: int, seen: dict[str, int], source: str) -> None:
    if key not in SECTIONS:
        raise UserError(
            f'{source}:{number}:1: Unknown top-level key "{key}" found in the workflow spec. '
            'The top level may only hold "workflow", "default-values" and "version"; indent '
            'the key if it belongs under "workflow".'
        )
    if key in seen:
        raise UserError(
            f'{source}:{number}:1: Duplicate top-level key "{key}" found in the workflow spec '
            f"(first at line {seen[key]}); keep one of them."
        )
    seen[key] = number


def _blank(line: str) -> str:
    """An empty line with ``line``'s line ending (so line numbers stay)."""
    return line[len(line.rstrip("\r\n")) :]


# ------------------------------------------------------------------------------ variables


def parse_default_values(text: str | None, source: str) -> dict[str, Any]:
    """The ``default-values`` mapping (not rendered)."""
    if text is None:
        return {}
    document = parse_document(text, source)
    values = document.get("default-values") if isinstance(document, dict) else None
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise UserError(f"{source}: default-values must be a mapping of variable names to values.")
    for key in values:
        if not isinstance(key, str) or not key:
            raise UserError(
                f"{source}: default-values: variable name {key!r} must be non-empty text."
            )
    _check_size(values, source)
    return values


def _check_size(values: Any, source: str) -> None:
    """Refuse alias bombs and self-referencing aliases (they would expand without end)."""
    budget = [MAX_DEFAULT_VALUES_NODES]

    def walk(value: Any, depth: int) -> None:
        budget[0] -= 1
        if budget[0] < 0 or depth > MAX_DEFAULT_VALUES_DEPTH:
            raise UserError(
                f"{source}: default-values is too large or nested too deeply (more than "
                f"{MAX_DEFAULT_VALUES_NODES} values or {MAX_DEFAULT_VALUES_DEPTH} levels once "
                "YAML aliases are expanded); simplify it."
            )
        children = value.values() if isinstance(value, dict) else value
        if isinstance(value, dict | list | set | tuple):
            for child in children:
                walk(child, depth + 1)

    walk(values, 0)


def parse_set_values(items: Sequence[str], *, as_string: bool) -> dict[str, Any]:
    """``--set k=v`` (int, else float, else text) or ``--set-string k=v`` (text)."""
    option = "--set-string" if as_string else "--set"
    values: dict[str, Any] = {}
    for item in items:
        name, equals, raw = item.partition("=")
        if not equals or not name.strip():
            raise UserError(
                f"Data {item} is incorrectly formatted: write {option} NAME=VALUE "
                f"(e.g. {option} gpus=8)."
            )
        values[name.strip()] = raw if as_string else _coerce(raw)
    return values


def _coerce(raw: str) -> int | float | str:
    for kind in (int, float):
        try:
            return kind(raw)
        except ValueError:
            continue
    return raw


# -------------------------------------------------------------------------------- tokens


def shield_tokens(text: str) -> tuple[str, dict[str, str]]:
    """``text`` with each special token replaced by a placeholder Jinja leaves alone."""
    nonce = uuid.uuid4().hex[:12]
    originals: dict[str, str] = {}

    def placeholder(match: re.Match[str]) -> str:
        key = f"__corral_token_{nonce}_{len(originals)}__"
        originals[key] = match[0]
        return key

    return _TOKEN.sub(placeholder, text), originals


def restore_tokens(text: str, originals: Mapping[str, str]) -> str:
    for key, token in originals.items():
        text = text.replace(key, token)
    return text


# ------------------------------------------------------------------------------ rendering


def render_workflow(
    text: str,
    *,
    set_values: Sequence[str] = (),
    set_strings: Sequence[str] = (),
    source: str = "workflow.yaml",
    renderer: Renderer | None = None,
) -> RenderedWorkflow:
    """Render a workflow file; ``renderer`` None renders in-process (the server passes
    ``jinja_worker.render_in_subprocess``)."""
    document, defaults = split_sections(text, source)
    variables = parse_default_values(defaults, source)
    variables.update(parse_set_values(set_values, as_string=False))
    variables.update(parse_set_values(set_strings, as_string=True))
    shielded, originals = shield_tokens(document)
    unused = unused_names([*set_values, *set_strings], shielded)
    if not is_template(shielded):
        return RenderedWorkflow(document, variables, templated=False, unused=unused)
    try:
        rendered = (renderer or render_jinja)(shielded, variables)
    except JinjaError as err:
        raise UserError(_located(err, document, source)) from None
    if len(rendered) > MAX_RENDERED_CHARS:
        raise UserError(f"{source}: {_too_long()}")
    return RenderedWorkflow(
        restore_tokens(rendered, originals), variables, templated=True, unused=unused
    )


def unused_names(assignments: Sequence[str], document: str) -> tuple[str, ...]:
    """The names of ``NAME=VALUE`` assignments that ``document`` never mentions (a word
    search: a name that only appears in plain text counts as used)."""
    names = dict.fromkeys(item.split("=", 1)[0] for item in assignments)
    templated = is_template(document)
    return tuple(
        name
        for name in names
        if not templated or not re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", document)
    )


def _located(err: JinjaError, document: str, source: str) -> str:
    if err.line is None:
        return f"{source}: {err.reason}"
    lines = document.splitlines()
    column = err.column or 1
    if err.column is None and 0 < err.line <= len(lines):
        name = err.variable
        found = re.search(rf"\b{re.escape(name)}\b", lines[err.line - 1]) if name else None
        column = found.start() + 1 if found else 1
    return f"{source}:{err.line}:{column}: {err.reason}"


def _too_long() -> str:
    return (
        f"the rendered workflow is longer than {MAX_RENDERED_CHARS} characters; "
        "generate fewer tasks or shorter ones."
    )


def render_jinja(text: str, variables: Mapping[str, Any]) -> str:
    """Render ``text`` in corral's sandbox; every failure is a :class:`JinjaError`.

    In-process and without a time limit: the server renders through ``jinja_worker``.
    """
    try:
        template = sandbox_environment().from_string(text)
    except TemplateSyntaxError as err:
        raise JinjaError(
            f"Jinja syntax error: {_clause(err.message)}; fix the template.", line=err.lineno
        ) from None
    except Exception as err:  # e.g. RecursionError on absurdly nested expressions
        raise JinjaError(f"Jinja Template Error: {_clause(str(err))}; fix the template.") from None
    try:
        return _bounded(template.generate(dict(variables)))
    except UndefinedError as err:
        raise _undefined(err) from None
    except (JinjaError, MemoryError):
        raise  # a MemoryError is the worker's to report, with its limit
    except TemplateError as err:
        raise JinjaError(
            f"Jinja Template Error: {_clause(err.message)}; fix the template.",
            line=_template_line(err),
        ) from None
    except Exception as err:  # the template's own arithmetic or types went wrong
        raise JinjaError(
            f"Jinja substitution failure: {type(err).__name__}: {_clause(str(err))}; "
            "fix the template.",
            line=_template_line(err),
        ) from None


def _clause(message: str | None) -> str:
    """A message without its final full stop, to continue the sentence."""
    return (message or "").rstrip().rstrip(".")


def _bounded(parts: Any) -> str:
    """Join the rendered parts, stopping as soon as the result is too long."""
    chunks: list[str] = []
    size = 0
    for part in parts:
        size += len(part)
        if size > MAX_RENDERED_CHARS:
            raise JinjaError(_too_long())
        chunks.append(part)
    return "".join(chunks)


def _undefined(err: UndefinedError) -> JinjaError:
    line = _template_line(err)
    missing = _UNDEFINED.match(err.message or "")
    if missing is None:
        return JinjaError(
            f"Jinja substitution failure: {_clause(err.message)}; fix the template.", line=line
        )
    name = missing["name"]
    return JinjaError(
        f'variable "{name}" is undefined; give it a value with --set {name}=VALUE, or under '
        "default-values: in the workflow file.",
        line=line,
        variable=name,
    )


def _template_line(err: BaseException) -> int | None:
    """The template line Jinja's rewritten traceback points at (the innermost one)."""
    line = None
    for frame in traceback.extract_tb(err.__traceback__):
        if frame.filename == "<template>":
            line = frame.lineno
    return line


# ------------------------------------------------------------------------- substitution


def substitute_tokens(
    task: TaskSpec,
    *,
    workflow_id: str,
    hosts: Mapping[str, str],
    task_uuid: str | None = None,
) -> TaskSpec:
    """``task`` with the special tokens filled in (command, args, environment values, files).

    ``hosts`` maps the task names of the same group to their host names; ``{{uuid}}`` is filled
    only when ``task_uuid`` is given.
    """

    def fill(text: str) -> str:
        return _TOKEN.sub(
            lambda match: _token_value(match, task, workflow_id, hosts, task_uuid), text
        )

    return replace(
        task,
        command=tuple(fill(part) for part in task.command),
        args=tuple(fill(part) for part in task.args),
        environment={key: fill(value) for key, value in task.environment.items()},
        files=tuple(replace(file, contents=fill(file.contents)) for file in task.files),
    )


def _token_value(
    match: re.Match[str],
    task: TaskSpec,
    workflow_id: str,
    hosts: Mapping[str, str],
    task_uuid: str | None,
) -> str:
    key = match["key"]
    if key == "workflow_id":
        return workflow_id
    if key == "output":
        return OUTPUT_DIR
    if key == "uuid":
        return task_uuid if task_uuid is not None else match[0]
    kind, _, target = key.partition(":")
    if kind == "input":
        return f"{INPUT_DIR}/{_input_index(task, target, match[0])}"
    if target not in hosts:
        known = ", ".join(sorted(hosts)) or "none"
        raise UserError(
            f"Task {task.name}: {match[0]} names no task of its group; {{{{host:<task>}}}} can "
            f"address the tasks of the same group only: {known}."
        )
    return hosts[target]


def _input_index(task: TaskSpec, target: str, token: str) -> int:
    if target.isdecimal() and len(target) < 10:
        if int(target) < len(task.inputs):
            return int(target)
    else:
        for index, item in enumerate(task.inputs):
            if item.task is not None and item.task.rpartition(":")[2] == target:
                return index
    described = [
        f"{index} ({item.task if item.task is not None else item.url})"
        for index, item in enumerate(task.inputs)
    ]
    raise UserError(
        f"Task {task.name}: {token} names no input of the task; its inputs are: "
        f"{', '.join(described) or 'none'}. Use {{{{input:<index>}}}} or {{{{input:<task>}}}}."
    )
