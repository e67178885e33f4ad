"""Asset checks on dataset snapshots: their specs, and the judge step's outcomes as Dagster check
evaluations (`files_readable`, the `schema_compatible` gate, and when governance is configured
`metadata_complete` and `data_quality`)."""

from dagster import AssetCheckEvaluation, AssetCheckSeverity, AssetCheckSpec, AssetKey, MetadataValue

from lumos_dagster.assets.metadata import md_table
from lumos_dagster.floor.config import LumosConfig
from lumos_dagster.floor.dataset_specs import DatasetSpec
from lumos_dagster.floor.wording import visible
from lumos_dagster.governance.checks import (
    COMPATIBLE_CHECK,
    COMPLETE_CHECK,
    QUALITY_CHECK,
    READABLE_CHECK,
    CheckOutcome,
    Table,
    blocking_checks,
    check_names,
)

DESCRIPTIONS = {
    READABLE_CHECK: "Every file of the dataset can be read",
    COMPATIBLE_CHECK: "No breaking schema change under the dataset's policy, unless accepted in lumos.yaml",
    COMPLETE_CHECK: "The documentation governance.required asks for is there",
    QUALITY_CHECK: "Tests pass, the data is fresh, the score meets quality.min_score",
}


def check_specs(config: LumosConfig, d: DatasetSpec, key: AssetKey) -> list[AssetCheckSpec]:
    blocking = blocking_checks(config)
    return [
        AssetCheckSpec(name, asset=key, blocking=name in blocking, description=DESCRIPTIONS[name])
        for name in check_names(config, d)
    ]


def _value(value) -> MetadataValue:
    if isinstance(value, Table):
        return md_table(value.header, value.rows)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return MetadataValue.text(visible(str(value)))
    return MetadataValue.int(value) if isinstance(value, int) else MetadataValue.float(value)


def evaluation(key: AssetKey, outcome: CheckOutcome, partition: str | None = None) -> AssetCheckEvaluation:
    """Yielded as an event: a check result through an op output costs Dagster 1.13 a database query
    and a walk over every output of the step (docs/performance.md). Never `blocking` as Dagster means
    it (a failed blocking evaluation fails the step, and with it the run of every other dataset of
    the op): the snapshot run holds back the datasets downstream of a failed blocking check itself.

    `partition`: the run's partition when it has exactly one. Dagster records a planned execution of
    each check for that partition when the run starts; an evaluation without the partition would
    leave that row PLANNED for good and add one of its own. A run of a range judges each dataset
    once over the range: its evaluation names no partition (one per partition would multiply the
    events by the range's length)."""
    return AssetCheckEvaluation(
        asset_key=key,
        partition=partition,
        check_name=outcome.name,
        passed=outcome.passed,
        severity=AssetCheckSeverity.ERROR if outcome.severity == "ERROR" else AssetCheckSeverity.WARN,
        description=visible(outcome.description),  # it names fields and files: Dagster shows them as they are
        metadata={k: _value(v) for k, v in outcome.metadata.items()},
    )
