"""The OpenAPI document is true (issue 13, item 12): schemathesis generates requests for every
operation from the document the server serves, valid ones and invalid ones, and sends each with
an admin token and with a pool user's token to a real ``corral server`` process over HTTP.

Every answer must be free of 5xx and match the document: a declared status code, the declared
content type and the declared response schema. At least 5,000 requests are sent; the counts are
printed (``pytest -s``)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import Case, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import Failure, FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.conftest import LiveServer, start_server

MIN_REQUESTS = 5_000
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
MODES = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)


@dataclass
class Tally:
    """Requests sent, per token and per (token, status); every failed check, once per kind."""

    sent: Counter[str] = field(default_factory=Counter)
    statuses: Counter[tuple[str, int]] = field(default_factory=Counter)
    failures: dict[str, str] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.sent.values())


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(tmp_path_factory.mktemp("schemathesis"), "--demo")
    yield live
    live.stop()


def pool_user_token(server: LiveServer, admin: dict[str, str]) -> str:
    """A user with the demo's pool role only (no config or user administration)."""
    with httpx.Client(base_url=server.url, headers=admin, timeout=10) as client:
        made = client.post("/api/auth/user", json={"username": "fuzzer", "roles": ["osmo-user"]})
        assert made.status_code == 201, made.text
        minted = client.post("/api/auth/user/fuzzer/token", json={"name": "fuzz"})
        assert minted.status_code == 201, minted.text
        return str(minted.json()["token"])


def send(case: Case, server: LiveServer, session: requests.Session, token: str) -> Any:
    headers = {"Authorization": f"Bearer {token}"}
    response = case.call(base_url=server.url, session=session, headers=headers, timeout=30)
    case.validate_response(response, checks=CHECKS, headers=headers)
    return response


def fuzz_operation(
    operation: Any,
    server: LiveServer,
    tokens: dict[str, str],
    tally: Tally,
    examples: int,
) -> None:
    strategy = st.one_of([operation.as_strategy(generation_mode=mode) for mode in MODES])
    session = requests.Session()

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.generate],
    )
    @given(case=strategy)
    def run(case: Case) -> None:
        for who, token in tokens.items():
            tally.sent[who] += 1
            try:
                response = send(case, server, session, token)
                tally.statuses[(who, response.status_code)] += 1
            except FailureGroup as group:
                for failure in group.exceptions:
                    kind = f"{operation.label} as {who}: {failure.title}"
                    tally.failures.setdefault(kind, f"{case.as_curl_command()}\n{failure}")
            except Failure as failure:
                kind = f"{operation.label} as {who}: {failure.title}"
                tally.failures.setdefault(kind, f"{case.as_curl_command()}\n{failure}")

    run()


def test_every_operation_keeps_to_the_document(server: LiveServer) -> None:
    admin = {"Authorization": f"Bearer {server.token}"}
    document = httpx.get(f"{server.url}/openapi.json", headers=admin, timeout=10).json()
    schema = schemathesis.openapi.from_dict(document)
    operations = [result.ok() for result in schema.get_all_operations()]
    tokens = {"admin": server.token, "pool user": pool_user_token(server, admin)}
    tally = Tally()
    examples = math.ceil(MIN_REQUESTS / len(operations) / len(tokens))
    rounds = 0
    while tally.total < MIN_REQUESTS and rounds < 4:  # small input spaces end a round early
        rounds += 1
        for operation in operations:
            if rounds == 1 or tally.total < MIN_REQUESTS:
                fuzz_operation(operation, server, tokens, tally, examples)
    print(
        f"\nschemathesis: {len(operations)} operations, {tally.total} requests "
        f"({dict(tally.sent)}) in {rounds} round(s); "
        f"statuses by token {dict(sorted(tally.statuses.items()))}"
    )
    assert httpx.get(f"{server.url}/health", timeout=5).status_code == 200
    assert tally.failures == {}, "\n\n".join(f"{k}\n{v}" for k, v in tally.failures.items())
    assert tally.total >= MIN_REQUESTS
    assert all(tally.sent[who] == tally.total / len(tokens) for who in tokens)


def test_the_document_declares_400_not_422(server: LiveServer) -> None:
    admin = {"Authorization": f"Bearer {server.token}"}
    document = httpx.get(f"{server.url}/openapi.json", headers=admin, timeout=10).json()
    codes = {
        (path, method): set(operation["responses"])
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
    }
    assert not [key for key, found in codes.items() if "422" in found]
    assert codes[("/api/configs/{segment}/{name}", "put")] >= {"200", "400", "401", "403", "413"}
    assert codes[("/health", "get")] == {"200", "503"}
    assert "ErrorBody" in document["components"]["schemas"]
