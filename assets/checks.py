"""Asset checks on dataset snapshots: `files_readable` and the `schema_compatible` gate."""

from typing import Mapping, Sequence

from dagster import AssetCheckResult, AssetCheckSeverity, AssetCheckSpec, AssetKey, MetadataValue

from assets.metadata import changes_table, md_table
from lumos_dagster.gate import Verdict
from lumos_dagster.impact import Affected
from lumos_dagster.model import Snapshot

READABLE_CHECK = "files_readable"
COMPATIBLE_CHECK = "schema_compatible"


def check_specs(key: AssetKey) -> list[AssetCheckSpec]:
    return [
        AssetCheckSpec(READABLE_CHECK, asset=key, description="Every file of the dataset can be read"),
        AssetCheckSpec(
            COMPATIBLE_CHECK,
            asset=key,
            blocking=True,
            description="No breaking schema change under the dataset's policy, unless accepted in lumos.yaml",
        ),
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
