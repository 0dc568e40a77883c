"""Submissions with an ``Idempotency-Key``: a retry answers the first try's workflow and makes
nothing new, also when both tries arrive at once; a key reused for another request is a 409."""

from __future__ import annotations

import threading
from typing import Any

from tests.conftest import Api

WORKFLOW = """workflow:
  name: once
  groups:
  - name: g
    tasks:
    - {name: t, image: busybox, command: [sh, -c, "true"]}
"""


def submit(api: Api, key: str | None, file: str = WORKFLOW) -> tuple[int, Any, dict[str, str]]:
    headers = {"Authorization": f"Bearer {api.token}"}
    if key is not None:
        headers["Idempotency-Key"] = key
    response = api.client.post("/api/pool/default/workflow", json={"file": file}, headers=headers)
    return response.status_code, response.json(), dict(response.headers)


def stored(api: Api) -> list[str]:
    status, body = api.call("GET", "/api/workflow", params={"all_users": True})
    assert status == 200, body
    return sorted(w["name"] for w in body["workflows"])


def test_a_retry_with_the_same_key_answers_the_first_workflow(examples: Api) -> None:
    status, first, headers = submit(examples, "key-1")
    assert status == 200 and first["name"] == "once-1"
    assert "idempotent-replayed" not in headers
    status, again, headers = submit(examples, "key-1")
    assert status == 200
    assert again["name"] == "once-1"
    assert again["overview"] == "http://testserver/ui/workflows/once-1"
    assert headers["idempotent-replayed"] == "true"
    assert stored(examples) == ["once-1"]
    status, other, _ = submit(examples, "key-2")
    assert (status, other["name"]) == (200, "once-2")
    status, plain, _ = submit(examples, None)
    assert (status, plain["name"]) == (200, "once-3")
    assert stored(examples) == ["once-1", "once-2", "once-3"]


def test_a_key_reused_for_another_request_is_refused(examples: Api) -> None:
    assert submit(examples, "shared")[0] == 200
    status, body, _ = submit(examples, "shared", WORKFLOW.replace('"true"', '"false"'))
    assert status == 409
    assert body["message"] == (
        "Idempotency-Key 'shared' was used for another submission (workflow once-1); use a "
        "new key for a new submission."
    )
    assert stored(examples) == ["once-1"]


def test_keys_belong_to_their_user(examples: Api) -> None:
    runtime = examples.runtime
    alice = runtime.tokens.create(name="a", username="alice", roles=["osmo-user"])
    assert submit(examples, "mine")[0] == 200
    as_alice = Api(examples.client, alice, runtime)
    status, body, headers = submit(as_alice, "mine")
    assert (status, body["name"]) == (200, "once-2")
    assert "idempotent-replayed" not in headers


def test_two_tries_at_once_make_one_workflow(examples: Api) -> None:
    answers: list[tuple[int, str]] = []

    def send() -> None:
        status, body, _ = submit(examples, "raced")
        answers.append((status, body.get("name", body.get("message"))))

    threads = [threading.Thread(target=send) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Each try took a number before it was planned; the first to store its workflow wins.
    (winner,) = stored(examples)
    assert answers == [(200, winner)] * 6


def test_a_bad_key_is_refused_naming_the_header(examples: Api) -> None:
    for key in ("has space", "x" * 257):
        status, body, _ = submit(examples, key)
        assert status == 400
        assert body["message"] == (
            "Idempotency-Key: must be 1 to 256 printable ASCII characters without spaces (a "
            "UUID, for example); send a new one for every new submission."
        )
        assert body["field"] == "Idempotency-Key"
    assert stored(examples) == []


def test_dry_runs_and_validations_ignore_the_key(examples: Api) -> None:
    headers = {"Authorization": f"Bearer {examples.token}", "Idempotency-Key": "dry"}
    for params in ({"dry_run": True}, {"validation_only": True}):
        response = examples.client.post(
            "/api/pool/default/workflow", json={"file": WORKFLOW}, headers=headers, params=params
        )
        assert response.status_code == 200, response.text
    status, body, _ = submit(examples, "dry")
    assert (status, body["name"]) == (200, "once-1")
