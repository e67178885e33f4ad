"""Tags of the runs that automation launches: the storage and table sensors', the cadence
schedules', the release and dataset-schedule sensors' run requests."""

#: Dagster skips, for a run with this tag, the planned events it writes when the run is created: one
#: per asset-partition the run plans and one per asset check (Dagster's tag
#: `dagster/defer_asset_events`). For a dataset-partition that is 3 of the 6 events it costs, about
#: half its bookkeeping on Dagster's stock instance (docs/performance.md, benchmarks/instance.py);
#: its materialization and check evaluations are recorded as ever.
#:
#: The trade-off: while such a run runs, the UI does not show its partitions "in progress"; if it
#: fails, the partitions it did not materialize are not marked failed (Dagster derives that from
#: the planned events, and asset backfills rely on it); the run itself still shows as failed, with
#: its log, and re-executing it takes the same partitions. An asset whose events come from op
#: outputs would record none under this tag: the runs tagged select only dataset assets, whose op
#: yields its events (assets/snapshots.py). Nobody watches automated runs start, so they take the
#: saving; a person's materializations and UI backfills keep Dagster's planned events.
AUTOMATION_RUN_TAGS = {"dagster/defer_asset_events": "true"}
