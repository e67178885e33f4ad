"""Run time of the Dagster assets that produce datasets: what `compute.dagster_asset` prices."""

from datetime import UTC, datetime, timedelta

from dagster import AssetKey, DagsterInstance

LOOKBACK = timedelta(days=30)
MAX_RUNS = 1000


def hours_from_runs(instance: DagsterInstance, asset: str, now: datetime | None = None) -> float:
    """Hours the steps that materialized `asset` (a/b) took over the last 30 days: the step's own
    time, not its whole run's (a run may build many other assets)."""
    since = ((now or datetime.now(UTC)) - LOOKBACK).timestamp()
    records = instance.fetch_materializations(AssetKey(asset.split("/")), limit=MAX_RUNS).records
    steps = {(r.run_id, r.event_log_entry.step_key) for r in records if r.timestamp >= since}
    seconds = 0.0
    for run_id in {run_id for run_id, _ in steps}:
        for step in instance.get_run_step_stats(run_id):
            if (run_id, step.step_key) in steps and step.start_time and step.end_time:
                seconds += step.end_time - step.start_time
    return seconds / 3600
