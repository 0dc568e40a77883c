"""Drawing a dashboard page: the template environment, the headers every page carries, and
the error page (docs/dashboard.md)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape

from corral import __version__
from corral.api.guard import guarded_principal
from corral.domain.formats.wire_time import as_utc
from corral.errors import CorralError

TEMPLATES = Path(__file__).parent / "templates"
#: Every page: scripts and styles only from /ui/static (htmx adds its own indicator styles),
#: never inside another site's frame.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; style-src 'self' 'unsafe-inline'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


def templates() -> Environment:
    """The page templates: ours, autoescaped (every value shown came from users)."""
    environment = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(default=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["age"] = age
    environment.filters["names"] = lambda values, name: [name(value) for value in values]
    environment.filters["pretty"] = lambda value: json.dumps(value, indent=2, sort_keys=False)
    environment.globals["version"] = __version__
    # More pools than this are chosen by typing a name: a list of 5,000 made pages of 200 KB.
    environment.globals["pool_choices"] = 50
    return environment


def age(moment: datetime | None, now: datetime | None = None) -> str:
    """``3m``, ``2h``, ``4d``: how long ago."""
    if moment is None:
        return ""
    seconds = int(((now or datetime.now(UTC)) - as_utc(moment)).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


# After ``age``: the environment names it as a filter.
PAGES = templates()


def draw(
    request: Request,
    name: str,
    code: int = 200,
    *,
    admin: bool = False,
    csrf: str = "",
    **values: Any,
) -> HTMLResponse:
    """The page ``name`` for the caller the guard found (the header's user name)."""
    principal = guarded_principal(request)
    html = PAGES.get_template(name).render(
        user=principal.username if principal else None,
        admin=admin,
        csrf=csrf,
        path=request.url.path,
        **values,
    )
    return HTMLResponse(html, status_code=code, headers=PAGE_HEADERS)


def error_page(request: Request, err: CorralError) -> HTMLResponse:
    """A dashboard page's user error (a pool not found, a 403) as a page, not JSON."""
    return draw(request, "error.html", err.status_code, status=err.status_code, message=err.message)
