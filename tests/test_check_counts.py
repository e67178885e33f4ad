"""The schema_compatible check counts a breaking change once per version where it happened, however
many partitions of a backfill hold that version (issue 29: 13 changes × 19 days read "247")."""

import pytest

from lumos_dagster.floor.model import BREAKING, SchemaChange
from lumos_dagster.governance.checks import compatible
from lumos_dagster.schema.gate import Verdict


def change(path: str, kind: str = "FIELD_REMOVED") -> SchemaChange:
    return SchemaChange(path, kind, "int64", None, backward=True, forward=False, severity=BREAKING)


def verdict(version: str, *changes: SchemaChange, accepted: tuple = ()) -> Verdict:
    return Verdict("sales/orders", version, "FULL", tuple(changes), accepted)


A, B = change("a"), change("b")
CASES = {
    # title: (the partitions' verdicts, oldest first; breaking changes counted, accepted ones counted)
    "one version in every partition of a backfill": ([verdict("2.0.0", A, B)] * 19, 2, 0),
    "the same change again in a later version": ([verdict("2.0.0", A), verdict("3.0.0", change("a"))], 2, 0),
    "two versions, two changes": ([verdict("2.0.0", A), verdict("2.0.0", A), verdict("3.0.0", B)], 2, 0),
    "accepted in every partition": ([verdict("2.0.0", A, accepted=((A, "allowed"),))] * 5, 0, 1),
    "nothing breaking": ([verdict("1.1.0")] * 3, 0, 0),
}


@pytest.mark.parametrize("case", CASES)
def test_breaking_changes_count_once_per_version(case):
    verdicts, breaking, accepted = CASES[case]
    outcome = compatible(verdicts, ())
    assert outcome.metadata["lumos/breaking"] == breaking
    assert outcome.passed == (breaking == 0)
    if breaking:
        assert outcome.description.startswith(f"{breaking} breaking change")
    if accepted:
        assert len(outcome.metadata["lumos/accepted"].rows) == accepted
        assert f"({accepted} accepted breaking change" in outcome.description


def test_a_file_failing_in_every_partition_of_a_backfill_is_listed_once():
    """The demo's lumos/errors listed one torn file 3 times: an undated file is in each partition's window."""
    from datetime import datetime, timezone

    from lumos_dagster.floor.model import DatasetRef, FileError, Snapshot
    from lumos_dagster.governance.checks import error_rows

    torn = FileError("/lake/landing/feed/batch-2.parquet", "not a valid Parquet file")
    other = FileError("/lake/landing/feed/batch-3.parquet", "not a valid Parquet file")
    ref = DatasetRef("file", "landing/feed", "/lake/landing/feed", "parquet")
    at = datetime(2026, 11, 25, tzinfo=timezone.utc)
    snaps = {pk: Snapshot(ref, pk, at, errors=(torn,) if pk != "2026-11-25" else (torn, other))
             for pk in ("2026-11-23", "2026-11-24", "2026-11-25")}  # fmt: skip
    assert error_rows(snaps, "/lake") == (
        ("`landing/feed/batch-2.parquet`", "not a valid Parquet file"),
        ("`landing/feed/batch-3.parquet`", "not a valid Parquet file"),
    )
