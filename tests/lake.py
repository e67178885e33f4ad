"""Small generated lakes for tests."""

import json
import os
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from lumos_dagster.cli.demo_lake import ORDER_SCHEMA
from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.sources import build_sources, discover
from lumos_dagster.store import SnapshotStore

ROOT = Path(__file__).resolve().parent.parent
#: before every window a test snapshots
LONG_AGO = datetime(2026, 1, 1, tzinfo=timezone.utc)


def backdate(*paths) -> None:
    """Give the files `paths` (a folder: every file under it) the modification time LONG_AGO. A window of an
    undated dataset holds only the files modified before its end (run.contents.files_in_window), so the
    undated files a test writes now are in none of its past windows until dated back."""
    stamp = LONG_AGO.timestamp()
    for path in map(Path, paths):
        for file in (p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]:
            os.utime(file, (stamp, stamp))


def register(config) -> None:
    """Record what the config's sources hold in its registry (what the code location builds assets from)."""
    store = SnapshotStore(config.store_url)
    try:
        store.upsert_datasets(discover(build_sources(config), ScanReport()).records)
    finally:
        store.close()


def catalog_urn(config, name: str, env: str = "PROD") -> str:
    """The URN Lumos gives the dataset `name` in DataHub (DataHub's own source's), from where the store
    says its latest snapshot is."""
    from lumos_dagster.catalog.datahub import dataset_urn
    from lumos_dagster.floor.model import dataset_urn as lumos_urn

    store = SnapshotStore(config.store_url)
    try:
        record = next(r for r in store.datasets() if r.name == name)
        latest = store.latest(lumos_urn(record.platform, name))
    finally:
        store.close()
    assert latest is not None, f"{name} has no snapshot"
    return dataset_urn(latest.dataset, env)


def lite_properties(lite_path, name: str) -> dict[str, str] | None:
    """The custom properties DataHub Lite holds for the dataset Lumos names `name` (None: not there)."""
    from lumos_dagster.catalog.datahub_lite import open_lite

    if not os.path.exists(lite_path):
        return None
    lite = open_lite(str(lite_path), read_only=True)
    try:
        for entity in lite.get_all_entities(typed=True):
            ((_, aspects),) = entity.items()
            props = aspects.get("datasetProperties") if isinstance(aspects, dict) else None
            if props is not None and (props.customProperties or {}).get("lumos.dataset") == name:
                return dict(props.customProperties)
    finally:
        lite.close()
    return None


def write_parquet(path, table: pa.Table) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(table, path)
    return str(path)


def partitioned_lake(
    root, name="sales/orders", days=3, start=date(2026, 11, 23), files_per_day=2, extra_field_from=None
):
    """`name`/dt=YYYY-MM-DD/part-N.parquet, 10 rows per file; from day index `extra_field_from`
    on, files carry an additional nullable `coupon` column."""
    written = []
    for d in range(days):
        day = start + timedelta(days=d)
        for n in range(files_per_day):
            cols = {
                "id": pa.array(range(10), pa.int64()),
                "user": pa.array(
                    [{"name": "a", "age": 1}] * 10, pa.struct([("name", pa.string()), ("age", pa.int32())])
                ),
            }
            if extra_field_from is not None and d >= extra_field_from:
                cols["coupon"] = pa.array([None] * 10, pa.string())
            written.append(write_parquet(os.path.join(root, name, f"dt={day}", f"part-{n}.parquet"), pa.table(cols)))
    return written


def demo_config() -> dict:
    """The demo's lumos.yaml, with the code and test results it points at made absolute."""
    config = yaml.safe_load((ROOT / "lumos.yaml").read_text())
    for sql in config.get("lineage", {}).get("sql", []):
        sql["path"] = str(ROOT / sql["path"])
    quality = config.get("quality", {})
    quality["great_expectations"] = [str(ROOT / p) for p in quality.get("great_expectations", [])]
    return config


def demo_project(folder: Path, day: date, edit=None) -> Path:
    """The demo lake as of `day` under `folder`, and a lumos.yaml beside it (store and DataHub Lite
    there too, partitions from 2026-11-01, no profiling: it needs Spark); `edit(config)` may change
    the config first. Returns the config's path."""
    from lumos_dagster.cli.demo_lake import build_demo_lake

    build_demo_lake(str(folder / "lake"), today=day)
    config = demo_config()
    config["sources"][0]["root"] = "lake"
    config["store"], config["catalog"]["path"] = {"path": "store.db"}, "catalog.db"
    config["partitions"]["start"] = "2026-11-01"
    for d in config["datasets"]:
        d.pop("profile", None)
    if edit is not None:
        edit(config)
    path = folder / "lumos.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def run_in_process(config, catalogue, sources, partitions, read=None, store=None, datasets=None, now=None):
    """The snapshot run over `partitions` ((key, start, end) each, or `Window`s) of `datasets` (default:
    every dataset of `catalogue`), reading with `read` (default: in this process), into `store`
    (default: a new in-memory one, so versions start from nothing), delivering to no catalog."""
    from lumos_dagster.floor.windows import Window
    from lumos_dagster.formats.readers import read_in_process
    from lumos_dagster.run.snapshot import Services, SnapshotRun
    from lumos_dagster.store import SnapshotStore

    windows = [p if isinstance(p, Window) else Window(*p) for p in partitions]
    services = Services(read=read or read_in_process, say=lambda _: None, **({"now": now} if now else {}))
    own = store is None
    store = SnapshotStore("sqlite:///:memory:") if own else store
    try:
        run = SnapshotRun(config, catalogue, sources, store, None, services)
        return run.complete(catalogue.datasets if datasets is None else datasets, windows)
    finally:
        if own:
            store.close()


def spark_run(spark, config, sources, catalogue, partitions):
    """The snapshot run over every dataset of `catalogue`, reading on Spark, with no history."""
    from lumos_dagster.spark.schemas import read_schemas

    return run_in_process(config, catalogue, sources, partitions, read=lambda items: read_schemas(spark, items))


def drop_from_todays_orders(lake: Path, field: str) -> None:
    """The demo lake's raw/orders of 2026-11-25 without `field` (a breaking change)."""
    schema = {**ORDER_SCHEMA, "fields": [f for f in ORDER_SCHEMA["fields"] if f["name"] != field]}
    path = lake / "raw" / "orders" / "dt=2026-11-25" / "orders.avro"
    with open(path, "rb") as fh:
        rows = [{k: v for k, v in r.items() if k != field} for r in fastavro.reader(fh)]
    with open(path, "wb") as fh:
        fastavro.writer(fh, fastavro.parse_schema(schema), rows)


COST_NAMES = ["raw_events", "cleaned_events", "event_metrics", "feature_store", "ml_predictions"]
FOCUS_HEADER = (
    "BilledCost,EffectiveCost,ResourceId,ServiceName,ServiceCategory,Tags,ChargePeriodStart,ChargePeriodEnd\n"
)


def focus_rows(*rows) -> str:
    lines = [FOCUS_HEADER]
    for cost, resource, service, category, tags, start in rows:
        tag_text = json.dumps(tags).replace('"', '""')
        lines.append(f'{cost},{cost},{resource},{service},{category},"{tag_text}",{start},{start}\n')
    return "".join(lines)


def cost_example(tmp_path) -> Path:
    """The design's cost example as a project under `tmp_path`: its graph as a lake, its storage billed
    (FOCUS), its compute declared; its lumos.yaml."""
    for name in COST_NAMES:
        write_parquet(tmp_path / "lake" / "events" / name / "dt=2026-11-25/part.parquet", pa.table({"x": [1]}))
    november = "2026-11-01T00:00:00Z"
    (tmp_path / "focus.csv").write_text(focus_rows(
        (500, "arn:aws:s3:::lake/raw", "Amazon S3", "Storage", {"lumos_dataset": "events/raw_events"}, november),
        (200, "arn:aws:s3:::lake/fs", "Amazon S3", "Storage", {"lumos_dataset": "events/feature_store"}, november),
        (99, "arn:aws:ec2:::i-1", "Amazon EC2", "Compute", {}, november),  # nobody's
    ))  # fmt: skip
    compute = {"cleaned_events": 3000, "event_metrics": 1000, "feature_store": 2000, "ml_predictions": 1500}
    upstream = {"cleaned_events": ["raw_events"], "event_metrics": ["raw_events"], "feature_store": ["cleaned_events"],
                "ml_predictions": ["feature_store"]}  # fmt: skip
    weights = {"cleaned_events": 0.6, "event_metrics": 0.4}
    datasets = []
    for name in COST_NAMES:
        decl = {"name": f"events/{name}", "upstream": [f"events/{u}" for u in upstream.get(name, [])],
                "owners": [f"{name.split('_')[0]}@example.com"]}  # fmt: skip
        cost = {}
        if name in compute:
            cost["compute"] = {"unit": "usd", "per_month": compute[name]}
        if name in weights:
            cost["weights"] = {"events/raw_events": weights[name]}
        if cost:
            decl["cost"] = cost
        datasets.append(decl)
    config = {"sources": [{"name": "lake", "root": "lake"}], "datasets": datasets, "store": {"path": "store.db"},
              "catalog": {"path": "lite.db"}, "partitions": {"start": "2026-11-01"},
              "cost": {"billing": ["focus.csv"], "method": "lineage_weighted"}}  # fmt: skip
    (tmp_path / "lumos.yaml").write_text(yaml.safe_dump(config))
    return tmp_path / "lumos.yaml"
