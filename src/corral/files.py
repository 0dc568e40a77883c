"""Reading config files and directories from disk (shared by the CLI and ``--demo``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from corral.domain.formats.documents import parse_document
from corral.errors import UserError

if TYPE_CHECKING:
    from corral.domain.configs.bundles import Origin

CONFIG_SUFFIXES = (".json", ".yaml", ".yml")


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"{path}: cannot be read ({err})") from None


def read_private_text(path: Path, label: str) -> str:
    """The stripped text of a file of secrets that only this user may read (0600); ``label``
    names where the path came from (a flag, a variable) in the errors."""
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"cannot read {label} {path}: {getattr(err, 'strerror', err)}") from None
    if mode & 0o077:
        raise UserError(
            f"{label} {path} may be read by other users (mode {mode & 0o777:o}); "
            f"make it yours alone: chmod 600 {path}"
        )
    return text


def read_document(path: Path) -> tuple[str, Any]:
    """The text of ``path`` and its parsed content (syntax errors name file:line:column)."""
    text = read_text(path)
    return text, parse_document(text, str(path))


def config_files(path: Path) -> list[Path]:
    """``path`` itself, or the config files directly inside the directory ``path``, sorted."""
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.is_file() and p.suffix in CONFIG_SUFFIXES)
    return [path]


def read_bundle_directory(
    path: Path,
) -> tuple[dict[str, Any], dict[tuple[str, str], Origin]]:
    from corral.domain.configs.bundles import merge_files  # the config models: only here

    documents = []
    for file in config_files(path):
        text, document = read_document(file)
        documents.append((str(file), text, document))
    return merge_files(documents)
