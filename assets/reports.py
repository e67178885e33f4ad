"""Report assets: what the snapshots add up to, written to files and shown in Dagster.

Both reports live in one subsettable `multi_asset`. They read the store, not Dagster outputs, so
they declare no dependencies: edges from every dataset would bury the lineage graph (16 of 24
edges in the demo) and make every dataset an op output in a run with them (docs/performance.md).
Run with datasets, they come last: the in-process executor runs the ready step of highest priority
first, and theirs is lower than the dataset steps'. On their own they report what the store holds.
"""

import os
from datetime import datetime, timedelta, timezone

from dagster import (
    AssetExecutionContext,
    AssetKey,
    AssetSpec,
    BackfillPolicy,
    MaterializeResult,
    MetadataValue,
    multi_asset,
)

from lumos_dagster.floor.config import LumosConfig
from lumos_dagster.floor.dataset_specs import Catalogue
from lumos_dagster.floor.errors import LumosError
from lumos_dagster.floor.wording import VISIBLE_LOG
from lumos_dagster.governance.rules import post_webhook, todo_json, todo_markdown
from lumos_dagster.reports import cost as cost_report
from lumos_dagster.resources.store import SnapshotStoreResource
from lumos_dagster.store.roles import HistoryAndReleases, HistoryStore

FORMATS = {"json": "json", "csv": "csv", "markdown": "md"}
COST_REPORT = AssetKey("lumos_cost_report")
OVERVIEW = AssetKey("lumos_overview")


def _cost_report(config: LumosConfig, catalogue: Catalogue, store: HistoryStore, log) -> MaterializeResult:
    report = cost_report.build(store, catalogue)
    folder = config.resolve(config.reports.dir)
    os.makedirs(folder, exist_ok=True)
    paths = {}
    for fmt, suffix in FORMATS.items():
        paths[fmt] = os.path.join(folder, f"cost-{report.month or 'none'}.{suffix}")
        with open(paths[fmt], "w") as fh:
            fh.write(cost_report.RENDER[fmt](report))
    log.info(f"cost report for {report.month}: {len(report.rows)} datasets priced")
    return MaterializeResult(
        asset_key=COST_REPORT,
        metadata={
            "lumos/summary": MetadataValue.md(cost_report.to_markdown(report)),
            "lumos/direct_cost": MetadataValue.float(round(report.direct, 2)),
            "lumos/month": MetadataValue.text(report.month or "none"),
            **{f"lumos/file_{fmt}": MetadataValue.path(p) for fmt, p in paths.items()},
        },
    )


def _overview(config: LumosConfig, catalogue: Catalogue, store: HistoryAndReleases, log) -> MaterializeResult:
    # openpyxl and the renderers load only when the report runs, not with the code location
    from lumos_dagster.reports.overview import Estate, build_overview, owner_todos, write_reports
    from lumos_dagster.reports.render import to_markdown

    now = datetime.now(timezone.utc)
    estate = Estate.load(store, catalogue, now - timedelta(days=7))
    data = build_overview(store, catalogue, config, now, estate)
    todos = owner_todos(estate, config, catalogue)
    paths = write_reports(config.resolve(config.reports.dir), data, todos, config.governance.required)
    webhook = config.governance.webhook
    if webhook:
        try:
            post_webhook(webhook, {"generated_at": data["generated_at"], "owners": todo_json(todos)})
        except LumosError as exc:  # the files are written: a webhook that is down loses nothing
            log.warning(str(exc))
    return MaterializeResult(
        asset_key=OVERVIEW,
        metadata={
            "lumos/summary": MetadataValue.md(to_markdown(data)),
            "lumos/missing_context": MetadataValue.md(todo_markdown(todos, config.governance.required)),
            "lumos/datasets": MetadataValue.int(data["totals"]["datasets"]),
            "lumos/owner_coverage": MetadataValue.float(round(data["coverage"]["owners"], 3)),
            "lumos/docs_coverage": MetadataValue.float(round(data["coverage"]["docs"], 3)),
            **{f"lumos/file_{fmt}": MetadataValue.path(p) for fmt, p in paths.items()},
        },
    )


def report_assets(config: LumosConfig, catalogue: Catalogue):
    @multi_asset(
        name="lumos_reports",
        specs=[
            AssetSpec(
                COST_REPORT,
                group_name="reports",
                kinds={"report"},
                description="Monthly cost by dataset, owner, domain and platform, the trend, and unconsumed datasets.",
            ),
            AssetSpec(
                OVERVIEW,
                group_name="reports",
                kinds={"report"},
                description="The estate at a glance: inventory, stale and unowned datasets, this week's changes, "
                "riskiest datasets, coverage, cost; and what each owner must fill in (HTML, Excel, CSV, JSON).",
            ),
        ],
        can_subset=True,
        op_tags={"dagster/priority": "-1"},
        # `dagster asset materialize --select '*' --partition-range A...B` needs it on every asset
        backfill_policy=BackfillPolicy.single_run(),
    )
    def _reports(context: AssetExecutionContext, lumos_store: SnapshotStoreResource):
        context.log.addFilter(VISIBLE_LOG)
        with lumos_store.faults(), lumos_store.open() as store:
            for key, build in ((COST_REPORT, _cost_report), (OVERVIEW, _overview)):
                if key in context.selected_asset_keys:
                    yield build(config, catalogue, store, context.log)

    return _reports
