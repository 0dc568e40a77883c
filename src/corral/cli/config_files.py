"""The files ``corral config`` reads, and errors pointed at their FILE:LINE:COL: a document
given with ``--file``, one edited in $EDITOR, or a bundle directory."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from corral import files
from corral.cli.client import ApiError, Client
from corral.cli.config_args import segment
from corral.cli.output import fail
from corral.domain.configs.config_type import ConfigType
from corral.domain.formats.documents import Position, locate, parse_document

if TYPE_CHECKING:
    from corral.domain.configs.bundles import Origin

KeyPath = tuple[str | int, ...]


@dataclass(frozen=True)
class SourceFile:
    """A document the user gave us, with its text so that errors can point at a line."""

    name: str
    text: str
    document: Any


def read_source(path: str) -> SourceFile:
    if path == "-":
        text = sys.stdin.read()
        return SourceFile("<stdin>", text, parse_document(text, "<stdin>"))
    text, document = files.read_document(Path(path))
    return SourceFile(path, text, document)


def locate_nearest(text: str, path: Sequence[str | int]) -> Position | None:
    """The position of ``path`` in ``text``, or of its nearest ancestor that is there.

    A missing key (``Required key 'backend' is missing``) is not in the file, but the object
    that lacks it is.
    """
    for end in range(len(path), 0, -1):
        found = locate(text, path[:end])
        if found is not None:
            return found
    return None


def fail_at(message: str, filename: str, text: str, path: Sequence[str | int]) -> NoReturn:
    """``FILE:LINE:COL: message`` for the key at ``path`` (``FILE: message`` if not found)."""
    where = locate_nearest(text, path)
    fail(f"{filename}:{where}: {message}" if where else f"{filename}: {message}", located=True)


def fail_in_file(err: ApiError, filename: str, text: str, prefix: KeyPath) -> NoReturn:
    """Report a server error inside the file when it names a field (the item is at ``prefix``)."""
    if not err.path:
        fail(err.message)
    fail_at(err.message, filename, text, [*prefix, *err.path])


def unwrap_item(ctype: ConfigType, name: str, source: SourceFile) -> tuple[Any, KeyPath]:
    """The item ``name`` in a file, and where it sits in the file.

    OSMO's docs write one item as ``{"l40s": {...}}`` for ``config update POD_TEMPLATE l40s``,
    and whole documents as ``{"pools": {"x": {...}}}``; a file holding just the item works too.
    """
    document: Any = source.document
    prefix: KeyPath = ()
    wrapper = ctype.bundle_key
    wrapped = (
        wrapper is not None
        and isinstance(document, dict)
        and set(document) == {wrapper}
        and isinstance(document[wrapper], dict | list)
    )
    if wrapped:
        assert wrapper is not None
        document, prefix = document[wrapper], (wrapper,)
    if (
        isinstance(document, dict)
        and (wrapped or set(document) == {name})
        and name in document
        and isinstance(document[name], dict | list)
    ):
        return document[name], (*prefix, name)
    if isinstance(document, list):
        for index, entry in enumerate(document):
            if isinstance(entry, dict) and entry.get("name") == name:
                return entry, (*prefix, index)
    if wrapped:
        names = (
            [str(e.get("name")) for e in document if isinstance(e, dict)]
            if isinstance(document, list)
            else list(document)
        )
        fail(
            f"{source.name}: no {ctype.label.lower()} '{name}' under '{wrapper}'. "
            f"Items: {', '.join(names) or '(none)'}"
        )
    return document, prefix


def edit_current(client: Client, ctype: ConfigType, name: str | None) -> SourceFile | None:
    """Open the current config in the user's editor; None when the edit changed nothing.

    Only on a terminal: a script without ``--file`` fails at once instead of waiting for input.
    """
    if not sys.stdin.isatty():
        fail("--file is required when not on a terminal")
    editor = os.environ.get("EDITOR") or os.environ.get("VISUAL")
    if not editor:
        fail("--file is required (or set $EDITOR to edit the current config)")
    try:
        current = client.get(segment(ctype, name))
    except ApiError as err:
        if err.status != 404 or name is None:
            raise
        current = {}  # a new item: start from an empty object
    handle, path = tempfile.mkstemp(prefix=f"corral-{ctype.url_segment}-", suffix=".json")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(json.dumps(current, indent=2, ensure_ascii=False) + "\n")
    try:
        status = subprocess.run([*shlex.split(editor), path], check=False).returncode
    except OSError as err:
        fail(f"cannot run the editor {editor!r}: {err}")
    if status != 0:
        fail(f"the editor exited with status {status}; nothing was sent (your text is in {path})")
    text, document = files.read_document(Path(path))
    if document == current:
        Path(path).unlink(missing_ok=True)
        return None
    return SourceFile(path, text, document)


def fail_in_bundle(err: ApiError, origins: dict[tuple[str, str], Origin]) -> NoReturn:
    """Point a bundle error (path ``[section, name, ...]``) at the file that defined the item."""
    path = err.path
    if not path:
        fail(err.message)
    section = str(path[0])
    key, rest = (
        ((section, ""), path[1:])
        if section == "workflow"
        else ((section, str(path[1]) if len(path) > 1 else ""), path[2:])
    )
    origin = origins.get(key)
    if origin is None:
        fail(err.message)
    fail_at(err.message, origin.filename, origin.text, [*origin.path, *rest])
