"""Versions are decided once, where the store keeps them, and every judgement works on those versions:
the Dagster check, `lumos gate`, the API and `lumos diff` agree, whatever order partitions come in
and whatever policy the dataset has now. `lumos snapshot` is the same run as a Dagster materialization."""

import json

import pyarrow as pa
import pytest
import yaml
from click.testing import CliRunner
from dagster import DagsterInstance

from lumos_dagster.api.service import Lumos
from lumos_dagster.cli import main
from lumos_dagster.definitions import build_definitions
from lumos_dagster.floor.config import load_config
from lumos_dagster.floor.snapshot_json import snapshot_to_json
from lumos_dagster.store import SnapshotStore, acceptances
from tests.lake import register, write_parquet

pytestmark = pytest.mark.dagster

URN = "urn:lumos:dataset:file:raw/payments"


def project(tmp_path, days: dict[str, pa.Table], policy: str | None = None):
    for day, table in days.items():
        write_parquet(tmp_path / "lake" / "raw" / "payments" / f"dt={day}" / "p.parquet", table)
    declared = {"name": "raw/payments", **({"policy": policy} if policy else {})}
    config = {"sources": [{"name": "lake", "root": "lake"}], "store": {"path": "store.db"},
              "catalog": {"path": "lite.db"}, "partitions": {"start": "2026-11-20"},
              "datasets": [declared]}  # fmt: skip
    (tmp_path / "lumos.yaml").write_text(yaml.safe_dump(config))
    cfg = load_config(str(tmp_path / "lumos.yaml"))
    register(cfg)
    return cfg


def materialize(cfg, day: str, instance):
    """One Dagster run of `day`; the `schema_compatible` evaluation it yielded."""
    job = build_definitions(cfg).resolve_implicit_global_asset_job_def()
    result = job.execute_in_process(partition_key=day, instance=instance)
    assert result.success  # a failed check never fails the run: the dataset shows it
    (check,) = [e for e in result.get_asset_check_evaluations() if e.check_name == "schema_compatible"]
    return check


def gate(cfg, *args: str):
    return CliRunner().invoke(main, ["gate", "-c", cfg.source_file, "--format", "json", *args])


def ints(values, kind=None) -> pa.Table:
    return pa.table({"cents": pa.array(values, kind or pa.int64())})


def test_a_late_earlier_partition_is_judged_with_the_later_one_the_store_versioned_again(tmp_path):
    """The 26th is recorded before the 25th, which breaks: the store slots the 25th in (2.0.0) and
    versions the 26th again against it (3.0.0). The 25th's run judges both as the store keeps them,
    and `lumos gate` judges the same versions."""
    text = pa.table({"cents": pa.array(["1", "2"])})
    cfg = project(tmp_path, {"2026-11-24": ints([1, 2]), "2026-11-25": text, "2026-11-26": ints([3, 4])})
    instance = DagsterInstance.ephemeral()
    assert materialize(cfg, "2026-11-24", instance).passed
    assert materialize(cfg, "2026-11-26", instance).passed  # the same schema as the 24th: 1.0.0 still
    check = materialize(cfg, "2026-11-25", instance)
    with SnapshotStore(cfg.store_url) as store:
        kept = {s.partition_key: s.version for s in store.history(URN)}
    assert kept == {"2026-11-24": "1.0.0", "2026-11-25": "2.0.0", "2026-11-26": "3.0.0"}
    assert not check.passed
    shown = check.metadata["lumos/unaccepted"].value
    assert "int64 → string" in shown and "string → int64" in shown  # the 25th's change and the 26th's, re-versioned
    newest = json.loads(gate(cfg).output)
    assert newest["breaking"] == 1 and newest["datasets"][0]["new_version"] == "3.0.0"
    on_the_25th = json.loads(gate(cfg, "--partition", "2026-11-25").output)
    assert on_the_25th["datasets"][0]["new_version"] == "2.0.0"

    # an acceptance is for one version: accepting 2.0.0 leaves the 26th's 3.0.0 failing, in the check and the gate
    with SnapshotStore(cfg.store_url) as store, store.engine.begin() as conn:
        acceptances.record(conn, "raw/payments", "2.0.0", "*", None, "text cents for a day", "ci")
    assert not materialize(cfg, "2026-11-25", instance).passed
    assert gate(cfg, "--partition", "2026-11-25").exit_code == 0 and gate(cfg).exit_code == 1
    with SnapshotStore(cfg.store_url) as store, store.engine.begin() as conn:
        acceptances.record(conn, "raw/payments", "3.0.0", "*", None, "back to integers", "ci")
    assert materialize(cfg, "2026-11-25", instance).passed
    assert gate(cfg).exit_code == 0


def test_a_policy_changed_after_a_version_was_recorded_judges_it_again_everywhere(tmp_path):
    """2.0.0 widened `cents` (backward compatible, not forward) and broke under FULL. Once lumos.yaml
    says BACKWARD, the check (after the next run), `lumos gate`, the API and `lumos diff` all pass it."""
    days = {"2026-11-24": ints([1, 2], pa.int32()), "2026-11-25": ints([1, 2])}
    cfg = project(tmp_path, days)
    instance = DagsterInstance.ephemeral()
    materialize(cfg, "2026-11-24", instance)
    assert not materialize(cfg, "2026-11-25", instance).passed
    assert gate(cfg).exit_code == 1

    cfg = project(tmp_path, days, policy="BACKWARD")
    assert gate(cfg).exit_code == 0
    report = json.loads(gate(cfg).output)
    assert report["datasets"][0]["policy"] == "BACKWARD" and report["datasets"][0]["new_version"] == "2.0.0"
    assert materialize(cfg, "2026-11-25", instance).passed
    with Lumos.open(cfg.source_file) as api:
        assert api.gate().passed
    diff = CliRunner().invoke(main, ["diff", "raw/payments@1.0.0", "raw/payments@2.0.0", "-c", cfg.source_file])
    assert diff.exit_code == 0 and "NON_BREAKING" in diff.output


def _stored(cfg) -> dict[str, dict]:
    """Each stored snapshot's document, without when it was captured (nor the files written)."""
    with SnapshotStore(cfg.store_url) as store:
        docs = {s.partition_key: snapshot_to_json(s) for s in store.history(URN)}
    for doc in docs.values():
        doc.pop("captured_at")
        doc["stats"].pop("last_modified")
    return docs


def test_lumos_snapshot_stores_what_a_dagster_run_of_the_same_lake_stores(tmp_path):
    days = {"2026-11-24": ints([1, 2], pa.int32()), "2026-11-25": ints([1, 2])}
    by_dagster = project(tmp_path / "dagster", days)
    instance = DagsterInstance.ephemeral()
    for day in days:
        materialize(by_dagster, day, instance)
    by_cli = project(tmp_path / "cli", days)
    out = CliRunner().invoke(
        main, ["snapshot", "-c", by_cli.source_file, "--partition-range", "2026-11-24...2026-11-24"]
    )
    assert out.exit_code == 0, out.output
    out = CliRunner().invoke(main, ["snapshot", "-c", by_cli.source_file, "--partition", "2026-11-25", "--json"])
    assert out.exit_code == 1  # the widening fails the gate under FULL, as the check says in Dagster
    said = json.loads(out.output)
    assert said["datasets"] == {"raw/payments": {"2026-11-25": "2.0.0"}} and "TYPE_PROMOTED cents" in said["failed"]
    assert set(said["seconds"]) >= {"list", "read", "store", "deliver"}

    def relocated(docs: dict, root) -> str:  # the two lakes live in different folders
        return json.dumps(docs, sort_keys=True).replace(str(root), "ROOT")

    assert relocated(_stored(by_cli), tmp_path / "cli") == relocated(_stored(by_dagster), tmp_path / "dagster")
    assert len(_stored(by_cli)) == 2
