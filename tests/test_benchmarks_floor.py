"""Dagster's floor (benchmarks/dagster_floor.py) records what it stands for: per asset one
materialization of the partition asked for and two check evaluations, in the shipped instance."""

import pytest

from benchmarks.dagster_floor import PARTITION, measure, render

pytestmark = pytest.mark.slow


def test_floor_records_one_materialization_and_two_checks_per_asset():
    (row,) = measure([20], variants=("metadata",), log=lambda _: None)
    assert row["status"] == "SUCCESS"
    assert row["materializations"] == sorted((f"d{i % 10}/ds_{i}", PARTITION) for i in range(20))
    assert row["checks"] == 40
    assert min(row["start_s"], row["run_s"], row["end_s"]) > 0
    assert "| 20 | events with metadata of Lumos' size |" in "\n".join(render([row]))
