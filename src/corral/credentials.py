"""Where the CLI finds its token: a 0600 file in the user's config directory, keyed by URL."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import platformdirs

DEFAULT_URL = "http://127.0.0.1:8000"
_ANY_ADDRESS = {"0.0.0.0", "::", "", "localhost"}


def config_dir() -> Path:
    override = os.environ.get("CORRAL_CONFIG_DIR")
    return Path(override) if override else Path(platformdirs.user_config_dir("corral"))


def credentials_file() -> Path:
    return config_dir() / "credentials.json"


def server_key(url: str) -> str:
    """One key per server: ``http://localhost:8000/`` and ``http://0.0.0.0:8000`` are the same."""
    parts = urlsplit(url if "//" in url else f"http://{url}")
    host = parts.hostname or ""
    if host in _ANY_ADDRESS:
        host = "127.0.0.1"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.scheme or 'http'}://{host}:{port}"


def known_servers() -> list[str]:
    """The servers the credentials file holds a token for (by their key), in its order."""
    servers = _read().get("servers")
    return [str(key) for key in servers] if isinstance(servers, dict) else []


def server_url() -> str:
    """The server the CLI talks to: ``CORRAL_URL``; else the one server the credentials file
    names (a server started with ``--port 9000`` on this machine wrote it there); else
    :data:`DEFAULT_URL`."""
    configured = os.environ.get("CORRAL_URL")
    if configured:
        return configured.rstrip("/")
    known = known_servers()
    return known[0] if len(known) == 1 else DEFAULT_URL


def read_token(url: str) -> str | None:
    token = read_entry(url).get("token")
    return token if isinstance(token, str) else None


def read_entry(url: str) -> dict[str, Any]:
    """What the credentials file holds for ``url``: its ``token``, and for a single sign-on
    the ``refresh_token``, ``token_endpoint``, ``client_id`` and ``expires_at`` as well."""
    entry = _read().get("servers", {}).get(server_key(url), {})
    return dict(entry) if isinstance(entry, dict) else {}


def store_token(url: str, token: str) -> Path:
    """Save ``token`` for ``url``; the file is created with mode 0600 and kept so."""
    return store_entry(url, {"token": token})


def store_entry(url: str, entry: dict[str, Any]) -> Path:
    """Save ``entry`` for ``url`` in place of what was there (mode 0600)."""
    data = _read()
    servers = data.get("servers")
    if not isinstance(servers, dict):
        servers = data["servers"] = {}
    servers[server_key(url)] = entry
    return _write(data)


def forget(url: str) -> bool:
    """Remove what the file holds for ``url``: whether it held anything."""
    data = _read()
    servers = data.get("servers")
    if not isinstance(servers, dict) or servers.pop(server_key(url), None) is None:
        return False
    _write(data)
    return True


def _read() -> dict[str, Any]:
    try:
        data = json.loads(credentials_file().read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write(data: dict[str, Any]) -> Path:
    path = credentials_file()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        json.dump(data, handle, indent=2)
    os.chmod(path, 0o600)
    return path
