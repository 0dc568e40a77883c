"""Lists that grow with the number of pools answer a page of them (docs/api.md#pages)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from corral.api.paging import OSMO_CLIENT_HEADER
from tests.conftest import Api

PATHS = ("/api/pool", "/api/pool_quota", "/api/resources")


@pytest.fixture
def database_url(tmp_path: Path) -> str:
    """SQLite only: a page is cut from the list after it is read, the same on either store."""
    return f"sqlite:///{tmp_path / 'corral.db'}"


@pytest.fixture
def many(many_pools: Api) -> Api:
    return many_pools


def every_pool(api: Api) -> list[str]:
    status, body = api.call("GET", "/api/configs/pool")
    assert status == 200, body
    return sorted(body["pools"])


def pools_of(path: str, body: dict[str, Any]) -> list[str]:
    """The pools an answer of ``path`` names, in its order."""
    if path == "/api/pool":
        return list(body["pools"])
    if path == "/api/pool_quota":
        return [pool["name"] for node_set in body["node_sets"] for pool in node_set["pools"]]
    return sorted({entry["pool"] for node in body["resources"] for entry in node["pools"]})


@pytest.mark.parametrize("path", PATHS)
def test_a_list_without_a_page_gets_the_first_50_pools_and_where_the_next_starts(
    many: Api, path: str
) -> None:
    names = every_pool(many)
    status, body = many.call("GET", path)
    assert status == 200, body
    assert body["page"] == {"offset": 0, "limit": 50, "total": len(names), "next_offset": 50}
    shown = pools_of(path, body)
    if path == "/api/resources":  # a pool without nodes has no line
        assert shown and set(shown) <= set(names[:50])
    else:
        assert sorted(shown) == names[:50]


@pytest.mark.parametrize("path", ["/api/pool", "/api/pool_quota"])
def test_following_next_offset_reads_every_pool_once_in_name_order(many: Api, path: str) -> None:
    read: list[str] = []
    offset: int | None = 0
    while offset is not None:
        status, body = many.call("GET", path, params={"offset": offset, "limit": 45})
        assert status == 200, body
        read += sorted(pools_of(path, body))
        offset = body["page"]["next_offset"]
    assert read == every_pool(many)


def test_an_offset_past_the_end_is_an_empty_last_page(many: Api) -> None:
    total = len(every_pool(many))
    assert many.call("GET", "/api/pool", params={"offset": 1000}) == (
        200,
        {"pools": {}, "page": {"offset": 1000, "limit": 50, "total": total, "next_offset": None}},
    )


@pytest.mark.parametrize(
    ("params", "field"),
    [({"limit": 0}, "limit"), ({"limit": 1001}, "limit"), ({"offset": -1}, "offset")],
)
def test_a_page_out_of_bounds_is_refused_naming_the_field(
    many: Api, params: dict[str, int], field: str
) -> None:
    status, body = many.call("GET", "/api/pool_quota", params=params)
    assert status == 400, body
    assert field in body["message"]


@pytest.mark.parametrize("path", PATHS)
def test_osmos_cli_asking_for_no_page_gets_every_pool(many: Api, path: str) -> None:
    names = every_pool(many)
    status, body = many.call("GET", path, headers={OSMO_CLIENT_HEADER: "6.0.0"})
    assert status == 200, body
    assert body["page"] == {"offset": 0, "limit": None, "total": len(names), "next_offset": None}
    if path != "/api/resources":
        assert sorted(pools_of(path, body)) == names


def test_unused_nodes_are_listed_on_the_last_page_only(many: Api) -> None:
    total = len(every_pool(many))
    first = many.call("GET", "/api/resources", params={"all": "true", "limit": 10})[1]
    last = many.call("GET", "/api/resources", params={"all": "true", "offset": total - 10})[1]
    unused = {node["hostname"] for node in last["resources"] if not node["pools"]}
    assert unused, "the A100, H100 and GB200 nodes serve no pool here"
    assert not [node for node in first["resources"] if not node["pools"]]
    assert last["page"]["next_offset"] is None
