"""The Lumos component in a Dagster project of the user's own, as README's "Using it on your own lake" runs it:
a project as `create-dagster project` makes one (and one it made), Lumos installed beside it, `lumos init` on
a lake in it, then the commands it prints: `dg scaffold defs`, `dg dev` (a materialization launched there as
the UI launches one, run by the daemon in a run worker of its own) and `dg launch`. The lake reaches DataHub
Lite, and no command prints a traceback or a Dagster warning."""

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import yaml
from click.testing import CliRunner

from lumos_dagster.assets.state import state_key
from lumos_dagster.catalog.datahub_lite import DataHubLiteCatalog
from lumos_dagster.cli import main
from lumos_dagster.component import LumosComponent
from lumos_dagster.floor.config import load_config
from lumos_dagster.lineage.catalogue import RegistryState
from tests.lake import backdate
from tests.test_init import DAGSTER_WARNING, DAYS, make_lake

pytestmark = pytest.mark.dagster

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[1]
DATASETS = {"ref/countries", "sales/orders", "web/events"}
REPORTS = {"lumos_cost_report", "lumos_overview"}

#: create-dagster's project template (1.13): pyproject.toml's [tool.dg] and a definitions.py loading defs/
PYPROJECT = """\
[project]
name = "my_project"
requires-python = ">=3.10,<3.15"
version = "0.1.0"
dependencies = ["dagster", "lumos"]

[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[tool.dg]
directory_type = "project"

[tool.dg.project]
root_module = "my_project"
registry_modules = ["my_project.components.*"]
"""
DEFINITIONS = """\
from pathlib import Path

from dagster import definitions, load_from_defs_folder


@definitions
def defs():
    return load_from_defs_folder(path_within_project=Path(__file__).parent)
"""

LOCATION = """{ workspaceOrError { ... on Workspace { locationEntries { loadStatus locationOrLoadError {
  ... on PythonError { message } ... on RepositoryLocation { name repositories { assetNodes { assetKey { path } } } }
} } } } }"""
LAUNCH = """mutation($params: ExecutionParams!) { launchRun(executionParams: $params) { __typename
  ... on LaunchRunSuccess { run { runId } } ... on Error { message } } }"""
RUN = "query($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }"
LOAD_ERROR = """{ workspaceOrError { ... on Workspace { locationEntries { loadStatus locationOrLoadError {
  ... on PythonError { message errorChain { error { message } } } } } } } }"""


def user_project(folder: Path) -> None:
    package = folder / "src" / "my_project"
    (package / "defs").mkdir(parents=True)
    (folder / "pyproject.toml").write_text(PYPROJECT)
    (package / "__init__.py").write_text("")
    (package / "defs" / "__init__.py").write_text("")
    (package / "definitions.py").write_text(DEFINITIONS)


def clean(done: subprocess.CompletedProcess | str) -> str:
    """What a command printed, after checking it printed no traceback and no Dagster warning."""
    said = done if isinstance(done, str) else done.stdout + done.stderr
    assert "Traceback" not in said, said[-3000:]
    assert [line for line in said.splitlines() if DAGSTER_WARNING.search(line)] == []
    return said


def graphql(url: str, query: str, variables: dict | None = None) -> dict:
    body = httpx.post(f"{url}/graphql", json={"query": query, "variables": variables or {}}, timeout=30).json()
    assert not body.get("errors"), body["errors"]
    return body["data"]


def wait(what: str, check, timeout: float, log: Path):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if found := check():
                return found
        except httpx.TransportError:  # the webserver is not listening yet
            pass
        time.sleep(0.5)
    pytest.fail(f"{what}: not within {timeout} s\n{log.read_text()[-3000:]}")


def loaded(url: str) -> tuple[str, set[str]] | None:
    """The code location's name and asset keys, once loaded."""
    (entry,) = graphql(url, LOCATION)["workspaceOrError"]["locationEntries"]
    if entry["loadStatus"] != "LOADED":
        return None
    location = entry["locationOrLoadError"]
    (repository,) = location["repositories"]  # a PythonError fails here, its message shown
    return location["name"], {"/".join(node["assetKey"]["path"]) for node in repository["assetNodes"]}


@contextmanager
def dg_dev(env: dict, folder: Path) -> Iterator[tuple[str, Path]]:
    """`dg dev` in `folder`: (its URL, its log), until stopped as Ctrl-C stops it (webserver, daemon and code
    server with it). Its output goes to a file that no pipe blocks."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = folder / "dg-dev.log"
    with open(log, "w") as out:
        dev = subprocess.Popen(["dg", "dev", "-p", str(port)], cwd=folder, env=env, stdout=out, stderr=out,
                               start_new_session=True)  # fmt: skip
    try:
        yield f"http://127.0.0.1:{port}", log
    finally:
        os.killpg(dev.pid, signal.SIGINT)
        try:
            dev.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(dev.pid, signal.SIGKILL)
            dev.wait()


def ui_materializes(env: dict, folder: Path, dataset: str, day: str, catalog: DataHubLiteCatalog) -> None:
    """`dg dev` shows the lake's assets; a run of `dataset`'s `day` launched there succeeds; and every dataset
    reaches the catalog with nobody launching the others: the storage sensor's first tick snapshots them."""
    with dg_dev(env, folder) as (url, log):
        location, assets = wait("dg dev loading the project", lambda: loaded(url), 90, log)
        assert assets == DATASETS | REPORTS
        selector = {"repositoryLocationName": location, "repositoryName": "__repository__",
                    "jobName": "__ASSET_JOB", "assetSelection": [{"path": dataset.split("/")}]}  # fmt: skip
        params = {"selector": selector, "executionMetadata": {"tags": [{"key": "dagster/partition", "value": day}]}}
        launched = graphql(url, LAUNCH, {"params": params})["launchRun"]
        assert launched["__typename"] == "LaunchRunSuccess", launched

        def finished() -> str | None:
            status = graphql(url, RUN, {"id": launched["run"]["runId"]})["runOrError"]["status"]
            return status if status in ("SUCCESS", "FAILURE", "CANCELED") else None

        assert wait("the launched run", finished, 90, log) == "SUCCESS", log.read_text()[-3000:]
        every = lambda: {s.dataset.name for s in catalog.read_all()} == DATASETS  # noqa: E731
        wait("the first snapshot of every dataset, by the sensors (issue 41)", every, 120, log)
    clean(log.read_text())


def test_lumos_init_then_dg_put_the_lake_into_datahub_lite(tmp_path):
    folder = tmp_path / "my-project"
    user_project(folder)
    make_lake(folder / "lake")
    backdate(folder / "lake" / "ref")  # the undated CSV, in the windows of DAYS
    env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "LUMOS_CONFIG", "PYTHONWARNINGS")}
    # the project as `pip install -e .` would make it importable; Lumos (this checkout's) and dg from this
    # environment; a home of the test's own, where dg keeps its telemetry folder (~/.dagster/.telemetry,
    # whatever DAGSTER_HOME says)
    env |= {
        "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        "PYTHONPATH": os.pathsep.join([str(folder / "src"), str(ROOT)]),
    }
    env["HOME"] = str(tmp_path / "home")

    def run(command: list[str]) -> str:
        done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stdout + done.stderr
        return clean(done)

    said = run(["lumos", "init", "lake"])
    # a project of dg's: the component goes into it; no workspace.yaml that `dagster dev` would take instead
    assert (folder / "pyproject.toml").read_text() == PYPROJECT
    assert not (folder / "workspace.yaml").exists()
    printed = [line.strip() for line in said.splitlines() if line.startswith("  ")]
    export, scaffold, dev, launch = printed
    env |= dict(item.split("=", 1) for item in shlex.split(export)[1:])
    assert env["DAGSTER_HOME"] == str(folder / ".lumos/dagster") and "LUMOS_CONFIG" not in export
    assert (scaffold, dev) == ("dg scaffold defs lumos_dagster.component.LumosComponent lumos", "dg dev")
    assert shlex.split(launch)[:4] == ["dg", "launch", "--assets", 'key:"*"']

    run(shlex.split(scaffold))
    defs_yaml = yaml.safe_load((folder / "src/my_project/defs/lumos/defs.yaml").read_text())
    assert defs_yaml == {
        "type": "lumos_dagster.component.LumosComponent",
        "attributes": {"config": "{{ context.project_root }}/lumos.yaml"},
    }
    listed = json.loads(run(["dg", "list", "defs", "--json"]))
    assert {a["asset_key"] for a in listed["assets"]} == DATASETS | REPORTS

    catalog = DataHubLiteCatalog(str(folder / ".lumos/catalog.db"))
    ui_materializes(env, folder, "sales/orders", DAYS[0], catalog)
    run([*shlex.split(launch)[:-1], DAYS[1]])  # every dataset's second day

    snapshots = {s.dataset.name: s for s in catalog.read_all()}
    assert set(snapshots) == DATASETS
    assert [p for p, _ in snapshots["sales/orders"].schema.flatten()] == ["order_id", "amount"]


def test_the_components_state_is_the_registry_document_it_builds_from(tmp_path, monkeypatch):
    """`dg utils refresh-defs-state` (and the UI's refresh) store what `write_state_to_path` writes; the
    definitions built from it are that registry's, whatever the registry became since."""
    make_lake(tmp_path / "lake")
    monkeypatch.chdir(tmp_path)
    assert CliRunner().invoke(main, ["init", "lake"]).exit_code == 0
    component = LumosComponent(config=str(tmp_path / "lumos.yaml"))
    assert component.defs_state_config.key == state_key(load_config(str(tmp_path / "lumos.yaml")))
    state = tmp_path / "state"
    component.write_state_to_path(state)
    assert {r.name for r in RegistryState.loads(state.read_text()).records} == DATASETS

    (tmp_path / "lake/web/events/dt=2026-03-02/events.csv").unlink()
    assert CliRunner().invoke(main, ["discover"]).exit_code == 0  # web/events is gone from the registry
    keys = lambda defs: {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}  # noqa: E731
    context = None  # what a project's load gives it: the component reads nothing of it
    assert keys(component.build_defs_from_state(context, state)) == DATASETS | REPORTS
    assert keys(component.build_defs_from_state(context, None)) == {"ref/countries", "sales/orders"} | REPORTS


def test_create_dagster_then_a_lumos_yaml_typo_is_lumos_own_one_line_in_dg_and_in_the_ui(tmp_path):
    """Issue 41: the README's `create-dagster project` comes with Lumos (it was not installed), and a typo
    in lumos.yaml, which `lumos` says in one line, was 161 lines of traceback ending in a
    ComponentTreeException through `dg launch`, and a code location "Failed" in the UI without saying why."""
    env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "LUMOS_CONFIG", "PYTHONWARNINGS")}
    env |= {"PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}", "HOME": str(tmp_path / "home")}
    created = subprocess.run([str(BIN / "create-dagster"), "project", "my-project"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=120)  # fmt: skip
    assert created.returncode == 0, created.stdout + created.stderr
    folder = tmp_path / "my-project"
    assert "[tool.dg]" in (folder / "pyproject.toml").read_text()
    # the project importable as `pip install -e .` makes it, and this checkout's Lumos before any installed one
    env |= {
        "PYTHONPATH": os.pathsep.join([str(folder / "src"), str(ROOT)]),
        "DAGSTER_HOME": str(folder / ".lumos/dagster"),
    }

    def run(command: list[str], ok: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=180)
        assert (done.returncode == 0) == ok, done.stdout + done.stderr
        return done

    make_lake(folder / "lake")
    run(["lumos", "init", "lake"])
    run(["dg", "scaffold", "defs", "lumos_dagster.component.LumosComponent", "lumos"])
    config = folder / "lumos.yaml"
    config.write_text(config.read_text().replace("\nstore:", "\nstroe:"))
    said = run(["lumos", "summary", "--config", str(config)], ok=False).stderr
    assert said.startswith("Error: ") and "stroe: unknown key (did you mean 'store'?)" in said
    launched = run(["dg", "launch", "--assets", 'key:"*"', "--partition", DAYS[0]], ok=False)
    assert launched.stderr == said and launched.stdout == ""  # lumos' own words, and nothing else
    listed = run(["dg", "list", "defs"], ok=False)
    assert (listed.stdout + listed.stderr).strip() == said.strip()

    def failed_to_load(url: str) -> list[str] | None:
        """The messages of the code location's error and of its causes, as the UI shows them."""
        (entry,) = graphql(url, LOAD_ERROR)["workspaceOrError"]["locationEntries"]
        error = entry["locationOrLoadError"]
        if entry["loadStatus"] != "LOADED" or "message" not in (error or {}):
            return None
        return [error["message"], *(cause["error"]["message"] for cause in error["errorChain"])]

    with dg_dev(env, folder) as (url, log):
        messages = wait("dg dev failing to load the project", lambda: failed_to_load(url), 90, log)
    # the UI: Dagster's "Error occurred during the loading of Dagster definitions", caused by what lumos
    # says, and nothing else (it was caused by the component tree's ComponentTreeException, caused in turn
    # by the error)
    loading, *causes = messages
    assert loading.startswith("dagster._core.errors.DagsterUserCodeLoadError: ")
    assert causes == [f"lumos_dagster.component.LumosComponentError: {said.removeprefix('Error: ')}"]
