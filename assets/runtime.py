"""Run time of the Dagster assets that produce datasets: what `compute.dagster_asset` prices."""

from datetime import UTC, datetime, timedelta

from dagster import AssetKey, DagsterInstance

LOOKBACK = timedelta(days=30)
MAX_RUNS = 1000


def hours_from_runs(instance: DagsterInstance, asset: str, now: datetime | None = None) -> float:
    """Hours the runs that materialized `asset` (a/b) took over the last 30 days."""
    since = ((now or datetime.now(UTC)) - LOOKBACK).timestamp()
    records = instance.fetch_materializations(AssetKey(asset.split("/")), limit=MAX_RUNS).records
    run_ids = {r.run_id for r in records if r.timestamp >= since}
    seconds = 0.0
    for run_id in run_ids:
        stats = instance.get_run_stats(run_id)
        if stats.start_time and stats.end_time:
            seconds += stats.end_time - stats.start_time
    return seconds / 3600
