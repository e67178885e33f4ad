"""The Dagster UI as a data engineer sees the demo: Dagster's own webserver on loopback, read in
headless Chromium (tests/cdp.py).

The demo lake (three days of `dt=` folders up to today) is discovered, lineage from code
included, and materialized over those three days in one run; then the graph must show every
dataset under a distinct (group, label), a dataset page its columns and column lineage, and the
partitions start at the first day of data, all filled.

Screenshots of the graph and of a dataset page go to the test's folder; with
`--update-golden-files` they replace docs/img/graph.png and docs/img/dataset.png, which the
README shows.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from dagster import DagsterInstance

from lumos_dagster.cli.demo_lake import DAYS, build_demo_lake
from lumos_dagster.definitions import build_definitions
from lumos_dagster.floor.config import load_config
from lumos_dagster.inventory.refresh import refresh_registry
from lumos_dagster.store import SnapshotStore
from tests.cdp import Browser
from tests.lake import demo_config

pytestmark = [pytest.mark.dagster, pytest.mark.servers, pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "docs" / "img"
TODAY = datetime.now(UTC).date()
FIRST = TODAY - timedelta(days=DAYS - 1)

# every node of the demo's graph, as (group, label): Dagster labels a node with its key's last segment
GRAPH = {
    ("sales_raw", "orders"), ("sales_clean", "orders"), ("raw", "events"), ("raw", "customers"),
    ("clean", "events"), ("finance_analytics", "daily_revenue"), ("analytics", "customer_360"),
    ("landing", "partner_feed"), ("reports", "lumos_cost_report"), ("reports", "lumos_overview"),
}  # fmt: skip

# each node's label and the group box it is drawn in, found by geometry (groups and nodes are
# foreignObjects of the graph's SVG; a group's header holds only its name)
NODES_IN_GROUPS = """(groups => {
  const boxes = [...document.querySelectorAll('svg foreignObject')].map(fo => [fo.textContent.trim(),
      fo.getBoundingClientRect()]);
  const frames = boxes.filter(([t, r]) => groups.includes(t));
  const inside = (r, f) => r.left >= f.left && r.right <= f.right && r.top >= f.top && r.bottom <= f.bottom;
  return boxes.filter(([t]) => t && !groups.includes(t))
    .map(([t, r]) => [frames.filter(([, f]) => inside(r, f)).map(([g]) => g).join('|'), t]);
})(%s)"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _post(url: str, query: str) -> dict:
    request = urllib.request.Request(url, json.dumps({"query": query}).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as r:
        return json.load(r)


@contextmanager
def _webserver(home: Path, config: Path):
    """dagster-webserver on loopback over the instance in `home` and the code location of `config`."""
    port = _free_port()
    env = {**os.environ, "DAGSTER_HOME": str(home), "LUMOS_CONFIG": str(config), "PYTHONPATH": str(ROOT)}
    webserver = os.path.join(os.path.dirname(sys.executable), "dagster-webserver")
    with open(home / "webserver.log", "w") as log:  # a file, not a pipe nobody reads
        server = subprocess.Popen([webserver, "-m", "lumos_dagster.definitions", "-h", "127.0.0.1", "-p", str(port)],
                                  cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 60
            while True:
                try:
                    urllib.request.urlopen(f"{base}/server_info", timeout=2).close()
                    break
                except OSError:
                    if server.poll() is not None or time.monotonic() > deadline:
                        pytest.fail(f"dagster-webserver did not start:\n{(home / 'webserver.log').read_text()[-3000:]}")
                    time.sleep(0.3)
            _post(f"{base}/graphql", "mutation { setNuxSeen }")  # no community pop-up over the pages
            yield base
        finally:
            server.terminate()
            server.wait(timeout=30)


@pytest.fixture(scope="module")
def ui(tmp_path_factory):
    """The demo discovered and materialized from its first day of data to today, and a webserver on it."""
    tmp = tmp_path_factory.mktemp("ui")
    build_demo_lake(str(tmp / "lake"))
    config = demo_config()
    config["sources"][0]["root"] = str(tmp / "lake")
    config["store"] = {"path": str(tmp / "store.db")}
    config["catalog"]["path"] = str(tmp / "catalog.db")
    config["partitions"].pop("start", None)  # where the data starts: what the test checks
    for d in config["datasets"]:
        d.pop("profile", None)  # profiling starts Spark: half a minute this test is not about
    (tmp / "lumos.yaml").write_text(yaml.safe_dump(config))
    cfg = load_config(str(tmp / "lumos.yaml"))
    with SnapshotStore(cfg.store_url) as store:
        refresh_registry(cfg, store, progress=lambda _: None)  # `lumos discover`: lineage from code too
    home = tmp / "dagster"
    home.mkdir()
    (home / "dagster.yaml").write_text((ROOT / "dagster.yaml").read_text())
    os.environ["DAGSTER_HOME"] = str(home)  # the event log storage reads it
    try:
        defs = build_definitions(cfg)
        with DagsterInstance.from_config(str(home)) as instance:
            days = {"dagster/asset_partition_range_start": str(FIRST), "dagster/asset_partition_range_end": str(TODAY)}
            result = defs.resolve_implicit_global_asset_job_def().execute_in_process(instance=instance, tags=days)
        assert result.success
    finally:
        os.environ.pop("DAGSTER_HOME")
    with _webserver(home, tmp / "lumos.yaml") as base:
        browser = Browser(tmp / "chromium", 1800, 1000)
        try:
            yield {"base": base, "browser": browser, "dir": tmp, "defs": defs}
        finally:
            browser.close()


def _keep(request, shot: Path, name: str) -> None:
    if request.config.getoption("--update-golden-files"):
        IMAGES.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, IMAGES / name)


def test_the_graph_shows_every_dataset_under_a_distinct_group_and_label(ui, request):
    browser, graph = ui["browser"], ui["defs"].resolve_asset_graph()
    expected = {(graph.get(k).group_name, k.path[-1]) for k in graph.get_all_asset_keys()}
    assert expected == GRAPH  # the definitions say what the page must show
    groups = sorted({g for g, _ in GRAPH})
    browser.go(f"{ui['base']}/server_info")  # the graph's expanded groups live in the page's storage
    expanded = json.dumps({"expanded": ",".join(f"global@global:{g}" for g in groups)})
    browser.js(f"localStorage.setItem('asset-graph-open-graph-nodes-global-__GLOBAL__', {json.dumps(expanded)})")
    browser.go(f"{ui['base']}/asset-groups")
    browser.wait_for("sales_raw", "sales_clean", "customer_360")
    for _ in range(3):  # zoom out (ctrl + wheel) until every node is drawn, labels only
        browser.call("Input.dispatchMouseEvent", type="mouseWheel", x=1100, y=500, deltaX=0, deltaY=100, modifiers=2)
        time.sleep(0.3)
    deadline = time.monotonic() + 20
    while (shown := browser.js(NODES_IN_GROUPS % json.dumps(groups))) and len(shown) < len(GRAPH):
        assert time.monotonic() < deadline, f"the graph drew only {shown}"
        time.sleep(0.3)
    assert sorted(map(tuple, shown)) == sorted(GRAPH)  # each label whole, in its own group, once
    shot = ui["dir"] / "graph.png"
    browser.screenshot(shot)
    _keep(request, shot, "graph.png")


def test_a_dataset_page_shows_its_columns_and_column_lineage(ui, request):
    browser = ui["browser"]
    browser.call("Emulation.setDeviceMetricsOverride", width=1600, height=1250, deviceScaleFactor=1, mobile=False)
    browser.go(f"{ui['base']}/assets/analytics/customer_360")
    # lumos.yaml's description, the one DataHub has too
    text = browser.wait_for("Columns", "lumos/column_lineage", "One row per customer with lifetime value and segments.")
    columns = text[text.index("Columns") : text.index("Metadata")]
    assert all(c in columns for c in ("customer_id", "lifetime_value", "segments", "array<string>"))
    lineage = text[text.index("lumos/column_lineage") : text.index("lumos/built_by")]
    rows = [" ".join(line.split()) for line in lineage.splitlines() if "." in line]
    assert rows == ["segments clean/events.device.os", "lifetime_value clean/orders.amount",
                    "customer_id raw/customers.customer_id"]  # fmt: skip
    shot = ui["dir"] / "dataset.png"
    browser.screenshot(shot)
    _keep(request, shot, "dataset.png")


def test_partitions_start_at_the_first_day_of_data_and_are_all_filled(ui):
    browser = ui["browser"]
    browser.go(f"{ui['base']}/assets/raw/orders?view=partitions")
    text = browser.wait_for("Materialized (")
    assert f"All\n{FIRST}\n{TODAY}" in text  # not 1 January: the first `dt=` folder
    assert f"{DAYS} Partitions Selected" in text
    assert f"Materialized ({DAYS})" in text and "Missing (0)" in text
