"""Governance rules, without Dagster or Spark: code tables → datasets, what code and lumos.yaml
add to a dataset, quality, required documentation, and the estate overview."""

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from lumos_dagster.floor.config import RequiredConfig, parse_config
from lumos_dagster.floor.dataset_specs import Enrichment
from lumos_dagster.floor.datatypes import Field, Primitive, Schema, Struct
from lumos_dagster.floor.model import (
    AssertionResult,
    ColumnMapping,
    ColumnProfile,
    DatasetRecord,
    DatasetRef,
    JobRef,
    OperationalStats,
    Owner,
    Profile,
    SchemaChange,
    Snapshot,
)
from lumos_dagster.governance.rules import assess, missing_by_owner, missing_context, read_assertions, todo_markdown
from lumos_dagster.lineage.catalogue import resolve_datasets
from lumos_dagster.lineage.resolve import CodeDoc, CodeEdge, TableNames, doc_from_json, doc_to_json, read_code
from lumos_dagster.reports.overview import Estate, build_overview, last_used, owner_todos, write_reports
from lumos_dagster.run.assemble import build_snapshot
from lumos_dagster.run.contents import Contents
from lumos_dagster.store import SnapshotStore

pytestmark = pytest.mark.browser

DATA = Path(__file__).parent / "data"
NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
DATASETS = ["warehouse/raw/orders", "warehouse/raw/customers", "marts/orders", "sales/orders", "lake/ref/fx_rates"]


@pytest.mark.parametrize(
    ("table", "dataset", "problem"),
    [
        ("raw.orders", "warehouse/raw/orders", None),  # the trailing parts of one dataset
        ("warehouse.raw.customers", "warehouse/raw/customers", None),  # exactly its parts
        ("prod.lake.ref.fx_rates", "lake/ref/fx_rates", None),  # the dataset's parts end the table's
        ("orders", None, "could be any of"),  # three datasets end in orders
        ("analytics.orders", "sales/orders", None),  # lineage.names says so
        ("raw.payments", None, None),  # not a dataset Lumos manages
    ],
)
def test_code_table_names_resolve_to_datasets(table, dataset, problem):
    names = TableNames(DATASETS, {"Analytics.Orders": "sales/orders"})
    found, why = names.resolve(table)
    assert found == dataset
    assert (why is None) if problem is None else (problem in why)


def _config(tmp_path, **sections):
    return parse_config(sections, base_dir=str(tmp_path))


def test_sql_folder_gives_edges_columns_jobs_and_documentation(tmp_path):
    config = _config(
        tmp_path,
        lineage={"sql": [{"path": str(DATA / "lineage" / "sql")}], "names": {"ref.fx_rates": "lake/ref/fx_rates"}},
    )
    code = read_code(config, {"raw/orders": [], "analytics/daily_revenue": [], "lake/ref/fx_rates": []})
    doc = code.docs["analytics/daily_revenue"]
    assert set(doc.upstream) == {"lake/ref/fx_rates", "raw/orders"}
    job = JobRef("sql", str(DATA / "lineage" / "sql"), "daily_revenue.sql")
    assert {e.job for e in doc.edges} == {job}
    orders = next(e for e in doc.edges if e.upstream == "raw/orders")
    assert (
        ColumnMapping("revenue_eur", "amount") in orders.columns
        and ColumnMapping("day", "order_date") in orders.columns
    )
    rates = next(e for e in doc.edges if e.upstream == "lake/ref/fx_rates")
    assert rates.columns == (ColumnMapping("revenue_eur", "rate"),)
    # the file's header documents what it writes; comments below the first statement do not
    assert doc.description == "Revenue per day, converted to EUR" and doc.sla == "6h"
    assert doc.owners == ("alice@example.com", "bob@example.com", "finance-team@example.com")
    # the broken file is a problem, not a crash; tables nobody manages are listed with their jobs
    assert any("staging/broken.sql" in p for p in code.problems)
    assert "raw.orders" not in code.external and code.external


def test_dbt_manifest_documents_models(tmp_path):
    config = _config(tmp_path, lineage={"dbt": {"manifest": str(DATA / "lineage" / "dbt" / "manifest.json")}})
    manifest = json.loads((DATA / "lineage" / "dbt" / "manifest.json").read_text())
    models = {k: v for k, v in manifest["nodes"].items() if v["resource_type"] == "model"}
    names = [f"{n['schema']}/{n.get('alias') or n['name']}" for n in models.values()]
    sources = [f"{s['schema']}/{s['identifier']}" for s in manifest["sources"].values()]
    code = read_code(config, dict.fromkeys(names + sources, []))
    assert code.docs, code.problems
    for name, doc in code.docs.items():
        assert name in names + sources
        assert all(e.job.orchestrator == "dbt" and e.job.name.startswith("model.") for e in doc.edges)
    documented = [d for d in code.docs.values() if d.description]
    assert documented and any(d.column_descriptions for d in code.docs.values())
    # a source: the lake table dbt reads gets dbt's documentation and its freshness as the SLA
    orders = code.docs["raw_shop/orders"]
    assert (orders.edges, orders.description, orders.sla) == ((), "Orders as placed", "12h")


def test_code_docs_round_trip_through_json():
    doc = CodeDoc(
        edges=(CodeEdge("raw/orders", JobRef("dbt", "shop", "model.shop.orders"), (ColumnMapping("id", "order_id"),)),),
        description="Orders",
        owners=("ann@example.com",),
        sla="6h",
        tags=("gold",),
        column_descriptions={"id": "Order id"},
    )
    assert doc_from_json(json.loads(json.dumps(doc_to_json(doc)))) == doc


def _record(name: str) -> DatasetRecord:
    return DatasetRecord(name=name, platform="file", source="lake", location=name, format="parquet")


def test_declarations_win_over_code_and_code_over_patterns(tmp_path):
    config = _config(
        tmp_path,
        datasets=[
            {"name": "marts/orders", "upstream": ["raw/orders"], "owners": ["ann@example.com"]},
            {"name": "marts/revenue", "sla": "1 day"},
        ],
        governance={
            "descriptions": [{"path": "marts/*", "description": "A mart."}],
            "glossary": [{"column": "*_id", "term": "Identifier"}],
        },
    )
    job = JobRef("sql", "sql", "marts.sql")
    code = {
        "marts/orders": CodeDoc(
            edges=(CodeEdge("raw/orders", job, (ColumnMapping("id", "order_id"),)), CodeEdge("raw/refunds", job)),
            description="Orders, cleaned",
            owners=("bob@example.com",),
        ),
        "marts/revenue": CodeDoc(edges=(CodeEdge("marts/orders", job),), owners=("group:finance",), sla="6h"),
    }
    records = [_record(n) for n in ("raw/orders", "raw/refunds", "marts/orders", "marts/revenue")]
    by_name = resolve_datasets(config, records, {"lake": "/lake"}, code).by_name()
    orders = by_name["marts/orders"]
    # declared lineage is the override; code still says how the declared edge's columns flow
    assert orders.upstream == ("raw/orders",)
    (edge,) = orders.enrichment.upstream
    assert edge.columns == (ColumnMapping("id", "order_id"),) and edge.job == job
    assert [o.id for o in orders.enrichment.owners] == ["ann@example.com"]
    assert orders.enrichment.description == "Orders, cleaned"
    revenue = by_name["marts/revenue"]
    assert revenue.upstream == ("marts/orders",)
    assert [(o.id, o.kind) for o in revenue.enrichment.owners] == [("finance", "group")]
    assert revenue.enrichment.sla == "1d"  # declared, in one unit
    assert revenue.enrichment.description is None and revenue.enrichment.default_description == "A mart."


def _contents(schema: Schema, description: str | None = None, modified: datetime | None = NOW) -> Contents:
    return Contents(schema=schema, stats=OperationalStats(1, 100, 10, modified), description=description)


def test_snapshots_get_code_column_docs_glossary_terms_and_the_pattern_description_last():
    schema = Schema(
        (
            Field("cust_id", Primitive("int64"), description="from the file"),
            Field("buyer", Struct((Field("cust_id", Primitive("int64")), Field("email", Primitive("string"))))),
        )
    )
    enrichment = Enrichment(
        default_description="A mart.",
        column_descriptions={"cust_id": "from code", "buyer.email": "Buyer e-mail"},
        glossary=(("CUST_ID", "Customer Identifier"), ("*mail", "Email Address")),
        sla="6h",
    )
    ref = DatasetRef("file", "marts/buyers", "/lake/marts/buyers", "parquet")
    snap = build_snapshot(ref, "2026-11-25", NOW, _contents(schema), enrichment, [])
    fields = dict(snap.schema.flatten())
    assert fields["cust_id"].description == "from the file"  # the source's own documentation stays
    assert fields["buyer.email"].description == "Buyer e-mail"
    assert fields["buyer.cust_id"].terms == ("Customer Identifier",) and fields["buyer.email"].terms == (
        "Email Address",
    )
    assert snap.terms == ("Customer Identifier", "Email Address") and snap.sla == "6h"
    assert snap.description == "A mart."
    # the source's description beats a path pattern
    described = build_snapshot(ref, None, NOW, _contents(schema, "from the source"), enrichment, [])
    assert described.description == "from the source"
    # terms do not change the schema's fingerprint: they are documentation
    assert snap.fingerprint == build_snapshot(ref, None, NOW, _contents(schema), Enrichment(), []).fingerprint
    # declared keys: files cannot say which columns are the key, lumos.yaml can (nested paths too)
    keyed = build_snapshot(ref, None, NOW, _contents(schema), Enrichment(keys=("buyer.cust_id",)), [])
    assert [p for p, f in keyed.schema.flatten() if f.is_key] == ["buyer.cust_id"]


def _snapshot(name="sales/orders", **changes) -> Snapshot:
    base = dict(
        dataset=DatasetRef("file", name, f"/lake/{name}", "parquet"),
        partition_key="2026-11-25",
        captured_at=NOW,
        schema=Schema((Field("id", Primitive("int64"), is_key=True), Field("note", Primitive("string")))),
        stats=OperationalStats(1, 100, 100, NOW - timedelta(hours=8)),
    )
    return Snapshot(**{**base, **changes})


def _assertion(status, dimension="validity"):
    return AssertionResult(f"check_{status}_{dimension}", status, dimension, None, "dbt")


def test_quality_joins_tests_profile_and_freshness():
    profile = Profile(100, 1.0, (ColumnProfile("id", 0.0, 90, "1", "100"), ColumnProfile("note", 0.5, 3)))
    tests = [_assertion("pass"), _assertion("fail"), _assertion("pass", "completeness")]
    snap = assess(_snapshot(sla="6h"), tests, profile, NOW)
    # validity 0.5, completeness 1, profile completeness 0.75, key uniqueness 0.9
    assert snap.quality.score == pytest.approx((0.5 + 1 + 0.75 + 0.9) / 4)
    assert (snap.quality.freshness, snap.quality.age_hours) == ("stale", 8.0)
    assert snap.profile == profile and snap.quality.assertions == tuple(tests)
    assert assess(_snapshot(sla="1d"), [], None, NOW).quality.freshness == "fresh"
    # nothing to judge by: no quality at all, rather than a made-up one
    assert assess(_snapshot(), [], None, NOW).quality is None


@pytest.mark.parametrize(
    ("fields", "snapshot", "missing"),
    [
        (["description", "owner"], {}, ["description", "owner"]),
        (["description", "owner"], {"description": "d", "owners": (Owner("a@x.io"),)}, []),
        (["domain", "tags", "sla"], {"domain": "sales"}, ["tags", "sla"]),
        (["column_descriptions"], {}, ["column descriptions (id, note)"]),
    ],
)
def test_required_fields(fields, snapshot, missing):
    assert missing_context(_snapshot(**snapshot), RequiredConfig(fields=fields)) == missing


def test_exempt_datasets_and_the_per_owner_list():
    required = RequiredConfig(fields=["description"], except_=["tmp/*"])
    assert missing_context(_snapshot("tmp/scratch"), required) is None
    snaps = [
        _snapshot("sales/orders", owners=(Owner("ann@x.io"), Owner("data-eng", "group"))),
        _snapshot("sales/refunds", owners=(Owner("ann@x.io"),)),
        _snapshot("raw/events"),
        _snapshot("sales/ok", description="documented", owners=(Owner("ann@x.io"),)),
        _snapshot("tmp/scratch"),
    ]
    todos = missing_by_owner(snaps, required, lambda s: (("catalog", f"http://dh/{s.dataset.name}"),))
    assert {owner: [t.dataset for t in items] for owner, items in todos.items()} == {
        "(unowned)": ["raw/events"],
        "ann@x.io": ["sales/orders", "sales/refunds"],
        "data-eng": ["sales/orders"],
    }
    text = todo_markdown(todos, required)
    assert "## ann@x.io (2)" in text and "- `sales/refunds`: description — [catalog](http://dh/sales/refunds)" in text


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ([], "Nothing is required of datasets (governance.required.fields is empty), so nothing is missing."),
        (["owner", "description"], "Every dataset has what governance.required asks for: owner, description."),
    ],
)
def test_an_empty_missing_context_list_says_what_was_asked(fields, says):
    """Not "every dataset has the required context" beside owners at 20 % when nothing was required."""
    assert todo_markdown({}, RequiredConfig(fields=fields)) == says


def test_assertions_are_matched_to_datasets_and_bad_files_are_reported(tmp_path):
    good = DATA / "quality" / "ge_classic_customers.json"
    (tmp_path / "ge").mkdir()
    (tmp_path / "ge" / "customers.json").write_text(good.read_text())
    (tmp_path / "ge" / "broken.json").write_text("{not json")
    config = _config(
        tmp_path,
        quality={"great_expectations": ["ge"]},
        lineage={
            "dbt": {"manifest": str(DATA / "quality" / "manifest.json"), "run_results": "missing/run_results.json"}
        },
    )
    found, problems = read_assertions(config, ["crm/customers"])
    assert {a.source for a in found["crm/customers"]} == {"great_expectations"}
    assert any("broken.json" in p for p in problems)
    assert any(p.startswith("lineage.dbt.run_results:") for p in problems)


def test_dbt_results_reach_their_datasets(tmp_path):
    config = _config(
        tmp_path,
        lineage={
            "dbt": {
                "manifest": str(DATA / "quality" / "manifest.json"),
                "run_results": str(DATA / "quality" / "run_results.json"),
            }
        },
    )
    manifest = json.loads((DATA / "quality" / "manifest.json").read_text())
    tables = {f"{n['schema']}/{n.get('alias') or n['name']}" for n in manifest["nodes"].values() if "schema" in n}
    found, problems = read_assertions(config, sorted(tables))
    assert found, problems
    statuses = {a.status for results in found.values() for a in results}
    assert "pass" in statuses and statuses & {"fail", "warn", "error"}


# ------------------------------------------------------------------ the overview


@pytest.fixture
def estate(tmp_path):
    store = SnapshotStore(f"sqlite:///{tmp_path / 'store.db'}")
    names = ["raw/events", "clean/events", "marts/daily", "tmp/scratch"]
    store.upsert_datasets([_record(n) for n in names])
    store.put(
        [
            _snapshot("raw/events", owners=(Owner("data-eng", "group"),), description="Events", tags=("raw",),
                      version="1.0.0", change_class="new", captured_at=NOW - timedelta(days=30)),
            _snapshot("raw/events", owners=(Owner("data-eng", "group"),), description="Events", tags=("raw",),
                      version="2.0.0", previous_version="1.0.0", change_class="major",
                      captured_at=NOW - timedelta(days=1),
                      changes=(SchemaChange("note", "FIELD_REMOVED", "string", None, True, False, "BREAKING"),)),
            _snapshot("clean/events", owners=(Owner("ann@x.io"),), quality=None, version="1.0.0", change_class="new"),
            _snapshot("marts/daily", stats=OperationalStats(1, 100, 100, NOW - timedelta(days=90))),
            _snapshot("tmp/scratch"),
        ]
    )  # fmt: skip
    config = parse_config(
        {
            "sources": [{"name": "lake", "root": str(tmp_path)}],
            "datasets": [{"name": "clean/events", "upstream": ["raw/events"]},
                         {"name": "marts/daily", "upstream": ["clean/events"]}],
            "governance": {"required": {"fields": ["description", "owner"], "except": ["tmp/*"]},
                           "catalog_url": "http://datahub:9002", "dagster_url": "http://dagster:3000"},
        },
        base_dir=str(tmp_path),
    )  # fmt: skip
    catalogue = resolve_datasets(config, store.datasets(), {"lake": str(tmp_path)})
    yield store, catalogue, config
    store.close()


def test_the_overview_adds_up(estate):
    store, catalogue, config = estate
    data = build_overview(store, catalogue, config, NOW)
    assert data["totals"]["datasets"] == 4 and data["totals"]["owned"] == 2
    assert data["inventory"]["by_team"] == {"data-eng": 1, "ann@x.io": 1, "(none)": 2}
    assert [s["dataset"] for s in data["stale"]] == ["marts/daily"] and data["stale"][0]["days"] == 90
    assert [u["dataset"] for u in data["unowned"]] == ["marts/daily", "tmp/scratch"]
    # the major change of yesterday is this week's; last month's first version is not
    assert [(c["dataset"], c["version"], c["breaking"]) for c in data["changes_this_week"]] == [
        ("raw/events", "2.0.0", 1)
    ]
    # the riskiest: its breaking change failed its check (issue 41: "Riskiest: none" beside it)
    assert data["risky"][0] == {"dataset": "raw/events", "downstream": 2, "owners": [],
                                "failed": "2.0.0: FIELD_REMOVED note"}  # fmt: skip
    assert data["totals"]["unowned"] == 2
    assert data["coverage"]["owners"] == 0.5 and data["cost"] is None


def _used(days_ago: int, scans: int, inserts: int = 0, name: str = "db/t") -> Snapshot:
    """A table's capture with the counters its database keeps."""
    usage = {"seq_scan": scans, "idx_scan": 0, "n_tup_ins": inserts, "n_tup_upd": 0, "n_tup_del": 0}
    return _snapshot(name, captured_at=NOW - timedelta(days=days_ago), stats=OperationalStats(usage=usage))


@pytest.mark.parametrize(
    "captures, last",
    [
        ([], None),
        ([_used(50, 3), _used(40, 3), _used(1, 3)], 50),  # nothing moved since the first capture
        ([_used(50, 3), _used(40, 4), _used(1, 4)], 40),  # queried between the first two captures
        ([_used(50, 3), _used(40, 3), _used(1, 3, inserts=1)], 1),  # a row inserted lately
        ([_used(50, 9), _used(40, 2), _used(1, 2)], 40),  # counters reset (a restart): activity, not silence
    ],
)
def test_a_table_is_in_use_while_its_counters_move(captures, last):
    assert last_used(captures) == (NOW - timedelta(days=last) if last is not None else None)


def test_a_table_nobody_queries_or_changes_is_stale(estate):
    store, catalogue, config = estate
    store.upsert_datasets([_record("db/quiet"), _record("db/busy")])
    quiet = [_used(d, 3, name="db/quiet") for d in (50, 40, 1)]
    busy = [_used(d, n, name="db/busy") for d, n in ((50, 3), (40, 3), (1, 4))]
    store.put(quiet + busy)
    catalogue = resolve_datasets(config, store.datasets(), {"lake": config.sources[0].root})
    stale = {s["dataset"]: s["days"] for s in build_overview(store, catalogue, config, NOW)["stale"]}
    assert stale == {"marts/daily": 90, "db/quiet": 50}  # db/busy was scanned since the last capture but one


def test_reports_are_written_in_every_format_with_links(estate, tmp_path):
    store, catalogue, config = estate
    estate_now = Estate.load(store, catalogue, NOW - timedelta(days=7))
    todos = owner_todos(estate_now, config, catalogue)
    overview = build_overview(store, catalogue, config, NOW, estate_now)
    paths = write_reports(str(tmp_path / "reports"), overview, todos, config.governance.required)
    assert json.loads(Path(paths["json"]).read_text())["totals"]["datasets"] == 4
    assert Path(paths["xlsx"]).stat().st_size > 0 and Path(paths["html"]).read_text().startswith("<!DOCTYPE html>")
    assert sorted(p.name for p in Path(paths["csv"]).iterdir())
    owners = json.loads(Path(paths["missing_context_json"]).read_text())
    assert sorted(owners) == ["(unowned)", "ann@x.io"]
    (daily,) = owners["(unowned)"]
    assert daily["dataset"] == "marts/daily" and daily["missing"] == ["description", "owner"]
    assert daily["links"] == {
        "catalog": "http://datahub:9002/dataset/urn%3Ali%3Adataset%3A%28urn%3Ali%3AdataPlatform%3Afile%2Clake%2Fmarts"
        "%2Fdaily%2CPROD%29",
        "dagster": "http://dagster:3000/assets/marts/daily",
    }


def test_the_built_overview_draws_its_figures_in_chromium(estate, tmp_path):
    from lumos_dagster.reports.render import to_html
    from tests.test_overview_render import _browse, _Page

    store, catalogue, config = estate
    dom, screenshot = _browse(to_html(build_overview(store, catalogue, config, NOW)), tmp_path)
    bars = {name: chart["bars"] for name, chart in _Page(dom).charts.items()}
    assert bars["inventory-platform"] == [("file", "4")]
    assert bars["coverage"] == [("owners", "50"), ("docs", "25"), ("tags", "25"), ("quality", "0")]
    assert bars["changes"] == [("breaking", "1"), ("other", "0")]
    assert screenshot.stat().st_size > 10_000
