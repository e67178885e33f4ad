"""Blocked is not broken (issue 28), in Dagster's own UI: a real dagster-webserver read in headless
Chromium (tests/cdp.py), as in tests/test_ui.py.

The demo lake is backfilled over DAY-2...DAY-1 in one run; then raw/orders loses `status` on DAY
(a breaking change) and DAY is run. raw/orders fails its blocking `schema_compatible` check; its
downstream datasets are held back: not materialized, and not failed either. The graph must be red
exactly where a dataset broke (raw/orders, and the demo's raw/customers, which fails a data-quality
test of its own), a held-back dataset's page must say why and how to accept, and the run must
succeed and say its failed blocking check once, without a stack trace.

Each page is checked against what Dagster's GraphQL API (the same webserver's) says the UI renders,
so a page that has not loaded its live data yet cannot pass for a clean one.
"""

from __future__ import annotations

import time
from datetime import date, timedelta
from pathlib import Path

import pytest
from dagster import DagsterInstance

from lumos_dagster.assets.snapshots import HELD_BACK
from lumos_dagster.definitions import build_definitions
from lumos_dagster.floor.config import load_config
from lumos_dagster.inventory.refresh import refresh_registry
from lumos_dagster.store import SnapshotStore
from tests.cdp import Browser
from tests.lake import demo_project, drop_from_todays_orders
from tests.test_ui import _post, _webserver

pytestmark = [pytest.mark.dagster, pytest.mark.servers, pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[1]
DAY = date(2026, 11, 25)  # the day drop_from_todays_orders breaks raw/orders on
#: the datasets that broke: raw/orders lost `status`; the demo's raw/customers fails a data-quality test
BROKE = {"raw/orders", "raw/customers"}
#: downstream of raw/orders, by declaration (clean/orders, daily_revenue) and by SQL lineage (customer_360)
HELD = {"clean/orders", "analytics/daily_revenue", "analytics/customer_360"}
ACCEPT = ("clean/orders: not materialized: upstream raw/orders failed schema_compatible; to accept: declare "
          "accept_major on raw/orders")  # fmt: skip

# every asset node drawn: its dataset (from its links; a report has none: its label), the colour of its
# status row (how Dagster paints a node's state), whether anything in it is red, and its text
NODES = """[...document.querySelectorAll('svg [class*="AssetNode_assetNodeBox"]')].map(box => {
  const rows = box.querySelectorAll('[class*="AssetNode_assetNodeRowBox"]');
  const link = box.querySelector('a[href^="/assets/"]');
  const state = (rows[rows.length - 1]?.getAttribute('style') || '').match(/--color-background-(\\w+)/);
  return {name: link ? new URL(link.href).pathname.slice('/assets/'.length)
                     : box.querySelector('[class*="AssetNode_assetName"]').textContent.trim(),
          state: state ? state[1] : '', red: box.innerHTML.includes('-red)'), text: box.innerText};
})"""

ASSETS = """{ assetNodes { assetKey { path } partitionStats { numFailed }
  assetChecksOrError { ... on AssetChecks { checks { name
    executionForLatestMaterialization { status evaluation { severity } } } } } } }"""


@pytest.fixture(scope="module")
def held_ui(tmp_path_factory):
    """The demo after a breaking change in raw/orders on DAY, materialized through Dagster, and a
    webserver and a browser on it."""
    tmp = tmp_path_factory.mktemp("held-back")
    path = demo_project(tmp, DAY)
    cfg = load_config(str(path))
    with SnapshotStore(cfg.store_url) as store:
        refresh_registry(cfg, store, progress=lambda _: None)  # `lumos discover`: customer_360's SQL lineage
    home = tmp / "dagster"
    home.mkdir()
    (home / "dagster.yaml").write_text((ROOT / "dagster.yaml").read_text())
    job = build_definitions(cfg).resolve_implicit_global_asset_job_def()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("DAGSTER_HOME", str(home))  # the event log storage reads it
        with DagsterInstance.from_config(str(home)) as instance:
            backfill = {"dagster/asset_partition_range_start": str(DAY - timedelta(days=2)),
                        "dagster/asset_partition_range_end": str(DAY - timedelta(days=1))}  # fmt: skip
            assert job.execute_in_process(instance=instance, tags=backfill).success
            drop_from_todays_orders(tmp / "lake", "status")
            run_id = job.execute_in_process(instance=instance, partition_key=str(DAY), raise_on_error=False).run_id
    with _webserver(home, path) as base:
        browser = Browser(tmp / "chromium", 2400, 2400)  # the whole graph at full size: every node drawn whole
        try:
            yield {"base": base, "browser": browser, "run_id": run_id}
        finally:
            browser.close()


def _assets(base: str) -> dict[str, dict]:
    """Each asset's failed partitions and its checks' latest statuses (with severity), as the UI reads them."""
    nodes = _post(f"{base}/graphql", ASSETS)["data"]["assetNodes"]
    return {
        "/".join(n["assetKey"]["path"]): {
            "failed_partitions": n["partitionStats"]["numFailed"] if n["partitionStats"] else 0,
            "checks": {
                c["name"]: (e["status"], (e["evaluation"] or {}).get("severity"))
                for c in n["assetChecksOrError"].get("checks", [])
                if (e := c["executionForLatestMaterialization"])
            },
        }
        for n in nodes
    }


def test_the_graph_is_red_exactly_where_a_dataset_broke(held_ui):
    assets = _assets(held_ui["base"])
    assert {n for n, a in assets.items() if ("FAILED", "ERROR") in a["checks"].values()} == BROKE
    assert all(a["failed_partitions"] == 0 for a in assets.values())  # a held-back partition is missing, not failed
    for name in HELD:  # planned, never run: skipped, not "Execution failed"
        assert {s for s, _ in assets[name]["checks"].values()} == {"SKIPPED"}, (name, assets[name])

    browser = held_ui["browser"]
    browser.go(f"{held_ui['base']}/server_info")  # the graph's expanded groups live in the page's storage
    browser.js("localStorage.setItem('asset-graph-open-graph-nodes-global-__GLOBAL__', JSON.stringify("
               "{expanded: ['sales_raw', 'sales_clean', 'raw', 'clean', 'analytics', 'finance_analytics', 'landing', "
               "'reports'].map(g => 'global@global:' + g).join(',')}))")  # fmt: skip
    browser.go(f"{held_ui['base']}/asset-groups")
    datasets = {n for n in assets if "/" in n}
    deadline = time.monotonic() + 30
    while True:  # every node drawn, with its live data (checks' counts) loaded
        nodes = {n["name"]: n for n in browser.js(NODES) or []}
        if set(nodes) == set(assets) and all("Passed" in nodes[d]["text"] for d in datasets):
            break
        assert time.monotonic() < deadline, f"the graph drew only {sorted(nodes)}"
        time.sleep(0.3)
    assert {n for n, node in nodes.items() if node["state"] == "red"} == BROKE  # one red node per dataset that broke
    for name in HELD:
        assert not nodes[name]["red"] and "failed" not in nodes[name]["text"].lower(), nodes[name]


def test_a_held_back_dataset_says_why_on_its_page_and_nothing_of_it_failed(held_ui):
    base, browser = held_ui["base"], held_ui["browser"]
    browser.call("Emulation.setDeviceMetricsOverride", width=1600, height=1200, deviceScaleFactor=1, mobile=False)
    browser.go(f"{base}/assets/clean/orders?view=events")  # the latest event, shown first: DAY's observation
    text = browser.wait_for(
        f"Partition {DAY} observed", HELD_BACK, ACCEPT, "POST /v1/dataset/acceptances?name=raw/orders"
    )
    assert "Failed" not in text

    browser.go(f"{base}/assets/clean/orders")
    text = browser.wait_for("Latest materialization", str(DAY - timedelta(days=1)), "Description")  # its last day
    assert "Failed" not in text[text.index("Status") : text.index("Description")]

    browser.go(f"{base}/assets/clean/orders?view=partitions")
    text = browser.wait_for("Failed (", "Materialized (")
    assert "Failed (0)" in text and "Materialized (2)" in text  # DAY is missing: it was held back

    browser.go(f"{base}/assets/clean/orders?view=checks")
    text = browser.wait_for("schema_compatible", "Skipped")
    assert "Execution failed" not in text and "Failed" not in text


def test_the_run_succeeds_and_says_its_failed_blocking_check_once(held_ui):
    query = """{ runOrError(runId: "%(id)s") { ... on Run { status } } logsForRun(runId: "%(id)s") {
      ... on EventConnection { events { __typename ... on MessageEvent { message } } } } }"""
    found = _post(f"{held_ui['base']}/graphql", query % {"id": held_ui["run_id"]})["data"]
    assert found["runOrError"]["status"] == "SUCCESS"
    events = found["logsForRun"]["events"]
    assert not [e for e in events if e["__typename"] == "ExecutionStepFailureEvent"]
    said = [e["message"] for e in events if "failed blocking checks" in (e.get("message") or "")]
    assert len(said) == 1 and "raw/orders: schema_compatible failed" in said[0], said
    assert not [e["message"] for e in events if "Traceback" in (e.get("message") or "")]
