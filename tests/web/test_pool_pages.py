"""With more pools than a page holds, the overview, the pools page and the config page show one
page of them and a pager, and the pool filters take a typed name (docs/dashboard.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import Api
from tests.web.test_pages import logged_in

TOTAL = 121  # default and team-000 ... team-119


@pytest.fixture
def database_url(tmp_path: Path) -> str:
    """SQLite only: a page is cut from the list after it is read, the same on either store."""
    return f"sqlite:///{tmp_path / 'corral.db'}"


def rows(html: str) -> list[str]:
    return re.findall(r'<tr data-pool="([^"]+)"', html)


def pager(html: str) -> str:
    found = re.search(r'<p class="pager" id="pager">(.*?)</p>', html, re.S)
    assert found is not None, "no pager"
    return " ".join(found.group(1).split())


def test_the_pools_page_lists_50_pools_and_pages_through_the_rest(many_pools: Api) -> None:
    client = logged_in(many_pools)
    first = client.get("/ui/pools").text
    assert rows(first) == ["default", *(f"team-{index:03d}" for index in range(49))]
    assert pager(first) == (
        'Showing pools 1 to 50 of 121. <a href="/ui/pools?pool=default&amp;offset=50" '
        'rel="next">next →</a>'
    )
    last = client.get("/ui/pools", params={"offset": 100, "pool": "team-110"}).text
    assert rows(last) == [f"team-{index:03d}" for index in range(99, 120)]
    assert pager(last) == (
        'Showing pools 101 to 121 of 121. <a href="/ui/pools?pool=team-110&amp;offset=50" '
        'rel="prev">← previous</a>'
    )
    assert "What pool team-110 renders" in last
    past = client.get("/ui/pools", params={"offset": 500}).text
    assert f"No pool on this page: there are {TOTAL}." in past


def test_the_overview_pages_its_pools(many_pools: Api) -> None:
    client = logged_in(many_pools)
    assert pager(client.get("/ui").text) == (
        'Showing pools 1 to 50 of 121. <a href="/ui?offset=50" rel="next">next →</a>'
    )
    assert (
        "/ui?offset=" not in client.get("/ui", params={"offset": 100}).text.split('rel="prev"')[1]
    )


def test_the_config_page_shows_a_page_of_the_items_and_says_how_to_see_them_whole(
    many_pools: Api,
) -> None:
    page = logged_in(many_pools).get("/ui/config", params={"type": "POOL"}).text
    assert f"<p>{TOTAL} items, these 50 shown: <code>default</code>, <code>team-000</code>" in page
    assert "<code>corral config show POOL</code> prints it whole" in page
    assert pager(page).startswith("Showing pools 1 to 50 of 121.")


# (The workflows page lists the pools that have workflows: none here.)
@pytest.mark.parametrize("path", ["/ui/queue", "/ui/topology"])
def test_a_pool_is_typed_not_picked_from_a_list_of_121(many_pools: Api, path: str) -> None:
    page = logged_in(many_pools).get(path).text
    assert '<select name="pool">' not in page
    assert re.search(
        r'<input name="pool" value="[^"]*" size="16" placeholder="[^"]*\(121 pools\)"', page
    )


def test_with_few_pools_the_filters_are_lists_and_there_is_no_pager(examples: Api) -> None:
    client = logged_in(examples)
    assert '<select name="pool">' in client.get("/ui/queue").text
    assert 'class="pager"' not in client.get("/ui/pools").text
