"""Write-time checks of the Jinja text inside templates and rules.

Rendering belongs to the template engine; here we only make sure that what an admin stores
parses, so that a typo such as ``{{ USER_GPU }`` is reported when the config is written rather
than when a user's workflow is submitted.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from jinja2 import TemplateSyntaxError, meta
from jinja2.sandbox import SandboxedEnvironment

from corral.errors import UserError

_ENV = SandboxedEnvironment()


def check_jinja(text: str, *, path: tuple[str | int, ...] = ()) -> None:
    """Raise UserError (naming ``path`` and the template line) if ``text`` is not valid Jinja."""
    if "{" not in text:
        return
    try:
        _ENV.parse(text)
    except TemplateSyntaxError as err:
        raise UserError(
            f"Invalid template expression {text!r}: {err.message} (line {err.lineno} of the value)",
            path=path,
        ) from None


def string_leaves(
    value: Any, path: tuple[str | int, ...] = ()
) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """Every string value (never a key) in a JSON-like tree, with its path."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, child in value.items():
            yield from string_leaves(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from string_leaves(child, (*path, index))


def check_all_jinja(value: Any) -> None:
    for path, text in string_leaves(value):
        check_jinja(text, path=path)


#: Variables a pod template has but a group template does not: a group has no single task
#: (docs/templates.md#group-templates).
TASK_ONLY_VARIABLES = (
    "USER_CONTAINER_NAME",
    "WF_TASK_NAME",
    "WF_TASK_UUID",
    "WF_RETRY_ID",
    "WF_PLATFORM",
    "WF_LEAD_CONTAINER",
)


def refuse_task_variables(template: Any) -> None:
    """A group template that uses a task's variable (UserError naming it and the field)."""
    for path, text in string_leaves(template):
        if "{" not in text:
            continue
        used = meta.find_undeclared_variables(_ENV.parse(text))
        found = [name for name in TASK_ONLY_VARIABLES if name in used]
        if found:
            raise UserError(
                f"{found[0]} is a variable of one task, and a group template is rendered once "
                "for a whole task group; use a group variable instead (WF_GROUP_NAME, "
                "WF_GROUP_UUID, WF_ID, ...).",
                path=path,
            )
