"""The dashboard in a real browser (Playwright driving Debian's chromium, headless) against a
real ``corral server --demo``: log in, the seed-003 placements on every page, cancel, a user
who may not use a pool, live updates. ``CORRAL_SCREENSHOTS=docs/images`` keeps the screenshots
docs/dashboard.md shows."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import REPO, LiveServer, start_server
from tests.web.browser import chromium

SCREENSHOTS_ENV = "CORRAL_SCREENSHOTS"
HELD_SECONDS = 300  # longer than this module runs: the held workflows run until canceled


def example(name: str, sleep: int, new_name: str) -> str:
    """A seed-003 example workflow whose tasks sleep ``sleep`` seconds, renamed."""
    text = (REPO / "examples" / "workflows" / name).read_text()
    name_line = next(line for line in text.splitlines() if line.startswith("  name: "))
    return text.replace("sleep 5", f"sleep {sleep}").replace(name_line, f"  name: {new_name}", 1)


class Cluster:
    """The server, an admin client, and the workflows held running for the checks."""

    def __init__(self, server: LiveServer) -> None:
        self.server = server
        self.api = httpx.Client(
            base_url=server.url,
            headers={"Authorization": f"Bearer {server.token}"},
            timeout=30,
        )

    def submit(self, file: str, pool: str = "nvl72") -> str:
        answer = self.api.post(f"/api/pool/{pool}/workflow", json={"file": file})
        assert answer.status_code == 200, answer.text
        return str(answer.json()["name"])

    def workflow(self, workflow_id: str) -> dict[str, Any]:
        answer = self.api.get(f"/api/workflow/{workflow_id}")
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    def wait_placed(self, workflow_id: str) -> dict[str, str]:
        """Each task's node once every task of the workflow is running."""
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            tasks = [t for g in self.workflow(workflow_id)["groups"] for t in g["tasks"]]
            if all(t["status"] == "RUNNING" and t["node"] for t in tasks):
                return {t["name"]: t["node"] for t in tasks}
            time.sleep(0.3)
        raise AssertionError(f"{workflow_id} did not start: {self.workflow(workflow_id)}")

    def cancel_all(self) -> None:
        """Cancel every workflow and wait until they ended: local tasks outlive their server
        (as pods do), so a held task left running would sleep on after the test."""
        rows = self.api.get("/api/workflow", params={"all_users": True}).json()["workflows"]
        for row in rows:
            self.api.post(f"/api/workflow/{row['name']}/cancel")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            rows = self.api.get("/api/workflow", params={"all_users": True}).json()["workflows"]
            if all(row["status"] not in ("PENDING", "RUNNING", "WAITING") for row in rows):
                return
            time.sleep(0.3)
        raise AssertionError(f"workflows still alive after cancel: {rows}")

    def forecast_of(self, workflow_id: str) -> dict[str, Any]:
        """Its queue entry once the controller has forecast it."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for entry in self.api.get("/api/queue").json()["entries"]:
                if entry.get("workflow_id") == workflow_id and entry["forecast_at"]:
                    return dict(entry)
            time.sleep(0.3)
        raise AssertionError(f"{workflow_id} was not forecast: {self.api.get('/api/queue').text}")

    def clique_of(self, node: str) -> str:
        answer = self.api.get(f"/api/resources/{node}")
        return str(answer.json()["resources"][0]["labels"]["nvidia.com/gpu-clique"])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    # A tick of 0.1 s forecasts at most every 6 s (60 ticks): the queue's bands come quickly.
    server = start_server(tmp_path_factory.mktemp("dashboard"), "--demo", "--tick-seconds", "0.1")
    found = Cluster(server)
    try:
        yield found
        found.cancel_all()
    finally:  # a failing teardown must not leave the server running
        found.api.close()
        server.stop()


@pytest.fixture(scope="module")
def held(cluster: Cluster) -> dict[str, dict[str, str]]:
    """Seed 003's use cases 1 and 2, running: workflow -> task -> node."""
    rack = cluster.submit(example("nvl72-single-rack.yaml", HELD_SECONDS, "held-rack"))
    pair = cluster.submit(example("nvl72-two-instances.yaml", HELD_SECONDS, "held-pair"))
    return {rack: cluster.wait_placed(rack), pair: cluster.wait_placed(pair)}


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as found:
        yield found


def log_in(browser: Any, server: LiveServer, token: str, start: str = "/ui") -> Any:
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    page.set_default_timeout(20_000)
    page.goto(server.url + start)
    assert "/ui/login" in page.url  # no session yet: the login page
    page.fill("#token", token)
    page.click("button[type=submit]")
    page.wait_for_url(server.url + start)
    return page


def screenshot(page: Any, name: str, tmp_path: Path, *, full_page: bool = True) -> None:
    folder = Path(os.environ.get(SCREENSHOTS_ENV) or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"dashboard-{name}.png"), full_page=full_page)


def test_log_in_and_out(cluster: Cluster, browser: Any, tmp_path: Path) -> None:
    page = browser.new_page()
    page.goto(cluster.server.url + "/ui/workflows")
    page.fill("#token", "corral_not-a-token")
    page.click("button[type=submit]")
    assert page.locator("[role=alert]").inner_text() == "The bearer token is unknown or revoked."
    screenshot(page, "login", tmp_path)
    page.fill("#token", cluster.server.token)
    page.click("button[type=submit]")
    page.wait_for_url(cluster.server.url + "/ui/workflows")
    assert page.locator("#user").inner_text() == "admin (admin)"
    page.click("text=Log out")
    page.wait_for_url("**/ui/login")
    page.goto(cluster.server.url + "/ui")
    assert "/ui/login" in page.url
    page.close()


def test_every_page_shows_the_seed_003_placements(
    cluster: Cluster, held: dict[str, dict[str, str]], browser: Any, tmp_path: Path
) -> None:
    rack, pair = held
    page = log_in(browser, cluster.server, cluster.server.token)

    # Overview: the two workflows run, and pool nvl72 uses their 12 trays' 48 GPUs.
    assert int(page.locator("#count-running").inner_text()) >= 2
    row = page.locator('#pool-gpus tr[data-pool="nvl72"]')
    assert row.locator("td").nth(1).inner_text() == "48"
    screenshot(page, "overview", tmp_path)

    # Pools: nvl72's used GPUs and its topology keys; the rendered template's provenance.
    page.goto(cluster.server.url + "/ui/pools?pool=nvl72")
    cells = page.locator('#pools tr[data-pool="nvl72"]').locator("td")
    assert cells.nth(4).inner_text() == "zone \u203a spine \u203a rack \u203a gpu-clique"
    assert cells.nth(4).locator("code").last.get_attribute("title") == (
        "node label nvidia.com/gpu-clique"
    )
    assert cells.nth(7).inner_text() == "48"
    assert page.locator("#provenance tbody tr").count() > 5
    screenshot(page, "pools", tmp_path)

    # Topology: each held task's node sits in its clique's block, owned by its workflow;
    # use case 1's four tasks share one clique, and each model of use case 2 shares one.
    page.goto(cluster.server.url + "/ui/topology?pool=nvl72")
    for workflow_id, nodes in held.items():
        for node in nodes.values():
            cell = page.locator(f'[data-node="{node}"]')
            assert workflow_id in cell.get_attribute("data-owners").split()
            block = cell.locator("xpath=ancestor::div[@data-domain]")
            assert block.get_attribute("data-domain") == cluster.clique_of(node)
            assert cell.inner_text() == "0/4"
    assert len({cluster.clique_of(node) for node in held[rack].values()}) == 1
    for model in ("model1", "model2"):
        shards = [n for task, n in held[pair].items() if task.startswith(model)]
        assert len({cluster.clique_of(node) for node in shards}) == 1
    owned = page.locator(f'[data-owners~="{rack}"]')
    assert owned.count() == 4
    owned.first.hover()  # highlights every node of the workflow
    assert page.locator(".same-owner").count() == 4
    screenshot(page, "topology", tmp_path)

    # Workflows: both listed as running; the detail page names each task's node and the
    # clique its group landed in.
    page.goto(cluster.server.url + "/ui/workflows?status=running")
    for workflow_id in held:
        assert (
            page.locator(f'tr[data-workflow="{workflow_id}"]').locator("td").nth(1).inner_text()
            == "RUNNING"
        )
    page.goto(cluster.server.url + f"/ui/workflows/{rack}")
    for task, node in held[rack].items():
        assert page.locator(f'#tasks tr[data-task="{task}"] td').nth(3).inner_text() == node
    clique = cluster.clique_of(next(iter(held[rack].values())))
    assert clique in page.locator('svg.dag [data-group="group1"]').text_content()
    screenshot(page, "workflow", tmp_path)
    page.close()


def test_cancel_from_the_workflow_page(cluster: Cluster, browser: Any, tmp_path: Path) -> None:
    doomed = cluster.submit(example("nvl72-single-rack.yaml", HELD_SECONDS, "doomed"))
    cluster.wait_placed(doomed)
    page = log_in(browser, cluster.server, cluster.server.token, f"/ui/workflows/{doomed}")
    page.on("dialog", lambda dialog: dialog.accept())
    page.click("text=Cancel workflow")
    assert page.locator("[role=status]").inner_text() == (
        f"Cancel requested for {doomed}; its tasks are being stopped."
    )
    page.locator("#workflow-status", has_text="FAILED_CANCELED").wait_for(timeout=60_000)
    assert cluster.workflow(doomed)["cancel_requested_by"] == "admin"
    page.close()


def test_a_user_without_access_to_a_pool_does_not_see_it(
    cluster: Cluster, browser: Any, tmp_path: Path
) -> None:
    made = cluster.api.post("/api/auth/user", json={"id": "alice", "roles": ["osmo-user"]})
    assert made.status_code == 200, made.text
    token = cluster.api.post("/api/auth/user/alice/token").json()["token"]
    page = log_in(browser, cluster.server, token)
    assert page.locator("#user").inner_text() == "alice"
    assert page.locator("#pool-gpus tbody td:first-child").all_inner_texts() == ["default"]
    page.goto(cluster.server.url + "/ui/pools")
    assert page.locator("#pools tbody td:first-child a").all_inner_texts() == ["default"]
    page.goto(cluster.server.url + "/ui/topology")
    assert "nvl72" not in page.locator("p.pools").inner_text()
    answer = page.goto(cluster.server.url + "/ui/topology?pool=nvl72")
    assert answer.status == 404
    assert page.locator("[role=alert]").inner_text() == (
        "Pool nvl72 does not exist, or you may not use it."
    )
    assert page.goto(cluster.server.url + "/ui/config").status == 403  # no config:Read
    page.close()


def test_the_page_updates_live_when_a_workflow_finishes(
    cluster: Cluster, browser: Any, tmp_path: Path
) -> None:
    quick = cluster.submit(example("nvl72-single-rack.yaml", 3, "quick"))
    page = log_in(browser, cluster.server, cluster.server.token, f"/ui/workflows/{quick}")
    page.evaluate("window.notReloaded = true")
    page.locator("#workflow-status", has_text="COMPLETED").wait_for(timeout=60_000)
    assert page.evaluate("window.notReloaded") is True  # redrawn in place, not reloaded
    assert page.locator('#tasks tr[data-task="model1-shard1"] td').nth(4).inner_text() == "0"
    page.goto(cluster.server.url + "/ui/workflows")
    page.evaluate("window.notReloaded = true")
    later = cluster.submit(example("nvl72-single-rack.yaml", 1, "later"))
    page.locator(f'tr[data-workflow="{later}"]').wait_for(timeout=30_000)
    assert page.evaluate("window.notReloaded") is True
    page.close()


# -- issue 25, items 7 and 19 ----------------------------------------------------------------

WIDTHS = {"phone": 390, "desktop": 1300}


def overflow(page: Any) -> list[str]:
    """What sticks out of the page sideways, outside a box that scrolls on purpose."""
    found: list[str] = page.evaluate(
        """() => {
            const width = document.documentElement.clientWidth;
            const out = [...document.querySelectorAll('body *')].filter(e =>
                e.getBoundingClientRect().right > width + 1 && !e.closest('.scroll'));
            const page = document.documentElement.scrollWidth > width ? ['the page'] : [];
            return page.concat(out.slice(0, 5).map(e => e.tagName + '.' + e.className));
        }"""
    )
    return found


def test_a_waiting_workflow_a_failure_and_a_broken_pool_at_phone_and_desktop_widths(
    cluster: Cluster, held: dict[str, dict[str, str]], browser: Any, tmp_path: Path
) -> None:
    """Every page fits a 390 px phone and a desktop without sideways scrolling (a wide table
    scrolls in its own box); the overview lists failures and the longest waiting; a waiting
    workflow's page says its place and links its ghost; clique boxes name their workflows; a
    pool without platforms is shown and says what it lacks; no request answers 401."""
    fills = cluster.submit(example("nvl72-single-rack.yaml", HELD_SECONDS, "fills"))
    cluster.wait_placed(fills)  # nvl72: 64 of its 64 guaranteed GPUs in use
    waits = cluster.submit(example("nvl72-single-rack.yaml", HELD_SECONDS, "waits"))
    broken = (
        "workflow:\n  name: breaks\n  tasks:\n  - {name: t, image: busybox, command: [false]}\n"
    )
    failed = cluster.submit(broken, pool="default")
    bare = cluster.api.put("/api/configs/pool/aaa-bare", json={"configs": {"backend": "default"}})
    assert bare.status_code == 200, bare.text
    deadline = time.monotonic() + 60
    while cluster.workflow(failed)["status"] != "FAILED":
        assert time.monotonic() < deadline
        time.sleep(0.3)
    pages = [
        "/ui",
        "/ui/pools",
        "/ui/pools?pool=nvl72",
        "/ui/topology?pool=nvl72",
        "/ui/workflows",
        "/ui/queue",
        f"/ui/workflows/{waits}",
        f"/ui/workflows/{next(iter(held))}",
        "/ui/config?type=POOL&first=1",
    ]
    refused: list[str] = []

    def note_refusal(response: Any) -> None:
        if response.status == 401:
            refused.append(response.url)

    try:
        for name, width in WIDTHS.items():
            page = log_in(browser, cluster.server, cluster.server.token)
            page.set_viewport_size({"width": width, "height": 900})
            page.on("response", note_refusal)
            for path in pages:
                page.goto(cluster.server.url + path)
                assert overflow(page) == [], (name, path)
            assert refused == []  # not even /favicon.ico
            after = page.locator("#diff-table tbody tr").first.locator("td").nth(3)
            box = after.bounding_box()  # the last page is the config diff: its After side
            assert box is not None and box["x"] + box["width"] <= width, (name, box)
            if name == "phone":  # the first screen of a config diff (docs/dashboard.md#phones)
                screenshot(page, "config-phone", tmp_path, full_page=False)
            page.close()
        page = log_in(browser, cluster.server, cluster.server.token)
        assert page.locator("#failures").inner_text().startswith(f"{failed} FAILED default,")
        assert page.locator("#longest a").all_inner_texts() == [waits]
        page.goto(cluster.server.url + "/ui/pools")  # the bare pool is the first one shown
        assert (
            page.locator("#pool-problem")
            .inner_text()
            .startswith(
                "Pool aaa-bare has no platforms: every submission to it fails until it has one;"
            )
        )
        assert (
            page.locator('#pools tr[data-pool="nvl72"] td:first-child .muted')
            .inner_text()
            .startswith("GB200 NVL72 racks")
        )
        queued = cluster.forecast_of(waits)
        page.goto(cluster.server.url + "/ui/queue")
        row = page.locator(f'#queue tr[data-workflow="{waits}"]')
        assert row.locator("td").first.inner_text() == str(queued["position"])
        assert row.locator(".shape").inner_text() == queued["shape"]
        assert row.locator(".eta").inner_text().startswith("~")
        screenshot(page, "queue", tmp_path)
        page.set_viewport_size({"width": WIDTHS["phone"], "height": 900})
        screenshot(page, "queue-phone", tmp_path, full_page=False)
        page.set_viewport_size({"width": 1300, "height": 900})
        page.goto(cluster.server.url + f"/ui/workflows/{waits}")
        eta = page.locator("#eta").inner_text()
        # fills has run longer than any past run in the cluster: a tail from what it has run
        # (docs/forecast.md#runtimes), so its end may already be due
        where = f"position {queued['queue_position']} in queue nvl72; "
        assert eta.startswith((f"{where}starts in ~", f"{where}starts at the next pass")), eta
        screenshot(page, "workflow-waiting", tmp_path, full_page=False)
        page.click("#ghost-link")
        page.locator("#ghost").wait_for()
        assert page.locator(".node.ghost").count() + page.locator("#ghost").count() > 0
        clique = page.locator(f'.block:has([data-owners*="{fills}"])')
        assert clique.locator("h3").inner_text().startswith("gpu-clique rack-")
        assert f"{fills} \u00d7 4 nodes" in clique.locator("ul.owners").inner_text()
        page.close()
    finally:
        for workflow_id in (fills, waits):
            cluster.api.post(f"/api/workflow/{workflow_id}/cancel")
        cluster.api.delete("/api/configs/pool/aaa-bare")


def test_the_queue_page_says_how_good_the_forecasts_were(
    cluster: Cluster, held: dict[str, dict[str, str]], browser: Any, tmp_path: Path
) -> None:
    """A waiting gang starts when the one ahead is canceled: its published forecast is
    measured, and the Queue page shows the pool's figures as the API answers them."""
    ahead = cluster.submit(example("nvl72-single-rack.yaml", HELD_SECONDS, "ahead"))
    cluster.wait_placed(ahead)
    behind = cluster.submit(example("nvl72-single-rack.yaml", HELD_SECONDS, "behind"))
    try:
        cluster.forecast_of(behind)
        cluster.api.post(f"/api/workflow/{ahead}/cancel")
        cluster.wait_placed(behind)
        deadline, measured = time.monotonic() + 60, []
        while not measured:
            assert time.monotonic() < deadline, cluster.api.get("/api/queue").text
            accuracy = cluster.api.get("/api/queue").json()["accuracy"]
            measured = [pool for pool in accuracy if pool["pool"] == "nvl72"]
            time.sleep(0.3)
        (pool,) = measured
        page = log_in(browser, cluster.server, cluster.server.token, "/ui/queue")
        cells = page.locator('#accuracy tr[data-pool="nvl72"] td').all_inner_texts()
        error = pool["median_error"]
        assert cells == [
            "nvl72",
            f"{pool['band_hits_ratio']:.0%}",
            "-" if error is None else f"{error:.0%}",
            str(pool["forecasts"]),
            str(pool["starts"]),
        ]
        screenshot(page, "queue-accuracy", tmp_path)
        page.set_viewport_size({"width": WIDTHS["phone"], "height": 900})
        assert overflow(page) == []
        page.locator("#accuracy").scroll_into_view_if_needed()
        screenshot(page, "queue-accuracy-phone", tmp_path, full_page=False)
        page.close()
    finally:
        for workflow_id in (ahead, behind):
            cluster.api.post(f"/api/workflow/{workflow_id}/cancel")


def test_a_rollback_shows_the_new_revision_and_a_diff_shows_each_side_whole(
    cluster: Cluster, browser: Any, tmp_path: Path
) -> None:
    before = cluster.api.get("/api/configs/pool/default").json()
    changed = {**before, "description": "x" * 300}
    changed.pop("name", None)
    answer = cluster.api.put("/api/configs/pool/default", json={"configs": changed})
    assert answer.status_code == 200, answer.text
    head = answer.json()["revisions"][0]["revision"]
    page = log_in(browser, cluster.server, cluster.server.token, "/ui/config")
    page.on("dialog", lambda dialog: dialog.accept())
    page.goto(cluster.server.url + f"/ui/config?type=POOL&first={head - 1}&second={head}")
    before_cell = page.locator("#diff-table tbody tr td pre").first
    assert before_cell.evaluate("e => e.scrollWidth <= e.clientWidth")  # wrapped, not cut
    assert page.locator("#history th").nth(1).inner_text() == "Name"
    assert page.locator(f'#history tr[data-revision="{head}"] td').nth(1).inner_text() == (
        "default"
    )
    page.click(f'#history tr[data-revision="{head - 1}"] >> text=roll back to r{head - 1}')
    page.locator("#config-result [role=status]").wait_for()
    assert page.locator("#config-result").inner_text() == (
        f"Rolled back to r{head - 1}: now r{head + 1}."
    )
    assert page.locator("h2", has_text="POOL at").inner_text() == f"POOL at r{head + 1}"
    page.close()


def test_a_cordoned_and_a_failed_tray_are_marked_on_the_map_with_their_reasons(
    cluster: Cluster, browser: Any, tmp_path: Path
) -> None:
    rows = cluster.api.get("/api/resources", params={"pools": "nvl72"}).json()["resources"]
    cordoned, failed = sorted({row["hostname"] for row in rows})[-2:]
    changes = [(cordoned, "cordon", "uncordon"), (failed, "fail", "heal")]
    try:
        for node, action, _ in changes:
            body = {"reason": "PSU swap"} if action == "cordon" else {"fabric": True}
            answer = cluster.api.post(f"/api/nodes/{node}/{action}", json=body)
            assert answer.status_code == 200, answer.text
        page = log_in(browser, cluster.server, cluster.server.token)
        page.goto(cluster.server.url + "/ui/topology?pool=nvl72")
        marked = page.locator(f'[data-node="{cordoned}"]')
        assert marked.inner_text() == "✕ 0/4"  # readable without colour
        assert marked.get_attribute("title") == (
            f"{cordoned}: takes no new work: cordoned by admin: 'PSU swap'; no workflow"
        )
        cut_off = page.locator(f'[data-node="{failed}"]')
        assert cut_off.get_attribute("title") == (
            f"{failed}: takes no new work: NVLink fabric failed; no workflow"
        )
        page.goto(cluster.server.url + "/ui")
        healthy = page.locator('#pool-gpus tr[data-pool="nvl72"] td.healthy')
        assert healthy.inner_text() == "352 of 360 ✕ 8 closed"  # two 4-GPU trays
        assert healthy.locator("a").get_attribute("href") == "/ui/topology?pool=nvl72"
        screenshot(page, "overview-closed", tmp_path, full_page=False)
        desktop = page.viewport_size
        page.set_viewport_size({"width": 390, "height": 844})
        screenshot(page, "overview-closed-phone", tmp_path, full_page=False)
        page.set_viewport_size(desktop)
        page.goto(cluster.server.url + "/ui/topology?pool=nvl72")
        legend = page.locator("ul.legend li:has(.shade-closed)").inner_text()
        assert legend.endswith(
            "✕ takes no new work (NotReady, cordoned, or its NVLink fabric "
            "failed; hover it for why)"
        )
        marked.scroll_into_view_if_needed()
        screenshot(page, "topology-closed", tmp_path, full_page=False)
        page.set_viewport_size({"width": 390, "height": 844})
        marked.scroll_into_view_if_needed()
        screenshot(page, "topology-closed-phone", tmp_path, full_page=False)
        page.close()
    finally:
        for node, _, undo in changes:
            cluster.api.post(f"/api/nodes/{node}/{undo}", json={})
