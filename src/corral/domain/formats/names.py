"""Name rules for configuration items."""

from __future__ import annotations

import re

from corral.errors import UserError

# OSMO's CONFIG_NAME_REGEX: starts with a letter, ends alphanumeric, may contain _ . -
CONFIG_NAME_PATTERN = "^[a-zA-Z]([a-zA-Z0-9_.-]*[a-zA-Z0-9])?$"
CONFIG_NAME = re.compile(CONFIG_NAME_PATTERN)
MAX_NAME_LENGTH = 64


def check_name(kind: str, name: object, *, path: tuple[str | int, ...] = ()) -> str:
    """Return ``name`` if it is a valid config item name, else raise naming the rule."""
    if not isinstance(name, str) or not CONFIG_NAME.fullmatch(name):
        raise UserError(
            f'{kind} name "{name}" is not valid! Name must start with a letter, end with a '
            "letter or digit, and contain only letters, digits, dash, underscore or dot.",
            path=path,
        )
    if len(name) > MAX_NAME_LENGTH:
        raise UserError(
            f'{kind} name "{name}" is too long ({len(name)} characters); '
            f"the limit is {MAX_NAME_LENGTH}.",
            path=path,
        )
    return name
