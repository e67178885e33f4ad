"""Spark as a run reaches it: a master (`spark.master`) or a Spark Connect server (`spark.remote`).
A standalone master with two workers and a Spark Connect server are started from the jars pyspark ships,
the way a test starts PostgreSQL; each run that uses them runs in a process of its own (pyspark keeps one
kind of session per process, and a classic one of other tests would be taken for the cluster's).

A master or server that cannot be had fails the run once, naming the key and the address, instead of
each profile failing as a warning while the run succeeds. Spark Connect is tested against a real server
started from the jars pyspark ships (`SparkConnectServer`, as `sbin/start-connect-server.sh` starts it),
its Python workers this interpreter with Lumos importable, as a team's executors must have.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import fastavro
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest
import yaml
from dagster import DagsterInstance

from benchmarks import spark_servers
from lumos_dagster.floor.config import load_config, parse_config
from lumos_dagster.floor.errors import ConfigError, SparkUnavailable
from lumos_dagster.formats import read_file_result, sniff_format
from lumos_dagster.resources.spark import LumosSparkResource, spark_resource
from tests.conftest import S3_TEST_CREDENTIALS
from tests.emulators import s3_emulator
from tests.fake_servers import free_port
from tests.lake import backdate, write_parquet
from tests.test_testdata import FILES

ROOT = Path(__file__).resolve().parents[1]
PARTITION = "2026-11-25"


# ------------------------------------------------------------------ the configuration


@pytest.mark.parametrize(
    "spark, says",
    [
        ({"master": "sc://127.0.0.1:15002"}, "sc://127.0.0.1:15002 is a Spark Connect address: set it as spark.remote"),
        ({"remote": "spark://127.0.0.1:7077"}, "spark://127.0.0.1:7077 is not a Spark Connect address"),
    ],
)
def test_a_connect_address_goes_in_spark_remote_only(spark, says):
    with pytest.raises(ConfigError) as failed:
        parse_config({"spark": spark})
    assert says in str(failed.value) and "spark." in str(failed.value)


def test_spark_remote_is_read_and_the_master_left_unset_for_it():
    config = parse_config({"spark": {"remote": "sc://spark.example.com:15002"}}).spark
    resource = spark_resource(config)
    assert resource.remote == "sc://spark.example.com:15002"
    assert resource.engine == "Spark Connect (sc://spark.example.com:15002)"
    assert spark_resource(parse_config({"spark": {"master": "local[2]"}}).spark).engine == "Spark (master local[2])"


# ------------------------------------------------------------------ Spark that cannot be had


@pytest.mark.parametrize(
    "key, address",
    [
        ("spark.master", "spark://127.0.0.1:{port}"),
        ("spark.remote", "sc://127.0.0.1:{port}"),
    ],
)
def test_an_address_that_does_not_answer_fails_at_once_naming_the_key_and_the_address(key, address):
    address = address.format(port=free_port())
    remote = address if key == "spark.remote" else None
    conf = {"spark.master": address} if key == "spark.master" else {"spark.master": "local[1]"}
    resource = LumosSparkResource(spark_config=conf, remote=remote)
    started = time.perf_counter()
    with pytest.raises(SparkUnavailable) as first:
        _ = resource.spark_session
    assert str(first.value).startswith(f"{key} {address}: no Spark")
    assert "Connection refused" in str(first.value)
    with pytest.raises(SparkUnavailable) as again:  # tried once: every later ask is the same failure
        _ = resource.spark_session
    assert again.value is first.value and time.perf_counter() - started < 5


def test_spark_remote_from_the_environment_is_taken_and_named(monkeypatch):
    address = f"sc://127.0.0.1:{free_port()}"
    monkeypatch.setenv("SPARK_REMOTE", address)  # pyspark's own way in: Lumos' spark.master must not collide
    resource = LumosSparkResource(spark_config={"spark.master": "local[1]"})
    assert resource.engine == f"Spark Connect ({address})"
    with pytest.raises(SparkUnavailable) as failed:
        _ = resource.spark_session
    assert str(failed.value).startswith(f"SPARK_REMOTE {address}: no Spark Connect server answers")


JVM_SCRIPT = """
from lumos_dagster.floor.errors import SparkUnavailable
from lumos_dagster.resources.spark import LumosSparkResource
try:
    LumosSparkResource(spark_config={"spark.master": "local[1]"}).spark_session
except SparkUnavailable as exc:
    print(exc)
"""


@pytest.mark.spark  # it starts a JVM (which cannot start): not the inner loop
def test_a_jvm_that_cannot_start_is_one_error_naming_the_master():
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAVA_HOME": "/nonexistent-java"}
    out = subprocess.run([sys.executable, "-c", JVM_SCRIPT], capture_output=True, text=True, env=env, timeout=120)
    line = out.stdout.strip().splitlines()[-1]
    assert line.startswith("spark.master local[1]: Spark cannot start: ") and "JAVA_GATEWAY_EXITED" in line, out


def _profiled_lake(tmp_path: Path, spark: dict) -> object:
    lake = tmp_path / "lake"
    os.makedirs(lake / "raw" / "customers")
    pcsv.write_csv(pa.table({"customer_id": [1, 2, 3], "country": ["FR", None, "US"]}),
                   lake / "raw" / "customers" / "c.csv")  # fmt: skip
    write_parquet(lake / "raw" / "orders" / "part-0.parquet", pa.table({"order_id": [1, 2], "amount": [1.5, None]}))
    backdate(lake)
    config = {
        "sources": [{"name": "lake", "root": "lake"}],
        "datasets": [{"name": "raw/customers", "profile": True}, {"name": "raw/orders", "profile": True}],
        "store": {"path": "store.db"},
        "catalog": {"path": "lite.db"},
        "partitions": {"start": "2026-11-01"},
        "spark": spark,
    }
    (tmp_path / "lumos.yaml").write_text(yaml.safe_dump(config))
    from click.testing import CliRunner

    from lumos_dagster.cli import main

    out = CliRunner().invoke(main, ["discover", "-c", str(tmp_path / "lumos.yaml")])
    assert out.exit_code == 0, out.output
    return load_config(str(tmp_path / "lumos.yaml"))


def _run(config):
    """The run of the partition, and what it logged (its messages, not Dagster's events)."""
    from lumos_dagster.definitions import build_definitions

    job = build_definitions(config).resolve_implicit_global_asset_job_def()
    instance = DagsterInstance.ephemeral()
    result = job.execute_in_process(partition_key=PARTITION, instance=instance, raise_on_error=False)
    return result, [e.user_message for e in instance.all_logs(result.run_id) if not e.is_dagster_event]


@pytest.mark.dagster
@pytest.mark.parametrize(
    "key, address, read_from_files",
    [
        ("spark.remote", "sc://127.0.0.1:{port}", None),  # the profiles need Spark
        ("spark.master", "spark://127.0.0.1:{port}", 1),  # the schema read too
    ],
)
def test_a_run_whose_spark_is_down_fails_once_naming_it(tmp_path, key, address, read_from_files):
    address = address.format(port=free_port())
    spark = {key.split(".")[1]: address, **({"read_from_files": read_from_files} if read_from_files else {})}
    result, logged = _run(_profiled_lake(tmp_path, spark))
    assert not result.success
    failures = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert len(failures) == 1
    error, messages = failures[0].step_failure_data.error, []
    while error is not None:  # Dagster's step error, caused by Lumos' own
        messages.append(error.message)
        error = error.cause
    assert f"SparkUnavailable: {key} {address}: no Spark" in "".join(messages)
    assert [m for m in logged if "profil" in m] == []  # not a warning per dataset


# ------------------------------------------------------------------ a real Spark Connect server


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory):
    """A Spark Connect server on a free port (local[2]), the S3 credentials moto takes in its environment as
    an instance role's would be; stopped at the end."""
    with spark_servers.connect_server(
        tmp_path_factory.mktemp("connect") / "server.log", env=S3_TEST_CREDENTIALS
    ) as address:
        yield address


#: a process of its own for each Spark Connect client: pyspark refuses a Connect session in a process that
#: runs a classic one (the other tests' `spark` fixture), and marks a process with one open as Connect's
READ_SCRIPT = """
import json, sys
from lumos_dagster.formats import sniff_format
from lumos_dagster.spark.profile import profile_files
from lumos_dagster.spark.schemas import read_schemas
from lumos_dagster.spark.session import is_connect, start_session

remote, paths, csv, avro = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
session = start_session({"spark.sql.session.timeZone": "UTC"}, remote)
results = read_schemas(session, [(p, sniff_format(p)) for p in paths])
profile = profile_files(session, [csv], "csv", 1.0)
avro_profile = profile_files(session, [avro, avro], "avro", 1.0)  # mapInArrow tasks: Connect has no RDDs
print(json.dumps({
    "connect": is_connect(session),
    "results": {p: [r.error, r.row_count, r.schema.fingerprint() if r.schema else None] for p, r in results.items()},
    "profile": [profile.row_count, [[c.path, c.null_fraction, c.min, c.max] for c in profile.columns]],
    "avro": [avro_profile.row_count, [[c.path, c.null_fraction, c.min, c.max] for c in avro_profile.columns]],
}))
session.stop()
"""

S3_SCRIPT = """
import json, sys
from lumos_dagster.spark.profile import profile_files
from lumos_dagster.spark.session import start_session

remote, paths, fs = sys.argv[1], json.loads(sys.argv[2]), tuple(json.loads(sys.argv[3]))
session = start_session({"spark.sql.session.timeZone": "UTC"}, remote)
p = profile_files(session, paths, "parquet", 1.0, fs)
print(json.dumps([p.row_count, [[c.path, c.null_fraction, c.min, c.max] for c in p.columns]]))
session.stop()
"""

RUN_SCRIPT = """
import json, sys
from dagster import DagsterInstance
from lumos_dagster.floor.config import load_config
from lumos_dagster.definitions import build_definitions

job = build_definitions(load_config(sys.argv[1])).resolve_implicit_global_asset_job_def()
instance = DagsterInstance.ephemeral()
result = job.execute_in_process(partition_key=sys.argv[2], instance=instance, raise_on_error=False)
logged = [e.user_message for e in instance.all_logs(result.run_id) if not e.is_dagster_event]
print(json.dumps({"success": result.success, "logged": logged}))
"""


def _client(script: str, *args: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=env,
                         timeout=300, cwd=ROOT)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_schemas_and_profiles_read_over_spark_connect_are_those_one_process_reads(connect_server, tmp_path):
    paths = FILES[:60]
    pcsv.write_csv(pa.table({"customer_id": [1, 2, 3], "country": ["FR", None, "US"]}), tmp_path / "c.csv")
    schema = {"type": "record", "name": "E", "fields": [{"name": "n", "type": "long"},
                                                        {"name": "kind", "type": ["null", "string"]}]}  # fmt: skip
    with open(tmp_path / "e.avro", "wb") as fh:
        fastavro.writer(fh, schema, ({"n": i, "kind": None if i % 4 == 0 else "click"} for i in range(8)))
    got = _client(READ_SCRIPT, connect_server, json.dumps(paths), str(tmp_path / "c.csv"), str(tmp_path / "e.avro"))
    assert got["connect"] is True
    assert set(got["results"]) == set(paths)
    for path in paths:
        local = read_file_result((path, sniff_format(path)))
        expected = [local.error, local.row_count, local.schema.fingerprint() if local.schema else None]
        assert got["results"][path] == expected, path
    rows, columns = got["profile"]
    assert rows == 3
    assert columns == [["customer_id", 0.0, "1", "3"], ["country", pytest.approx(1 / 3), "FR", "US"]]
    assert got["avro"] == [16, [["n", 0.0, "0", "7"], ["kind", 0.25, "click", "click"]]]


@pytest.mark.slow
def test_object_store_files_are_profiled_over_spark_connect_through_the_sources_file_system(connect_server):
    for key, value in S3_TEST_CREDENTIALS.items():
        os.environ.setdefault(key, value)
    server, url, client = s3_emulator("lumos-connect")
    try:
        for part in range(2):
            buf = io.BytesIO()
            pq.write_table(pa.table({"id": [2 * part, 2 * part + 1], "note": [None, f"n{part}"]}), buf)
            client.put_object(Bucket="lumos-connect", Key=f"t/part-{part}.parquet", Body=buf.getvalue())
        fs = ["s3", url.split("://", 1)[1], "us-east-1", "http"]
        paths = [f"lumos-connect/t/part-{part}.parquet" for part in range(2)]
        got = _client(S3_SCRIPT, connect_server, json.dumps(paths), json.dumps(fs))
    finally:
        server.stop()
    assert got == [4, [["id", 0.0, "0", "3"], ["note", 0.5, "n0", "n1"]]]


@pytest.mark.slow
@pytest.mark.dagster
def test_a_run_on_spark_connect_reads_profiles_and_says_which_engine_read(connect_server, tmp_path):
    config = _profiled_lake(tmp_path, {"remote": connect_server, "read_from_files": 1})
    got = _client(RUN_SCRIPT, str(tmp_path / "lumos.yaml"), PARTITION)
    assert got["success"], got["logged"]
    lines = [m for m in got["logged"] if "files read" in m]
    assert any(f"2 files read with Spark Connect ({connect_server})" in line for line in lines), lines
    assert [m for m in got["logged"] if "profil" in m] == []  # both profiles taken: no warning
    from lumos_dagster.catalog.datahub_lite import open_lite
    from tests.lake import catalog_urn

    lite = open_lite(str(tmp_path / "lite.db"), read_only=True)
    try:
        aspects = lite.get(catalog_urn(config, "raw/customers"), None)
    finally:
        lite.close()
    assert aspects["datasetProfile"]["rowCount"] == 3
    nulls = {f["fieldPath"]: f.get("nullProportion") for f in aspects["datasetProfile"]["fieldProfiles"]}
    assert nulls["country"] == pytest.approx(1 / 3)


# ------------------------------------------------------------------ a real standalone cluster


@pytest.fixture(scope="module")
def standalone_cluster(tmp_path_factory):
    """A Spark standalone master and two workers (a core and 512 MB each); stopped at the end."""
    with spark_servers.standalone_cluster(tmp_path_factory.mktemp("standalone")) as started:
        yield started


@pytest.mark.slow
@pytest.mark.dagster
def test_a_run_on_a_standalone_cluster_reads_profiles_and_says_which_master_read(standalone_cluster, tmp_path):
    master, master_log = standalone_cluster
    spark = {"master": master, "read_from_files": 1,
             "conf": {"spark.executor.memory": "512m", "spark.executorEnv.PYTHONPATH": str(ROOT)}}  # fmt: skip
    config = _profiled_lake(tmp_path, spark)
    got = _client(RUN_SCRIPT, str(tmp_path / "lumos.yaml"), PARTITION)
    assert got["success"], got["logged"]
    lines = [m for m in got["logged"] if "files read" in m]
    assert any(f"2 files read with Spark (master {master})" in line for line in lines), lines
    assert "Registered app lumos" in master_log.read_text()  # the cluster ran it, not a local session
    assert [m for m in got["logged"] if "profil" in m] == []
    from lumos_dagster.catalog.datahub_lite import open_lite
    from tests.lake import catalog_urn

    lite = open_lite(str(tmp_path / "lite.db"), read_only=True)
    try:
        rows = {n: lite.get(catalog_urn(config, n), None)["datasetProfile"]["rowCount"]
                for n in ("raw/customers", "raw/orders")}  # fmt: skip
    finally:
        lite.close()
    assert rows == {"raw/customers": 3, "raw/orders": 2}
