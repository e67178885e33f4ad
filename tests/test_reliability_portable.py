"""The portable document's promises (issue 14): `validate` checks everything `import` relies on;
`import` into a store is all or nothing, idempotent, and safe beside a run; deep nesting gives
one-line errors, never a traceback. On SQLite and on the real PostgreSQL server."""

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from lumos_dagster.cli import main
from lumos_dagster.delivery.worker import Delivery
from lumos_dagster.estate import portable
from lumos_dagster.floor.datatypes import Field, Primitive, Schema, Struct
from lumos_dagster.floor.limits import MAX_NESTING
from lumos_dagster.floor.model import DatasetRecord
from lumos_dagster.store import Release, SnapshotStore
from lumos_dagster.store.sql_tables import datasets_table, releases_table, snapshots_table
from tests.test_store import T0, record_batch, snap, store_url  # noqa: F401  (fixture: SQLite and PostgreSQL)

pytestmark = [pytest.mark.servers, pytest.mark.slow]

LUMOS = [sys.executable, "-c", "from lumos_dagster.cli import main; main()"]  # the code under test, as installed or not


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def estate_doc(n: int = 3, history: int = 1) -> dict:
    """`n` datasets, each with `history` earlier versions, and a release."""
    entries = [
        portable.Entry(snap(f"raw/d{i}", "2026-11-20", 2 + history), [snap(f"raw/d{i}", "2026-11-19", 2 + h, -h - 1)
                                                                     for h in range(history)])
        for i in range(n)
    ]  # fmt: skip
    releases = [Release("S-1", T0, {"raw/d0": "1.3.0"})] if history else []
    return portable.to_json(portable.Estate(entries, releases, source="test", exported_at=T0))


def write(path: Path, doc: dict) -> Path:
    path.write_text(json.dumps(doc))
    return path


def config_for(tmp_path: Path, url: str, name: str = "lumos.yaml") -> Path:
    path = tmp_path / name
    path.write_text(f"store:\n  url: '{url}'\n")
    return path


def counts(url: str) -> tuple[int, int, int]:
    """(datasets, snapshots, releases) in the store."""
    with SnapshotStore(url) as store, store.engine.connect() as conn:
        return tuple(
            conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one()
            for t in (datasets_table, snapshots_table, releases_table)
        )


def _set(doc, path, value):
    *parents, last = path
    for p in parents:
        doc = doc[p]
    doc[last] = value


def _respelled(doc):
    """The same dataset again under DataHub's other spelling of its platform."""
    twin = json.loads(json.dumps(doc["datasets"][1]))
    ref = twin["snapshot"]["dataset"]
    ref["platform"] = "urn:li:dataPlatform:file"
    ref["urn"] = f"urn:lumos:dataset:urn:li:dataPlatform:file:{ref['name']}"
    twin["history"] = []
    doc["datasets"].append(twin)


CASES = {
    "bad date-time": (
        lambda d: _set(d, ["datasets", 1, "history", 0, "captured_at"], "2026-11-31T25:00:00"),
        "datasets[1].history[0].captured_at: '2026-11-31T25:00:00' is not a 'date-time'",
    ),
    "duplicate release": (
        lambda d: d["releases"].append(dict(d["releases"][0], created_at=T0.isoformat())),
        "releases[1].name: release S-1 appears twice",
    ),
    "long partition key": (
        lambda d: _set(d, ["datasets", 2, "snapshot", "partition_key"], "p" * 500),
        "datasets[2].snapshot.partition_key: 500 characters, more than the store's 64",
    ),
    "row count beyond a long": (
        lambda d: _set(d, ["datasets", 0, "snapshot", "stats", "row_count"], 1e30),
        "datasets[0].snapshot.stats.row_count: 1e+30 is not an integer within the signed 64-bit range",
    ),
    "one dataset under two spellings": (_respelled, "datasets[3]: raw/d1 appears twice (as raw/d1 before)"),
    # what lumos.yaml or the store refuses (issue 30)
    "a NUL in a name": (
        lambda d: _set(d, ["datasets", 2, "snapshot", "description"], "orders\x00"),
        "datasets[2].snapshot.description: holds a NUL character, which the store cannot keep",
    ),
    "a self-loop": (
        lambda d: _link(d, (0, 0)),
        "datasets[0].snapshot.upstream: lineage has a cycle: raw/d0 → raw/d0",
    ),
    "a cycle": (
        lambda d: _link(d, (0, 2), (2, 1), (1, 0)),
        "datasets[0].snapshot.upstream: lineage has a cycle: raw/d0 → raw/d1 → raw/d2 → raw/d0",
    ),
    "one edge listed three times": (
        lambda d: _link(d, (1, 0), (1, 0), (1, 0)),
        "datasets[1].snapshot.upstream[1]: raw/d1 lists upstream raw/d0 again (as upstream[0])",
    ),
}


def _link(doc, *edges):
    """(downstream, upstream) lineage edges between the document's datasets, by index."""
    for down, up in edges:
        ref = doc["datasets"][up]["snapshot"]["dataset"]
        doc["datasets"][down]["snapshot"]["upstream"].append({"upstream": ref, "columns": [], "job": None})


@pytest.mark.parametrize("case", CASES)
def test_validate_refuses_what_import_cannot_write_and_import_writes_nothing(case, store_url, tmp_path):  # noqa: F811
    mutate, problem = CASES[case]
    doc = estate_doc()
    mutate(doc)
    bad = write(tmp_path / "bad.json", doc)
    result = invoke("validate", bad)
    assert result.exit_code == 1
    assert f"  invalid: {problem}\n" in result.stderr, result.stderr
    assert "Traceback" not in result.output
    into_store = invoke("import", bad, "--to", "store", "-c", config_for(tmp_path, store_url))
    assert into_store.exit_code == 1 and problem in into_store.stderr
    assert len(into_store.stderr.strip().splitlines()) == 1
    assert counts(store_url) == (0, 0, 0)
    into_lite = invoke("import", bad, "--to", f"datahub-lite:{tmp_path / 'lite.db'}")
    assert into_lite.exit_code == 1 and problem in into_lite.stderr
    assert not (tmp_path / "lite.db").exists()


def test_the_largest_long_is_accepted(tmp_path):
    doc = estate_doc()
    doc["datasets"][0]["snapshot"]["stats"]["row_count"] = 2**63 - 1
    assert invoke("validate", write(tmp_path / "e.json", doc)).exit_code == 0


def _refuse_partition(url: str, partition_key: str) -> None:
    """A database that refuses one row in the middle of an import (a trigger, as a constraint would)."""
    with SnapshotStore(url) as store, store.engine.begin() as conn:
        if conn.dialect.name == "sqlite":
            conn.exec_driver_sql(
                f"CREATE TRIGGER refuse BEFORE INSERT ON lumos_snapshots WHEN NEW.partition_key = '{partition_key}' "
                "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
            )
        else:
            conn.exec_driver_sql(
                "CREATE FUNCTION refuse() RETURNS trigger AS $$ BEGIN "
                f"IF NEW.partition_key = '{partition_key}' THEN RAISE EXCEPTION 'refused by the test'; END IF; "
                "RETURN NEW; END $$ LANGUAGE plpgsql"
            )
            conn.exec_driver_sql(
                "CREATE TRIGGER refuse BEFORE INSERT ON lumos_snapshots FOR EACH ROW EXECUTE FUNCTION refuse()"
            )


def test_an_import_that_fails_midway_leaves_nothing(store_url, tmp_path):  # noqa: F811
    doc = estate_doc(2500)  # three batches: the second one fails
    doc["datasets"][1800]["snapshot"]["partition_key"] = "2026-11-21"
    _refuse_partition(store_url, "2026-11-21")
    result = invoke("import", write(tmp_path / "e.json", doc), "--to", "store", "-c", config_for(tmp_path, store_url))
    assert result.exit_code == 1
    assert "1000/2500 datasets" in result.stderr  # the first batch had gone in
    (error,) = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert "failed, nothing was written: refused by the test" in error and "Traceback" not in result.output
    assert counts(store_url) == (0, 0, 0)


def test_an_interrupted_import_leaves_nothing(store_url, tmp_path):  # noqa: F811
    doc = write(tmp_path / "e.json", estate_doc(4000))
    proc = subprocess.Popen(
        [*LUMOS, "import", doc, "--to", "store", "-c", config_for(tmp_path, store_url)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        first = proc.stderr.readline()
        assert first.startswith("1000/4000 datasets"), first
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert counts(store_url) == (0, 0, 0)


def test_importing_twice_is_importing_once(store_url, tmp_path):  # noqa: F811
    doc = write(tmp_path / "e.json", estate_doc(5, history=2))
    config = config_for(tmp_path, store_url)
    first = invoke("import", doc, "--to", "store", "-c", config)
    assert "store: 5 datasets, 15 snapshots, 1 release written (0 snapshots already there)" in first.stdout
    once = counts(store_url)
    exported_once = tmp_path / "once.json"
    invoke("export", "-c", config, "-o", exported_once)
    second = invoke("import", doc, "--to", "store", "-c", config)
    assert "store: 5 datasets, 0 snapshots, 0 releases written (15 snapshots, 1 release already there)" in second.stdout
    assert counts(store_url) == once == (5, 15, 1)
    exported_twice = tmp_path / "twice.json"
    invoke("export", "-c", config, "-o", exported_twice)
    assert portable.normalized(json.loads(exported_once.read_text())) == portable.normalized(
        json.loads(exported_twice.read_text())
    )
    # its own export imported back adds nothing either
    assert " 0 snapshots" in invoke("import", exported_once, "--to", "store", "-c", config).stdout
    assert counts(store_url) == once


def test_an_import_during_a_run_loses_and_duplicates_nothing(store_url):  # noqa: F811
    run_names = [f"run/r{i}" for i in range(20)]
    with SnapshotStore(store_url) as store:  # what discovery registered before the run
        store.upsert_datasets([DatasetRecord(n, "file", "lake", f"/lake/{n}", "parquet") for n in run_names])
    doc = estate_doc(3000)
    # the document also holds earlier captures of some of the run's datasets
    by_name = {d["snapshot"]["dataset"]["name"]: d for d in doc["datasets"]}
    for i, name in enumerate(run_names[:5]):
        doc["datasets"].append(json.loads(json.dumps(by_name[f"raw/d{i}"]).replace(f'raw/d{i}"', f'{name}"')))
    assert portable.validate(doc).ok
    estate = portable.from_json(doc)
    imported = sum(1 + len(e.history) for e in estate.entries)

    recorded, errors, imported_done = [], [], threading.Event()

    def run() -> None:
        recorder = Delivery(store_url, lambda: [], warn=errors.append, background=False)
        try:
            batch = 0
            while not imported_done.is_set() or batch < 5:
                snapshots = [snap(n, "2026-11-22", 1, minutes=batch) for n in run_names]
                record_batch(recorder, snapshots)
                recorded.extend(snapshots)
                batch += 1
        except Exception as exc:  # noqa: BLE001  (the assertion below shows it)
            errors.append(repr(exc))
        finally:
            recorder.finish()

    runner = threading.Thread(target=run)
    runner.start()
    try:
        with SnapshotStore(store_url) as store:
            written, there = portable.import_into_store(estate, store, batch=500)
    finally:
        imported_done.set()
        runner.join()
    assert not errors and (written, there) == (imported, 0)
    assert counts(store_url)[:2] == (3000 + len(run_names), imported + len(recorded))
    with SnapshotStore(store_url) as store:
        for name in run_names:
            urn = f"urn:lumos:dataset:file:{name}"
            ran = [s.captured_at for s in recorded if s.dataset.name == name]
            stored = [s.captured_at for s in store.history(urn) if s.partition_key == "2026-11-22"]
            assert sorted(stored) == sorted(ran)  # each capture of the run, once
        assert len(store.history("urn:lumos:dataset:file:run/r0")) == len(recorded) // len(run_names) + 2


# ------------------------------------------------------------------ deep nesting


def nested(levels: int) -> Schema:
    """One field whose type is `levels` structs, one in the other."""
    t = Primitive("int64")
    for i in range(levels):
        t = Struct((Field(f"l{i}", t),))
    return Schema((Field("root", t),))


def test_what_lumos_snapshots_as_deep_as_it_may_it_exports_validates_imports_and_compares(store_url, tmp_path):  # noqa: F811
    deep = snap("raw/deep", "2026-11-20")
    deep.schema = nested(MAX_NESTING - 1)  # with its innermost int64: MAX_NESTING types deep
    with SnapshotStore(store_url) as store:  # recorded as a run records it
        store.upsert_datasets([DatasetRecord("raw/deep", "file", "lake", "/lake/raw/deep", "parquet")])
        store.put([deep])
    config = config_for(tmp_path, store_url)
    doc = tmp_path / "deep.json"
    exported = invoke("export", "-c", config, "-o", doc)
    assert exported.exit_code == 0, exported.output
    assert invoke("validate", doc).exit_code == 0
    target = config_for(tmp_path, f"sqlite:///{tmp_path / 'target.db'}", "target.yaml")
    assert invoke("import", doc, "--to", "store", "-c", target).exit_code == 0
    result = invoke("compare", doc, "store", "-c", target)
    assert result.exit_code == 0 and "the same" in result.stdout, result.output
    assert invoke("compare", "store", "store", "-c", config).exit_code == 0


def test_types_nested_deeper_than_the_limit_are_one_line(tmp_path):
    doc = estate_doc(1, history=0)
    within = snap("raw/d0", "2026-11-20")
    within.schema = nested(MAX_NESTING - 1)  # with its innermost int64: MAX_NESTING types deep
    doc["datasets"][0]["snapshot"] = portable.to_json(portable.from_snapshots([within], "t"))["datasets"][0]["snapshot"]
    assert invoke("validate", write(tmp_path / "within.json", doc)).exit_code == 0
    deeper = snap("raw/d0", "2026-11-20")
    deeper.schema = nested(MAX_NESTING)
    doc["datasets"][0]["snapshot"] = portable.to_json(portable.from_snapshots([deeper], "t"))["datasets"][0]["snapshot"]
    result = invoke("validate", write(tmp_path / "deeper.json", doc))
    assert result.exit_code == 1
    assert result.stderr == (
        f"  invalid: datasets[0].snapshot.schema[0]: types nested deeper than {MAX_NESTING} levels, "
        "more than Lumos keeps\n"
    )


def test_a_type_kind_that_is_not_a_string_is_a_problem_not_a_traceback(tmp_path):
    doc = estate_doc(1, history=0)
    doc["datasets"][0]["snapshot"]["schema"][0]["type"] = {"kind": ["primitive"]}
    result = invoke("validate", write(tmp_path / "kind.json", doc))
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)  # not a TypeError from a lookup
    assert "invalid: datasets[0].snapshot.schema[0].type: {'kind': ['primitive']} is not valid" in result.output


@pytest.mark.parametrize("command", ["validate", "import", "compare"])
def test_json_nested_too_deep_for_the_parser_is_one_line_naming_the_file(command, tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text('{"lumos_snapshot_version": "1", "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    args = {"validate": [deep], "import": [deep, "--to", f"datahub-lite:{tmp_path / 'lite.db'}"],
            "compare": [deep, deep]}[command]  # fmt: skip
    result = invoke(command, *args)
    assert result.exit_code == 1
    assert f"{deep}: JSON nested deeper than the parser allows" in result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output


def test_progress_states_the_rate(store_url, tmp_path):  # noqa: F811
    doc = write(tmp_path / "e.json", estate_doc(1500, history=0))
    result = invoke("import", doc, "--to", "store", "-c", config_for(tmp_path, store_url))
    lines = result.stderr.splitlines()
    assert [line.split(" (")[0] for line in lines] == ["1000/1500 datasets", "1500/1500 datasets"]
    assert all(line.endswith(" datasets/s)") for line in lines)
