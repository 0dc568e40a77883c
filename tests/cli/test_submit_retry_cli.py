"""`corral workflow submit` when the reply is lost: the CLI sends the submission again with the
same Idempotency-Key, and the server answers the workflow the first try made (one workflow)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.conftest import LiveServer


class LosesFirstReply:
    """A TCP proxy to the server that passes the first request on, then closes the client's
    connection instead of passing the reply back; every later connection goes through."""

    def __init__(self, target: str) -> None:
        parts = urlsplit(target)
        self.target = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.connections = 0
        self.lost_replies = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            drop = self.connections == 1
            server = socket.create_connection(self.target)
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()
            threading.Thread(target=self._reply, args=(server, client, drop), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass

    def _reply(self, server: socket.socket, client: socket.socket, drop: bool) -> None:
        if drop:
            server.recv(65536)  # the server answered: the submission is stored
            self.lost_replies += 1
            for closed in (client, server):  # shutdown first: another thread reads from them
                closed.shutdown(socket.SHUT_RDWR)
                closed.close()
            return
        self._pump(server, client)

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def proxy(live_server: LiveServer) -> Iterator[LosesFirstReply]:
    found = LosesFirstReply(live_server.url)
    yield found
    found.close()


def test_a_lost_reply_is_retried_without_a_second_workflow(
    live_server: LiveServer, proxy: LosesFirstReply, tmp_path: Path
) -> None:
    workflow = tmp_path / "once.yaml"
    workflow.write_text(
        "workflow:\n  name: once\n  groups:\n  - name: g\n    tasks:\n"
        '    - {name: t, image: busybox, command: [sh, -c, "true"]}\n'
    )
    done = live_server.cli(
        "workflow",
        "submit",
        str(workflow),
        "--pool",
        "default",
        extra_env={"CORRAL_URL": proxy.url, "CORRAL_TOKEN": live_server.token},
    )
    assert done.returncode == 0, done.stderr
    assert proxy.lost_replies == 1 and proxy.connections == 2
    assert "Workflow ID        - once-1" in done.stdout
    listed = httpx.get(
        f"{live_server.url}/api/workflow",
        headers={"Authorization": f"Bearer {live_server.token}"},
        params={"all_users": True},
    ).json()
    assert [w["name"] for w in listed["workflows"]] == ["once-1"]
