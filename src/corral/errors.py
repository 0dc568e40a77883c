"""Errors that cross layers. Each carries the HTTP status the API answers with.

A user mistake is a 4xx with ``{"message", "error_code"}`` and, where one is known, the
``path`` (keys and list indexes) inside the submitted document so that clients can point at a line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: The most characters of a value an error quotes back: a 20,000-character key or key id
#: sent back whole makes the answer as large as the attack.
SHOWN_CHARS = 64


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """``value`` as an error message quotes it: cut to ``limit`` characters, saying how long it
    was when cut."""
    text = str(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text):,} characters)"


def quoted(value: object, limit: int = SHOWN_CHARS) -> str:
    """``'value'`` (Python's quoting, so control characters show as escapes), cut as
    :func:`shown` cuts it."""
    text = str(value)
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}… ({len(text):,} characters)"


class CorralError(Exception):
    """Base class: a failure the caller can act on."""

    status_code = 400
    error_code = "USER"

    def __init__(self, message: str, *, path: Sequence[str | int] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.path: tuple[str | int, ...] = tuple(path)

    @property
    def field(self) -> str | None:
        """The dotted form of ``path`` (for messages), or None when no field is concerned."""
        return ".".join(shown(step) for step in self.path) or None

    def __reduce__(self) -> tuple[Any, ...]:
        # Errors cross process boundaries (the sandbox workers): rebuild without calling
        # ``__init__``, whose keyword-only arguments differ per subclass.
        return (_rebuild, (type(self), self.args, dict(self.__dict__)))

    def under(self, *prefix: str | int) -> CorralError:
        """The same error with ``prefix`` put in front of its path."""
        self.path = (*prefix, *self.path)
        return self

    def to_dict(self) -> dict[str, Any]:
        """The JSON error body; the message starts with the field it concerns."""
        if not self.path:
            return {"message": self.message, "error_code": self.error_code}
        return {
            "message": f"{self.field}: {self.message}",
            "error_code": self.error_code,
            "field": self.field,
            "path": [step if isinstance(step, int) else shown(step) for step in self.path],
        }


def _rebuild(cls: type[CorralError], args: tuple[Any, ...], state: dict[str, Any]) -> CorralError:
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


class UserError(CorralError):
    """The request is invalid (bad value, bad reference, bad syntax)."""


class NotFoundError(CorralError):
    status_code = 404
    error_code = "NOT_FOUND"


class ConflictError(CorralError):
    """The write was based on a revision that is no longer current."""

    status_code = 409
    error_code = "CONFLICT"


class UnauthorizedError(CorralError):
    status_code = 401
    error_code = "UNAUTHORIZED"


class ForbiddenError(CorralError):
    status_code = 403
    error_code = "FORBIDDEN"


class PayloadTooLargeError(CorralError):
    status_code = 413
    error_code = "TOO_LARGE"


class TooManyRequestsError(CorralError):
    """The caller holds as much of something as one caller may; it must give some back."""

    status_code = 429
    error_code = "TOO_MANY_REQUESTS"


class UnavailableError(CorralError):
    """The server is at a limit for now; the same request may succeed later."""

    status_code = 503
    error_code = "UNAVAILABLE"
