"""Report assets: what the snapshots add up to, written to files and shown in Dagster."""

import os

from dagster import AssetExecutionContext, AssetKey, MaterializeResult, MetadataValue, asset

from lumos_dagster import cost_report
from lumos_dagster.config import LumosConfig
from lumos_dagster.datasets import Catalogue
from resources.store import SnapshotStoreResource

FORMATS = {"json": "json", "csv": "csv", "markdown": "md"}


def cost_report_asset(config: LumosConfig, catalogue: Catalogue, dataset_keys: list[AssetKey]):
    @asset(
        name="lumos_cost_report",
        group_name="reports",
        kinds={"report"},
        deps=dataset_keys,
        description="Monthly cost by dataset, owner, domain and platform, the trend, and unconsumed datasets.",
    )
    def _cost_report(context: AssetExecutionContext, lumos_store: SnapshotStoreResource) -> MaterializeResult:
        store = lumos_store.open()
        try:
            report = cost_report.build(store, catalogue)
        finally:
            store.close()
        folder = config.resolve(config.reports.dir)
        os.makedirs(folder, exist_ok=True)
        paths = {}
        for fmt, suffix in FORMATS.items():
            paths[fmt] = os.path.join(folder, f"cost-{report.month or 'none'}.{suffix}")
            with open(paths[fmt], "w") as fh:
                fh.write(cost_report.RENDER[fmt](report))
        context.log.info(f"cost report for {report.month}: {len(report.rows)} datasets priced")
        return MaterializeResult(
            metadata={
                "lumos/summary": MetadataValue.md(cost_report.to_markdown(report)),
                "lumos/direct_cost": MetadataValue.float(round(report.direct, 2)),
                "lumos/month": MetadataValue.text(report.month or "none"),
                **{f"lumos/file_{fmt}": MetadataValue.path(p) for fmt, p in paths.items()},
            }
        )

    return _cost_report
