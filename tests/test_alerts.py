"""Breaking-change alerts: one POST per change to a real local webhook, across runs, on both stores;
a webhook that is down gets the alert later, from the next run or `lumos sync`."""

from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest
import yaml
from click.testing import CliRunner
from dagster import DagsterInstance

from lumos_dagster.cli import main
from lumos_dagster.definitions import build_definitions
from lumos_dagster.floor.config import load_config
from lumos_dagster.floor.datatypes import Field, Primitive, Schema
from lumos_dagster.floor.model import ColumnMapping, DatasetRecord, DatasetRef, JobRef, Owner, Snapshot
from lumos_dagster.governance.alerts import alert_run
from lumos_dagster.lineage.catalogue import load_catalogue
from lumos_dagster.lineage.resolve import CodeDoc, CodeEdge, doc_to_json
from lumos_dagster.run.record import store_versioned
from lumos_dagster.schema.versioning import assess
from lumos_dagster.store import SnapshotStore
from tests.fake_servers import WebhookReceiver, free_port
from tests.lake import register, write_parquet
from tests.test_store import store_url  # noqa: F401  (the fixture: SQLite and PostgreSQL)

pytestmark = [pytest.mark.dagster, pytest.mark.servers]

T0 = datetime(2026, 11, 20, tzinfo=UTC)
INT, STR = Primitive("int64"), Primitive("string")
FULL = (Field("id", INT, False), Field("status", STR, False), Field("amount", INT, False))
REF = DatasetRef("file", "raw/orders", "/lake/raw/orders", "parquet")
NAMES = ["raw/orders", "clean/orders", "clean/amounts"]


def project(tmp_path, store_url, webhook, fmt="slack"):  # noqa: F811
    path = tmp_path / "lumos.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "sources": [{"name": "lake", "root": "lake"}],
                "store": {"url": store_url},
                "catalog": [],
                "governance": {"alerts": {"webhook": webhook, "format": fmt}},
                "datasets": [{"name": "clean/orders", "owners": ["group:analytics"]}],
            }
        )
    )
    config = load_config(str(path))
    store = SnapshotStore(config.store_url)
    store.upsert_datasets([DatasetRecord(n, "file", "lake", n, "parquet") for n in NAMES])
    job = JobRef("sql", "jobs", "clean.sql")

    def reads(column: str, upstream_column: str) -> dict:
        return doc_to_json(CodeDoc(edges=(CodeEdge("raw/orders", job, (ColumnMapping(column, upstream_column),)),)))

    store.save_code({"clean/orders": reads("s", "status"), "clean/amounts": reads("a", "amount")})
    return path, config, store


def run(store, config, previous, fields, day):
    """What a run does: record a snapshot of raw/orders, then alert."""
    snap = Snapshot(REF, f"2026-11-{day}", T0 + timedelta(days=day - 20), schema=Schema(fields),
                    owners=(Owner("ann@example.com"),))  # fmt: skip
    stored = store_versioned(store, [assess(previous, snap)])
    warnings = []
    alert_run(store, config, load_catalogue(config, store, {"lake": "/lake"}), stored, warnings.append)
    return stored[0], warnings


def test_one_post_per_breaking_change_across_runs(tmp_path, store_url):  # noqa: F811
    receiver = WebhookReceiver().start()
    try:
        _, config, store = project(tmp_path, store_url, receiver.url)
        v1, _ = run(store, config, None, FULL, 20)
        assert receiver.requests == []  # a new dataset breaks nobody
        v2, _ = run(store, config, v1, FULL[:1] + FULL[2:], 21)  # status dropped: 2.0.0
        run(store, config, v1, FULL[:1] + FULL[2:], 21)  # the same partition again: a re-run or a retry
        assert v2.version == "2.0.0" and len(receiver.requests) == 1
        _, path, body = receiver.requests[0]
        assert body["text"] == "Breaking change: raw/orders 2.0.0 (from 1.0.0): 1 consumer(s) affected"
        header, changes, consumers = body["blocks"]
        assert header["text"]["text"] == "Breaking change: raw/orders 2.0.0 (from 1.0.0)"
        assert "ann@example.com" in changes["text"]["text"] and "FIELD_REMOVED status" in changes["text"]["text"]
        assert consumers["text"]["text"] == (
            "*Consumers:*\n• clean/orders — BREAKING (analytics): update clean/orders.s ← raw/orders.status "
            "before releasing\n• 1 other consumer(s) unaffected"
        )
        run(store, config, v2, (FULL[0],), 22)  # amount dropped: 3.0.0, a new change, a new alert
        assert len(receiver.requests) == 2
        assert receiver.requests[1][2]["text"].startswith("Breaking change: raw/orders 3.0.0")
        store.close()
    finally:
        receiver.stop()


def test_a_webhook_that_is_down_gets_the_alert_later_once(tmp_path, store_url):  # noqa: F811
    path, config, store = project(tmp_path, store_url, f"http://127.0.0.1:{free_port()}", fmt="teams")
    v1, _ = run(store, config, None, FULL, 20)
    _, warnings = run(store, config, v1, (FULL[0],), 21)
    assert warnings == ["governance.alerts: 1 breaking-change alert(s) wait for the webhook (next run or `lumos sync`)"]
    store.close()
    receiver = WebhookReceiver().start()
    try:
        up = yaml.safe_load(path.read_text())
        up["governance"]["alerts"]["webhook"] = receiver.url
        path.write_text(yaml.safe_dump(up))
        result = CliRunner().invoke(main, ["sync", "-c", str(path)])
        assert result.exit_code == 0, result.output
        assert "alerts: 1 sent, 0 pending" in result.stdout
        assert CliRunner().invoke(main, ["sync", "-c", str(path)]).stdout.endswith("alerts: 0 sent, 0 pending\n")
        ((method, _, card),) = receiver.requests
        assert method == "POST" and card["@type"] == "MessageCard"
        assert card["title"] == "Breaking change: raw/orders 2.0.0 (from 1.0.0)"
        facts = {f["name"]: f["value"] for f in card["sections"][0]["facts"]}
        assert facts["Owners"] == "ann@example.com"
        assert "FIELD_REMOVED status" in facts["Changes"] and "FIELD_REMOVED amount" in facts["Changes"]
        assert card["sections"][1]["text"].count("BREAKING") == 2  # both consumers read a dropped column
    finally:
        receiver.stop()


def test_the_snapshot_run_alerts_once_and_its_re_run_not_again(tmp_path, spark):
    receiver = WebhookReceiver().start()
    try:
        for day, ids in (("2026-11-24", pa.array([1, 2], pa.int64())), ("2026-11-25", pa.array(["1", "2"]))):
            write_parquet(tmp_path / "lake" / "sales" / "orders" / f"dt={day}" / "p.parquet", pa.table({"id": ids}))
        config = {"sources": [{"name": "lake", "root": "lake"}], "store": {"path": "store.db"},
                  "catalog": {"path": "lite.db"}, "partitions": {"start": "2026-11-20"},
                  "governance": {"alerts": {"webhook": receiver.url}},
                  "datasets": [{"name": "sales/orders", "owners": ["ann@example.com"]}]}  # fmt: skip
        (tmp_path / "lumos.yaml").write_text(yaml.safe_dump(config))
        cfg = load_config(str(tmp_path / "lumos.yaml"))
        register(cfg)
        job = build_definitions(cfg).resolve_implicit_global_asset_job_def()
        instance = DagsterInstance.ephemeral()
        assert job.execute_in_process(partition_key="2026-11-24", instance=instance).success
        assert receiver.requests == []
        for _ in range(2):  # the day id became a string: the gate fails its check, the owners hear of it once
            result = job.execute_in_process(partition_key="2026-11-25", instance=instance)
            assert result.success  # the run itself does not fail: the dataset that broke shows its check
            (check,) = [e for e in result.get_asset_check_evaluations() if e.check_name == "schema_compatible"]
            assert not check.passed
        ((_, _, body),) = receiver.requests
        assert body["text"] == "Breaking change: sales/orders 2.0.0 (from 1.0.0): 0 consumer(s) affected"
        assert "ann@example.com" in body["blocks"][1]["text"]["text"]
    finally:
        receiver.stop()
