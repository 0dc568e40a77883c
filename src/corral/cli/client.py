"""A small HTTP client for the corral API: finds the URL and token, turns errors into text."""

from __future__ import annotations

import os
import time
import uuid
from typing import Any
from urllib.parse import urlsplit

import httpx

from corral.cli.sign_in import current_token
from corral.credentials import credentials_file, known_servers, server_url

#: How often the CLI sends a submission in all, waiting RETRY_SECONDS x attempt in between.
SUBMIT_ATTEMPTS = 4
RETRY_SECONDS = 0.5
#: Answers that mean "the request may not have reached corral": sent again.
RETRIED_STATUSES = (502, 503, 504)

#: Pools an error names before it says how many more there are.
USABLE_POOLS_NAMED = 10


class ApiError(Exception):
    """An error answer from the server (or no answer at all)."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(body.get("message", f"HTTP {status}"))
        self.status = status
        self.body = body

    @property
    def message(self) -> str:
        return str(self.body.get("message", f"HTTP {self.status}"))

    @property
    def path(self) -> list[str | int]:
        path = self.body.get("path")
        return list(path) if isinstance(path, list) else []


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be the server's address (None: it can)."""
    parsed = urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        return "it has no http:// or https:// in front"
    if parsed.path.rstrip("/"):
        return f"it has a path ({parsed.path}); corral adds /api/... itself"
    return None


class Client:
    def __init__(
        self, url: str | None = None, token: str | None = None, timeout: float = 30.0
    ) -> None:
        self.url = (url or server_url()).rstrip("/")
        problem = url_problem(self.url)
        if problem:
            raise ApiError(
                0,
                {
                    "message": f"CORRAL_URL={self.url} is not a server address: {problem}. "
                    "Write it as http://HOST:PORT, for example http://127.0.0.1:8000."
                },
            )
        #: Where the token came from, for a refusal to say: given, the environment, the file.
        self.token_source = (
            "given" if token else "env" if os.environ.get("CORRAL_TOKEN") else "file"
        )
        self.token = token or os.environ.get("CORRAL_TOKEN") or current_token(self.url)
        self._http = httpx.Client(base_url=self.url, timeout=timeout)

    def request(
        self, method: str, path: str, *, json: Any = None, params: dict[str, Any] | None = None
    ) -> Any:
        response = self._send(method, path, json=json, params=params)
        return response.json() if response.content else None

    def submit(self, path: str, *, json: Any = None, params: dict[str, Any] | None = None) -> Any:
        """POST a submission with a new ``Idempotency-Key``, sent again with every retry: when
        the connection fails or the server answers 502/503/504, the same request is sent again
        (up to :data:`SUBMIT_ATTEMPTS` times), and a retry of a submission that was stored
        after all answers its workflow instead of making a second one."""
        headers = {"Idempotency-Key": uuid.uuid4().hex}
        for attempt in range(1, SUBMIT_ATTEMPTS + 1):
            try:
                response = self._send(
                    "POST", path, json=json, params=params, headers=headers, raw_errors=True
                )
            except httpx.TransportError as err:
                if attempt == SUBMIT_ATTEMPTS:
                    raise self._unreachable(err) from None
            else:
                if response.status_code not in RETRIED_STATUSES or attempt == SUBMIT_ATTEMPTS:
                    break
            time.sleep(RETRY_SECONDS * attempt)
        if response.status_code >= 400:
            raise ApiError(response.status_code, _error_body(response, self))
        return response.json() if response.content else None

    def get_text(self, path: str, **params: Any) -> str:
        """A plain-text answer (logs)."""
        return self._send("GET", path, params=_present(params)).text

    def _send(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        raw_errors: bool = False,
    ) -> httpx.Response:
        """The answer; an ApiError for an error answer or none at all (with ``raw_errors``:
        the error answer itself, and httpx's TransportError when there is none)."""
        sent = {**(headers or {})}
        if self.token:
            sent["Authorization"] = f"Bearer {self.token}"
        try:
            response = self._http.request(method, path, json=json, params=params, headers=sent)
        except httpx.HTTPError as err:
            if raw_errors and isinstance(err, httpx.TransportError):
                raise
            raise self._unreachable(err) from None
        if response.status_code >= 400 and not raw_errors:
            raise ApiError(response.status_code, _error_body(response, self))
        return response

    def _unreachable(self, err: httpx.HTTPError) -> ApiError:
        others = [url for url in known_servers() if url != self.url]
        known = f" The credentials file also knows {', '.join(others)}." if others else ""
        return ApiError(
            0,
            {
                "message": f"cannot reach corral at {self.url}: {err}. Is `corral server` "
                f"running? Set CORRAL_URL to point elsewhere.{known}"
            },
        )

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params=_present(params))

    def usable_pools_text(self) -> str:
        """``pools you may use: a, b`` (from the caller's profile), for errors naming a pool;
        the first ten and how many more, when there are more."""
        pools = self.get("/api/profile/settings")["pools"]
        if not pools:
            return "you may use no pool"
        named = ", ".join(pools[:USABLE_POOLS_NAMED])
        more = len(pools) - USABLE_POOLS_NAMED
        rest = f" and {more:,} more (corral pool list shows them)" if more > 0 else ""
        return f"pools you may use: {named}{rest}"


def _present(params: dict[str, Any]) -> dict[str, Any] | None:
    return {k: v for k, v in params.items() if v is not None} or None


def _error_body(response: httpx.Response, client: Client) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        body = {"message": response.text or f"HTTP {response.status_code}"}
    if not isinstance(body, dict):
        body = {"message": str(body)}
    if response.status_code == 401 and not client.token:
        body["message"] = (
            f"{body.get('message', '')} No token found: log in (corral login {client.url}), "
            f"set CORRAL_TOKEN, or run the CLI as the user who started the server "
            f"({credentials_file()})."
        )
    elif (
        response.status_code == 401
        and client.token_source != "given"
        and "unknown or revoked" in str(body.get("message"))
    ):
        source = (
            "CORRAL_TOKEN"
            if client.token_source == "env"
            else f"the token for {client.url} in {credentials_file()}"
        )
        body["message"] = (
            f"{body['message']} It came from {source}. Ask an admin for a new one (corral user "
            "token YOUR_NAME); on the server's machine, the admin token is in the credentials "
            "file of the user who started `corral server`."
        )
    return body
