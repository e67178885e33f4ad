"""One status everywhere (issue 28): `lumos summary`, Dagster's asset checks, the API and the estate
overview report give every dataset the same status, from one function (governance.status), before
and after a breaking change is accepted through the API. Compared with tests/golden/status.json.

The estate: the demo lake (tests.lake.demo_project) and finance/ledger, through Dagster, in stages:

1. a backfill of DAY-2...DAY-1, one run of the range. finance/ledger has a torn file on DAY-2: the
   range's files_readable warns, and the summary says so too (it said "ok": the issue's case);
2. the run of DAY: clean/orders lost `status` (an unaccepted breaking change: failed, its consumers
   held back), raw/events has no files for DAY, clean/events widened user_id from int32 to int64
   (compatible under its BACKWARD policy), landing/partner_feed still has a torn file, and
   finance/ledger's torn file of DAY-2 still warns (it stays until DAY-2 is read whole);
3. clean/orders 2.0.0 accepted through the API: the summary, the API and the report count it at once.
   Dagster's checks are evaluations its runs recorded: they show it at the dataset's next run, and
   the golden file says so (`dagster until the next run`, docs/api.md);
4. DAY run again: Dagster agrees again.

To regenerate the golden file after a deliberate change:
    .venv/bin/pytest tests/test_status_golden.py --update-golden-files   (or LUMOS_UPDATE_GOLDEN=1)
and review the diff.
"""

import json
import os
import re
import shutil
from datetime import date, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from dagster import DagsterEventType, DagsterInstance
from fastapi.testclient import TestClient

from lumos_dagster.api.app import create_app
from lumos_dagster.api.auth import hash_token, new_token
from lumos_dagster.api.service import Lumos
from lumos_dagster.assets.snapshots import HELD_BACK
from lumos_dagster.cli import main
from lumos_dagster.definitions import build_definitions
from lumos_dagster.floor.config import load_config
from lumos_dagster.governance.checks import CheckOutcome
from lumos_dagster.governance.status import said_of
from lumos_dagster.run.record import store_versioned
from lumos_dagster.store import SnapshotStore
from tests.lake import demo_project, write_parquet
from tests.test_store import snap, store_url  # noqa: F401  (the fixture: SQLite and PostgreSQL)

pytestmark = pytest.mark.dagster

GOLDEN = Path(__file__).parent / "golden" / "status.json"
DAY = date(2026, 11, 25)
TOKEN = new_token()
DATASETS = [
    "analytics/customer_360",
    "analytics/daily_revenue",
    "clean/events",
    "clean/orders",
    "finance/ledger",
    "landing/partner_feed",
    "raw/customers",
    "raw/events",
    "raw/orders",
]
#: where the recorded checks wait for the dataset's next run after the acceptance
WAITING = {"clean/orders", "analytics/customer_360", "analytics/daily_revenue"}


def _edit(config: dict) -> None:
    for d in config["datasets"]:
        if d["name"] == "clean/events":
            d["policy"] = "BACKWARD"  # a widening passes (under FULL it breaks)
    config["datasets"].append({"name": "finance/ledger", "description": "The general ledger.",
                               "owners": ["bob@example.com"], "domain": "finance"})  # fmt: skip
    config["api"] = {"writes": True, "tokens": [{"name": "ci", "hash": hash_token(TOKEN), "scopes": ["read", "write"]}]}


def _build_lake(lake: Path) -> None:
    for day in (DAY - timedelta(days=2), DAY - timedelta(days=1)):  # user_id int32 until DAY, int64 then
        events = lake / "clean" / "events" / f"dt={day}" / "part-00000.snappy.parquet"
        table = pq.read_table(events)
        pq.write_table(table.set_column(table.schema.get_field_index("user_id"), "user_id",
                                        pc.cast(table["user_id"], pa.int32())), events)  # fmt: skip
    for n in range(3):
        day = DAY - timedelta(days=n)
        ledger = pa.table({"entry": pa.array([1, 2], pa.int64()), "amount": pa.array([1.5, -1.5])})
        good = write_parquet(lake / "finance" / "ledger" / f"dt={day}" / "part-0.parquet", ledger)
        if n == 2:  # the backfill's first day has a torn file beside a good one
            (Path(good).parent / "part-1.parquet").write_bytes(Path(good).read_bytes()[:40])


def _change_lake_for_day(lake: Path) -> None:
    orders = lake / "clean" / "orders" / f"dt={DAY}" / "part-00000.orc"
    orc.write_table(orc.read_table(orders).drop_columns(["status"]), orders)
    shutil.rmtree(lake / "raw" / "events" / f"dt={DAY}")


@pytest.fixture(scope="module")
def estate(tmp_path_factory):
    """Each stage's statuses, by surface: stage → surface → dataset → status with its reasons."""
    tmp = tmp_path_factory.mktemp("status-golden")
    path = str(demo_project(tmp, DAY, _edit))
    _build_lake(tmp / "lake")
    assert CliRunner().invoke(main, ["discover", "--config", path]).exit_code == 0
    config = load_config(path)
    instance = DagsterInstance.ephemeral()
    job = build_definitions(config).resolve_implicit_global_asset_job_def()
    runs = []

    def run(**kwargs):
        result = job.execute_in_process(instance=instance, raise_on_error=False, **kwargs)
        assert result.success  # a failed check is its dataset's, never the run's
        runs.append(result.run_id)

    lumos = Lumos(config)
    client = TestClient(create_app(lumos), headers={"Authorization": f"Bearer {TOKEN}"})

    def surfaces() -> dict[str, dict[str, str]]:
        return {"summary": _summary(path), "dagster": _dagster(instance, runs), "api": _api(client),
                "report": _report(path, tmp / "reports")}  # fmt: skip

    stages = {}
    try:
        start, end = str(DAY - timedelta(days=2)), str(DAY - timedelta(days=1))
        run(tags={"dagster/asset_partition_range_start": start, "dagster/asset_partition_range_end": end})
        stages["1 the backfill of DAY-2...DAY-1"] = surfaces()
        _change_lake_for_day(tmp / "lake")
        run(partition_key=str(DAY))
        stages["2 the run of DAY"] = surfaces()
        assert client.get("/v1/datasets/clean/events").json()["change_class"] == "minor"  # the widening
        accepted = client.post("/v1/dataset/acceptances", params={"name": "clean/orders"},
                               json={"version": "2.0.0", "reason": "status retired", "path": "status"})  # fmt: skip
        assert accepted.status_code == 200, accepted.text
        stages["3 clean/orders 2.0.0 accepted through the API"] = surfaces()
        run(partition_key=str(DAY))
        stages["4 the run of DAY again"] = surfaces()
    finally:
        client.close()
        lumos.close()
    return stages


def _summary(config: str) -> dict[str, str]:
    """dataset → the status cell of `lumos summary`."""
    out = CliRunner().invoke(main, ["summary", "--config", config])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    at = lines[0].index("status")
    return {line.split()[0]: line[at:] for line in lines[1 : len(DATASETS) + 1]}


def _dagster(instance: DagsterInstance, runs: list[str]) -> dict[str, str]:
    """dataset → its status as Dagster shows it: each check's latest evaluation, or held back when its
    latest run observed so (the `lumos/held_back` observation) instead of materializing it."""
    checks: dict[str, dict[str, CheckOutcome]] = {}
    held: dict[str, tuple[str, str] | None] = {}
    kinds = {DagsterEventType.ASSET_CHECK_EVALUATION, DagsterEventType.ASSET_OBSERVATION}
    for run_id in runs:
        for record in instance.all_logs(run_id, of_type=kinds):
            event = record.dagster_event
            if event.event_type == DagsterEventType.ASSET_OBSERVATION:
                observation = event.event_specific_data.asset_observation
                if HELD_BACK not in observation.metadata:
                    continue
                name, why = "/".join(observation.asset_key.path), observation.metadata[HELD_BACK].value
                upstream, check = re.search(r"upstream (\S+) failed (\S+?)[;:]", why).groups()
                held[name] = (check, upstream)
                continue
            e = event.event_specific_data
            name = "/".join(e.asset_key.path)
            checks.setdefault(name, {})[e.check_name] = CheckOutcome(e.check_name, e.passed, e.severity.value,
                                                                     e.description)  # fmt: skip
            held[name] = None
    return {n: said_of(list(checks.get(n, {}).values()), held.get(n), n in checks) for n in DATASETS}


def _api(client: TestClient) -> dict[str, str]:
    """dataset → its status from GET /v1/datasets/{name} (its checks), which GET /v1/datasets lists too."""
    listed = {d["name"]: d["status"] for d in client.get("/v1/datasets", params={"limit": 100}).json()["items"]}
    out = {}
    for name in DATASETS:
        d = client.get(f"/v1/datasets/{name}").json()
        checks = [CheckOutcome(c["name"], c["passed"], c["severity"], c["description"]) for c in d["checks"]]
        held = tuple(reversed(d["held_back"].split(" failed "))) if d["held_back"] else None
        out[name] = said_of(checks, held, d["version"] is not None)
        assert out[name].split(":")[0] == d["status"] == listed[name], name
    return out


def _report(config: str, folder: Path) -> dict[str, str]:
    """dataset → its status in the estate overview `lumos report` writes (overview.json), checked
    against the overview's markdown (Dagster's view of the report asset)."""
    out = CliRunner().invoke(main, ["report", "--config", config, "--no-webhook", "-o", str(folder)])
    assert out.exit_code == 0, out.output
    rows = json.loads((folder / "overview.json").read_text())["status"]
    markdown = (folder / "overview.md").read_text()
    for r in rows:
        assert r["checks"].split(":")[0] == r["status"]
        assert (f"| {r['dataset']} | {r['status']} |" in markdown.replace("\\", "")) is (r["status"] != "ok")
    return {r["dataset"]: r["checks"] for r in rows}


def test_every_surface_gives_every_dataset_the_same_status(pytestconfig, estate):
    golden = {}
    for stage, by_surface in estate.items():
        assert by_surface["summary"] == by_surface["api"] == by_surface["report"], stage
        waiting = {n: s for n, s in by_surface["dagster"].items() if s != by_surface["summary"][n]}
        golden[stage] = {"status": by_surface["summary"], "dagster until the next run": waiting}
    text = json.dumps(golden, indent=2) + "\n"
    if pytestconfig.getoption("update_golden_files") or os.environ.get("LUMOS_UPDATE_GOLDEN"):
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text(), f"{GOLDEN} differs (regenerate: see this module's docstring)"


def test_dagster_differs_only_after_the_acceptance_and_until_the_next_run(estate):
    (backfill, day, accepted, again) = estate.values()
    for stage in (backfill, day, again):
        assert stage["dagster"] == stage["summary"]
    # the records of DAY's run, unchanged: what the acceptance changed, and only that
    assert accepted["dagster"] == day["dagster"]
    assert {n for n in DATASETS if accepted["dagster"][n] != accepted["summary"][n]} == WAITING


def test_the_statuses_say_what_happened(estate):
    """What the golden file holds, asserted for what a broken status would get wrong."""
    (backfill, day, accepted, again) = (stage["summary"] for stage in estate.values())
    assert backfill["finance/ledger"] == "warning: files_readable"  # the torn file of the range's first day
    # DAY-2's torn file stays, in every surface, until a run reads DAY-2 whole (issue 41: it vanished at DAY)
    assert day["finance/ledger"] == "warning: files_readable"
    assert day["clean/orders"].startswith("failed: schema_compatible")
    for held in ("analytics/customer_360", "analytics/daily_revenue"):
        assert day[held] == "held back: clean/orders failed schema_compatible"
        assert accepted[held] == again[held] and not accepted[held].startswith("held back")
    assert day["raw/events"] == "ok"  # no files for DAY is no failure to read
    assert "schema_compatible" not in day["clean/events"]  # widened, under BACKWARD
    assert day["landing/partner_feed"] == "warning: files_readable"
    assert "schema_compatible" not in accepted["clean/orders"] and accepted["clean/orders"] == again["clean/orders"]


# --- what a dataset's last run is, in the store -----------------------------------------------------

#: title: (captures stored, run by run: (partition, minutes after T0); partitions the last run is of)
LAST_RUNS = {
    "one run": ([("2026-11-24", 0), ("2026-11-25", 0)], ["2026-11-24", "2026-11-25"]),
    "the next day's run": ([("2026-11-24", 0), ("2026-11-25", 5)], ["2026-11-25"]),
    "a backfill after it, with the newest partition": (
        [("2026-11-25", 0), ("2026-11-22", 5), ("2026-11-23", 5)], ["2026-11-22", "2026-11-23", "2026-11-25"]),
    "the newest partition taken again": ([("2026-11-25", 0), ("2026-11-25", 5)], ["2026-11-25"]),
}  # fmt: skip


@pytest.mark.parametrize("case", LAST_RUNS)
def test_a_datasets_last_run_is_its_newest_capture_time_with_its_newest_partition(store_url, case):  # noqa: F811
    stored, expected = LAST_RUNS[case]
    with SnapshotStore(store_url) as store:
        for pk, minutes in stored:
            store_versioned(store, [snap("sales/orders", pk, minutes=minutes)])
        store_versioned(store, [snap("sales/other", "2026-11-26", minutes=9)])  # another dataset's run: not this one's
        found = store.last_runs(["urn:lumos:dataset:file:sales/orders", "urn:unknown"])
    assert list(found) == ["urn:lumos:dataset:file:sales/orders"]
    assert [s.partition_key for s in found["urn:lumos:dataset:file:sales/orders"]] == expected
