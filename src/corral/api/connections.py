"""What one TCP connection may cost the server, enforced before a request reaches the app.

uvicorn's HTTP protocol (httptools) keeps every header byte a client sends until the header
section ends, and waits forever for it: a few requests with 32 MiB headers held a gigabyte, and
connections that sent a byte now and then were never closed. This protocol bounds, per
connection and before any authentication:

- **header size**: a request head (request line and headers) longer than ``max_header_bytes``
  is answered 431 as soon as the bytes received pass it; nothing beyond is kept;
- **header time**: a head must be complete within ``header_timeout`` seconds of its first byte
  (or of the connection, for a client that sends nothing): else 408 and the connection closes;
- **body time**: a body that stops arriving for ``body_timeout`` seconds gets 408 (time the
  server itself stopped reading, while the app is busy, does not count);
- **connections per client address**: a connection beyond ``max_connections_per_client`` open
  ones from the same address is answered 429 at once.

A refusal is sent, the connection half-closed, and what the client still sends is read and
dropped for a moment (a lingering close): a client still writing its oversized head then reads
the answer instead of a connection reset.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from http import HTTPStatus
from typing import Any, ClassVar

from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from corral.api.connection_limits import ConnectionLimits

_HEAD_END = b"\r\n\r\n"
#: How long a refused connection keeps reading (and dropping) what the client still sends.
LINGER_SECONDS = 2.0


def bounded_protocol(limits: ConnectionLimits) -> type[HttpToolsProtocol]:
    """The HTTP protocol class for uvicorn (``Config(http=...)``) under ``limits``; its
    connections count per client address among themselves."""
    return type(
        "BoundedHttpProtocol",
        (BoundedHttpProtocol,),
        {"limits": limits, "open_per_client": Counter()},
    )


class BoundedHttpProtocol(HttpToolsProtocol):
    limits: ClassVar[ConnectionLimits]
    open_per_client: ClassVar[Counter[str]]

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._peer = ""
        self._head_open = True  # bytes now belong to a request head
        self._head_bytes = 0
        self._tail = b""  # the last bytes of the head so far (its end may span two reads)
        self._timer: asyncio.TimerHandle | None = None
        self._refused = False

    # -- the connection ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._peer = self.client[0] if self.client else ""
        self.open_per_client[self._peer] += 1
        limit = self.limits.max_connections_per_client
        if self.open_per_client[self._peer] > limit:
            self._refuse(
                HTTPStatus.TOO_MANY_REQUESTS,
                f"Too many open connections from {self._peer} (this server allows {limit} per "
                "address); reuse or close the ones you have.",
            )
            return
        self._arm(self.limits.header_timeout, self._head_timed_out)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self.open_per_client[self._peer] -= 1
        if self.open_per_client[self._peer] <= 0:
            del self.open_per_client[self._peer]
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # lingering: read and dropped
        if self._head_open and not self._head_within_limit(data):
            return
        super().data_received(data)

    # -- parser callbacks ----------------------------------------------------------------

    def on_headers_complete(self) -> None:
        self._head_open = False
        self._arm(self.limits.body_timeout, self._body_timed_out)
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        self._arm(self.limits.body_timeout, self._body_timed_out)
        super().on_body(body)

    def on_message_complete(self) -> None:
        self._disarm()  # the keep-alive timeout covers the wait for the next request
        self._head_open = True
        self._head_bytes = 0
        self._tail = b""
        super().on_message_complete()

    # -- the limits ----------------------------------------------------------------------

    def _head_within_limit(self, data: bytes) -> bool:
        """Count the head's bytes in ``data``; False (and answered 431) past the limit."""
        if self._timer is None:  # the first bytes of a request on a kept-alive connection
            self._arm(self.limits.header_timeout, self._head_timed_out)
        across = (self._tail + data[:3]).find(_HEAD_END)
        if across >= 0:  # the head ends in the first bytes, begun in the last read
            self._head_bytes += across + len(_HEAD_END) - len(self._tail)
        else:
            end = data.find(_HEAD_END)
            self._head_bytes += len(data) if end < 0 else end + len(_HEAD_END)
        self._tail = (self._tail + data[-3:])[-3:]
        limit = self.limits.max_header_bytes
        if self._head_bytes <= limit:
            return True
        self._refuse(
            HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
            f"The request's headers are larger than this server's limit of {limit:,} bytes; "
            "send fewer or shorter headers (corral server --max-header-bytes).",
        )
        return False

    def _head_timed_out(self) -> None:
        self._timer = None
        if self._head_bytes == 0 and self.cycle is None:
            self.transport.close()  # connected and never said anything
            return
        self._refuse(
            HTTPStatus.REQUEST_TIMEOUT,
            f"The request's headers did not arrive within {self.limits.header_timeout:g} s "
            "(corral server --header-timeout).",
        )

    def _body_timed_out(self) -> None:
        self._timer = None
        if self.flow.read_paused:  # the server stopped reading, not the client sending
            self._arm(self.limits.body_timeout, self._body_timed_out)
            return
        if self.cycle is not None and self.cycle.response_started:
            self.transport.close()
            return
        self._refuse(
            HTTPStatus.REQUEST_TIMEOUT,
            f"No part of the request body arrived for {self.limits.body_timeout:g} s "
            "(corral server --body-timeout).",
        )

    def _refuse(self, status: HTTPStatus, message: str) -> None:
        """Answer ``status`` with corral's error body, then close: half-close at once, read
        and drop what still comes for ``LINGER_SECONDS``, then close for good."""
        self._refused = True
        self._disarm()
        self.flow.resume_reading()  # to drop what still comes
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.disconnected = True  # the app's request is abandoned with the connection
            self.cycle.message_event.set()
        body = json.dumps({"message": message, "error_code": status.name}).encode()
        head = (
            f"HTTP/1.1 {status.value} {status.phrase}\r\n"
            "content-type: application/json\r\n"
            f"content-length: {len(body)}\r\n"
            "connection: close\r\n\r\n"
        ).encode("ascii")
        transport = self.transport
        transport.write(head + body)
        if transport.can_write_eof():
            transport.write_eof()
        self._timer = self.loop.call_later(LINGER_SECONDS, transport.close)

    def _arm(self, seconds: float, then: Any) -> None:
        self._disarm()
        self._timer = self.loop.call_later(seconds, then)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
