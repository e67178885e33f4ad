"""`lumos init` on a lake, then the commands it prints, as a user outside the clone runs them: Dagster finds
the code location in their folder, the instance is the one Lumos recommends, a dataset reaches DataHub Lite,
and neither prints a traceback or a Dagster warning."""

import io
import os
import re
import shlex
import subprocess
import sys
import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from click.testing import CliRunner

from lumos_dagster.catalog.datahub_lite import DataHubLiteCatalog
from lumos_dagster.cli import main
from lumos_dagster.cli.deploy import Deployment
from lumos_dagster.cli.instance import instance_yaml
from lumos_dagster.floor.config import load_config
from tests.conftest import S3_TEST_CREDENTIALS
from tests.emulators import s3_emulator

pytestmark = pytest.mark.dagster

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
DAYS = ["2026-03-01", "2026-03-02"]
FOUND = "found 3 datasets: 2 daily-partitioned by dt, 1 not partitioned; formats csv 2, parquet 1"
#: what Dagster prints for its own warnings: `path.py:LINE: BetaWarning: …`
DAGSTER_WARNING = re.compile(r"\b(Supersession|Beta|Preview|Deprecation)Warning\b")
ORDERS = pa.table({"order_id": [1, 2], "amount": [9.5, 3.0]})


def parquet_bytes() -> bytes:
    out = io.BytesIO()
    pq.write_table(ORDERS, out)
    return out.getvalue()


def make_lake(root: Path) -> None:
    """Parquet and CSV in dt= folders, and a CSV without any."""
    for day in DAYS:
        (root / "sales/orders" / f"dt={day}").mkdir(parents=True)
        pq.write_table(ORDERS, root / "sales/orders" / f"dt={day}/part-0.parquet")
    (root / "web/events/dt=2026-03-02").mkdir(parents=True)
    (root / "web/events/dt=2026-03-02/events.csv").write_text("user,action\nu1,click\n")
    (root / "ref/countries").mkdir(parents=True)
    (root / "ref/countries/countries.csv").write_text("code,name\nFR,France\n")


def printed(out: str) -> dict[str, str]:
    """The next commands `lumos init` printed, by their first word(s)."""
    lines = [line.strip() for line in out.splitlines() if line.startswith("  ")]
    return {" ".join(line.split()[:2]) if line.startswith("dg ") else line.split()[0]: line for line in lines}


def test_the_repository_dagster_yaml_is_the_instance_lumos_init_writes_and_deploy_shares():
    assert (ROOT / "dagster.yaml").read_text() == instance_yaml()
    local = yaml.safe_load(instance_yaml())
    deployed = Deployment("unused").instance_config()
    assert "run_launcher" not in local and "run_launcher" not in deployed  # Dagster's DefaultRunLauncher
    assert "event_log_storage" not in local  # Dagster's stock instance: the tuning is a commented switch
    assert "#   class: LumosSqliteEventLogStorage" in instance_yaml()
    for key in ("telemetry", "python_logs"):
        assert deployed[key] == local[key], key
    assert deployed["run_monitoring"]["poll_interval_seconds"] == local["run_monitoring"]["poll_interval_seconds"]


def test_the_code_location_loads_without_a_dagster_warning(tmp_path):
    """Dagster 1.13 copies a sensor whose job it binds resources to, and the copy warned (BetaWarning: the
    sensor's `owners`, [] for none) every time the code location loaded: the storage sensor's lumos_sync."""
    from lumos_dagster.definitions import build_definitions

    make_lake(tmp_path / "lake")
    assert (
        CliRunner()
        .invoke(main, ["init", str(tmp_path / "lake"), "--dir", str(tmp_path)], catch_exceptions=False)
        .exit_code
        == 0
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        build_definitions(load_config(str(tmp_path / "lumos.yaml")))
    assert [str(w.message) for w in caught if DAGSTER_WARNING.search(w.category.__name__)] == []


def test_init_then_the_printed_commands_put_a_day_of_the_lake_into_datahub_lite(tmp_path):
    project = tmp_path / "project"
    make_lake(project / "lake")
    env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "LUMOS_CONFIG", "PYTHONWARNINGS")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    init = subprocess.run(
        ["lumos", "init", "project/lake", "--dir", "project"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert init.returncode == 0, init.stderr
    assert f"project/lake: {FOUND}" in init.stdout
    commands = printed(init.stdout)
    assert commands["cd"] == f"cd {project}"
    # not a project of dg's: dg is pointed at the code location (plain `dagster dev` finds it in pyproject.toml)
    assert commands["dg dev"] == "dg dev -m lumos_dagster.definitions"
    assert 'module_name = "lumos_dagster.definitions"' in (project / "pyproject.toml").read_text()
    materialize = shlex.split(commands["dg launch"])
    assert materialize[:4] == ["dg", "launch", "-m", "lumos_dagster.definitions"]
    exported = dict(item.split("=", 1) for item in shlex.split(commands["export"])[1:])
    assert set(exported) == {"DAGSTER_HOME", "LUMOS_CONFIG"}
    assert exported["DAGSTER_HOME"] == str(project / ".lumos/dagster")
    assert (project / ".lumos/dagster/dagster.yaml").read_text() == instance_yaml()

    config = load_config(exported["LUMOS_CONFIG"])
    assert config.sources[0].root == "lake"  # inside the project: relative to lumos.yaml
    assert str(config.partitions.start) == DAYS[0]  # the earliest day found
    assert f"# The scan {FOUND}:" in Path(exported["LUMOS_CONFIG"]).read_text()

    def run(command: list[str]) -> str:
        done = subprocess.run(command, cwd=project, env=env | exported, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        said = done.stdout + done.stderr
        assert "Traceback" not in said
        assert [line for line in said.splitlines() if DAGSTER_WARNING.search(line)] == []
        return said

    select, partition = materialize.index("--assets") + 1, materialize.index("--partition") + 1
    materialize[select], materialize[partition] = "sales/orders", DAYS[1]
    run(materialize)

    snapshots = {s.dataset.name: s for s in DataHubLiteCatalog(str(project / ".lumos/catalog.db")).read_all()}
    assert set(snapshots) == {"sales/orders"}
    assert [p for p, _ in snapshots["sales/orders"].schema.flatten()] == ["order_id", "amount"]


def test_init_twice_refuses_without_force_and_keeps_the_users_files(tmp_path):
    make_lake(tmp_path / "lake")
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "mine"\n')
    runner = CliRunner()
    first = runner.invoke(main, ["init", str(tmp_path / "lake"), "--dir", str(project)], catch_exceptions=False)
    assert first.exit_code == 0, first.output
    written = (project / "lumos.yaml").read_text()
    assert load_config(str(project / "lumos.yaml")).sources[0].root == str(tmp_path / "lake")  # outside: absolute
    # theirs, without a [tool.dagster] block: plain `dagster dev` takes workspace.yaml
    assert (project / "pyproject.toml").read_text() == '[project]\nname = "mine"\n'
    assert "  dg dev -m lumos_dagster.definitions\n" in first.output
    assert "; kept pyproject.toml as they were\n" in first.output

    again = runner.invoke(main, ["init", str(tmp_path / "lake"), "--dir", str(project)])
    assert again.exit_code == 1
    assert again.output == f"Error: {project / 'lumos.yaml'} exists: `lumos init --force` overwrites it\n"
    assert (project / "lumos.yaml").read_text() == written

    (project / ".lumos/dagster/dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    forced = runner.invoke(main, ["init", str(tmp_path / "lake"), "--dir", str(project), "--force"])
    assert forced.exit_code == 0, forced.output
    assert (project / ".lumos/dagster/dagster.yaml").read_text() == instance_yaml()
    assert (project / "pyproject.toml").read_text() == '[project]\nname = "mine"\n'


def test_a_folder_whose_pyproject_names_another_code_location_gets_the_module_named(tmp_path):
    make_lake(tmp_path / "lake")
    (tmp_path / "pyproject.toml").write_text('[tool.dagster]\nmodule_name = "my_project.definitions"\n')
    done = CliRunner().invoke(main, ["init", str(tmp_path / "lake"), "--dir", str(tmp_path)])
    assert done.exit_code == 0, done.output
    assert "  dg dev -m lumos_dagster.definitions\n" in done.output


def test_init_on_a_missing_folder_says_so_in_one_line(tmp_path):
    done = CliRunner().invoke(main, ["init", str(tmp_path / "nowhere"), "--dir", str(tmp_path)])
    assert done.exit_code == 1
    assert done.output == f"Error: {tmp_path / 'nowhere'}: no such folder\n"
    assert not (tmp_path / "lumos.yaml").exists()


@pytest.mark.servers
def test_init_on_a_bucket_writes_an_s3_source_and_finds_its_datasets(tmp_path, monkeypatch):
    for key, value in S3_TEST_CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    server, url, client = s3_emulator("acme")
    try:
        client.put_object(Bucket="acme", Key="lake/sales/orders/dt=2026-03-01/part-0.parquet", Body=parquet_bytes())
        client.put_object(Bucket="acme", Key="lake/ref/countries/countries.csv", Body=b"code,name\nFR,France\n")
        done = CliRunner().invoke(main, ["init", "s3://acme/lake/", "--endpoint-url", url, "--dir", str(tmp_path)])
    finally:
        server.stop()
    assert done.exit_code == 0, done.output
    assert (
        "s3://acme/lake/: found 2 datasets: 1 daily-partitioned by dt, 1 not partitioned; formats csv 1, parquet 1"
        in (done.output)
    )
    source = load_config(str(tmp_path / "lumos.yaml")).sources[0]
    assert (source.type, source.bucket, source.prefix, source.endpoint_url) == ("s3", "acme", "lake", url)
