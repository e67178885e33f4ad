"""Asset checks on dataset snapshots: `files_readable`, the `schema_compatible` gate, and when
governance is configured `metadata_complete` (required documentation) and `data_quality`."""

from typing import Mapping, Sequence

from dagster import AssetCheckResult, AssetCheckSeverity, AssetCheckSpec, AssetKey, MetadataValue

from assets.metadata import changes_table, md_table
from lumos_dagster.config import RequiredConfig
from lumos_dagster.governance.rules import missing_context
from lumos_dagster.lineage.impact import Affected
from lumos_dagster.model import Snapshot
from lumos_dagster.schema.gate import Verdict

READABLE_CHECK = "files_readable"
COMPATIBLE_CHECK = "schema_compatible"
COMPLETE_CHECK = "metadata_complete"
QUALITY_CHECK = "data_quality"


def check_specs(key: AssetKey, required_mode: str | None = None, quality: bool = False) -> list[AssetCheckSpec]:
    """`required_mode`: warn | block when lumos.yaml requires documentation of this dataset."""
    extra = []
    if required_mode is not None:
        extra.append(
            AssetCheckSpec(
                COMPLETE_CHECK,
                asset=key,
                blocking=required_mode == "block",
                description="The documentation governance.required asks for is there",
            )
        )
    if quality:
        extra.append(
            AssetCheckSpec(
                QUALITY_CHECK, asset=key, description="Tests pass, the data is fresh, the score meets quality.min_score"
            )
        )
    return [
        AssetCheckSpec(READABLE_CHECK, asset=key, description="Every file of the dataset can be read"),
        AssetCheckSpec(
            COMPATIBLE_CHECK,
            asset=key,
            blocking=True,
            description="No breaking schema change under the dataset's policy, unless accepted in lumos.yaml",
        ),
        *extra,
    ]


def readable_check(key: AssetKey, snapshots: Mapping[str | None, Snapshot]) -> AssetCheckResult:
    errors = [(f"`{e.path}`", e.reason) for s in snapshots.values() for e in s.errors]
    unreadable = any(not s.readable for s in snapshots.values() if s.errors)
    return AssetCheckResult(
        check_name=READABLE_CHECK,
        asset_key=key,
        passed=not errors,
        severity=AssetCheckSeverity.ERROR if unreadable else AssetCheckSeverity.WARN,
        description=(
            "every file was read"
            if not errors
            else f"{len(errors)} file(s) could not be read" + ("; no schema could be taken" if unreadable else "")
        ),
        metadata={"lumos/errors": md_table(("file", "reason"), errors)} if errors else {},
    )


def compatible_check(key: AssetKey, verdicts: Sequence[Verdict], affected: Sequence[Affected]) -> AssetCheckResult:
    unaccepted = [c for v in verdicts for c in v.unaccepted]
    accepted = [(c, why) for v in verdicts for c, why in v.accepted]
    metadata = {"lumos/breaking": MetadataValue.int(len(unaccepted))}
    if unaccepted:
        metadata["lumos/unaccepted"] = changes_table(unaccepted)
        metadata["lumos/downstream"] = md_table(
            ("dataset", "depth", "owners"),
            [(a.name, str(a.depth), ", ".join(o.id for o in a.owners) or "-") for a in affected],
        )
    if accepted:
        rows = [(c.kind, c.path, why) for c, why in accepted]
        metadata["lumos/accepted"] = md_table(("change", "field", "why"), rows)
    policy = verdicts[-1].policy if verdicts else "FULL"
    return AssetCheckResult(
        check_name=COMPATIBLE_CHECK,
        asset_key=key,
        passed=not unaccepted,
        severity=AssetCheckSeverity.ERROR,
        description=(
            f"{len(unaccepted)} breaking change(s) under {policy}, affecting {len(affected)} downstream dataset(s); "
            "accept them with accept_major or an allow rule in lumos.yaml"
            if unaccepted
            else f"compatible under {policy}" + (f" ({len(accepted)} accepted breaking change(s))" if accepted else "")
        ),
        metadata=metadata,
    )


def complete_check(key: AssetKey, snapshot: Snapshot, required: RequiredConfig) -> AssetCheckResult:
    missing = missing_context(snapshot, required) or []
    return AssetCheckResult(
        check_name=COMPLETE_CHECK,
        asset_key=key,
        passed=not missing,
        severity=AssetCheckSeverity.ERROR if required.mode == "block" else AssetCheckSeverity.WARN,
        description=f"missing: {'; '.join(missing)}" if missing else "documented as required",
        metadata={"lumos/missing": MetadataValue.text("; ".join(missing))} if missing else {},
    )


def quality_check(key: AssetKey, snapshot: Snapshot, min_score: float) -> AssetCheckResult:
    q = snapshot.quality
    failed = [a for a in q.assertions if a.status in ("fail", "error")] if q else []
    problems = [f"{len(failed)} failed test(s)"] if failed else []
    if q is not None and q.score is not None and q.score < min_score:
        problems.append(f"score {q.score:.2f} < {min_score}")
    if q is not None and q.freshness == "stale":
        problems.append(f"stale ({q.age_hours:g} h old, SLA {snapshot.sla})")
    metadata = {}
    if q is not None and q.score is not None:
        metadata["lumos/quality_score"] = MetadataValue.float(round(q.score, 3))
    if failed:
        metadata["lumos/failed"] = md_table(
            ("check", "column", "from", "message"),
            [(a.name, a.column or "-", a.source, a.message or "") for a in failed],
        )
    return AssetCheckResult(
        check_name=QUALITY_CHECK,
        asset_key=key,
        passed=not problems,
        severity=AssetCheckSeverity.ERROR if failed else AssetCheckSeverity.WARN,
        description="; ".join(problems)
        if problems
        else ("no quality evidence yet" if q is None else "tests pass, fresh"),
        metadata=metadata,
    )
