"""`lumos summary`, `gate`, `impact` and `search` on a small real project, against golden files; and
the statuses `lumos summary` prints against the asset checks Dagster recorded for the same run.

The project: the demo lake, discovered with `lumos discover`, materialized through Dagster for
DAY - 1, then for DAY after `clean/orders` lost its `status` column (an unaccepted breaking
change: the run fails and holds back its consumers). `raw/customers` fails a Great Expectations
test, `landing/partner_feed` has an unreadable file.

Goldens live in tests/golden/cli/. To regenerate them after a deliberate change of output:
    .venv/bin/pytest tests/test_cli_golden.py --update-golden-files   (or LUMOS_UPDATE_GOLDEN=1)
and review the diff. Only the project's temporary folder is normalised (to <project>), and data ages in days
(to N d): the demo dates its undated files to its first day, DAY - 2, so their age grows with the clock.
"""

import os
import re
from datetime import date, timedelta
from pathlib import Path

import pyarrow.orc as orc
import pytest
from click.testing import CliRunner
from dagster import DagsterEventType, DagsterInstance

from lumos_dagster.cli import main
from lumos_dagster.definitions import build_definitions
from lumos_dagster.floor.config import load_config
from tests.lake import demo_project

pytestmark = pytest.mark.dagster

GOLDEN = Path(__file__).parent / "golden" / "cli"
DAY = date(2026, 11, 25)
DATASETS = 8


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli-golden")
    path = str(demo_project(tmp, DAY))
    assert CliRunner().invoke(main, ["discover", "--config", path]).exit_code == 0

    cfg = load_config(path)
    instance = DagsterInstance.ephemeral()

    def materialize(day: date):
        job = build_definitions(cfg).resolve_implicit_global_asset_job_def()
        return job.execute_in_process(partition_key=str(day), instance=instance, raise_on_error=False)

    assert materialize(DAY - timedelta(days=1)).success
    orders = tmp / "lake" / "clean" / "orders" / f"dt={DAY}" / "part-00000.orc"
    orc.write_table(orc.read_table(orders).drop_columns(["status"]), orders)
    failed = materialize(DAY)
    assert failed.success  # a failed check is the dataset's, not the run's
    return {"dir": tmp, "config": path, "instance": instance, "run": failed}


def lumos(project, *args, env=None, color=False):
    result = CliRunner().invoke(main, [str(a) for a in args], env={"LUMOS_CONFIG": project["config"], **(env or {})},
                                color=color)  # fmt: skip
    return result


def check_golden(pytestconfig, name: str, project, result) -> None:
    text = f"$ lumos {name}\n{result.output}[exit {result.exit_code}]\n".replace(str(project["dir"]), "<project>")
    text = re.sub(r"\bdata \d+ d old\b", "data N d old", text)
    golden = GOLDEN / f"{name.replace(' ', '_').replace('/', '_')}.txt"
    if pytestconfig.getoption("update_golden_files") or os.environ.get("LUMOS_UPDATE_GOLDEN"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert text == golden.read_text(), f"{golden} differs (regenerate: see this module's docstring)"


@pytest.mark.parametrize(
    "args",
    [
        "summary",
        "gate",
        "gate --format markdown",
        "impact clean/orders",
        "search customer",
        "search customer --min-quality 95",
        "search orders --owner alice@example.com",
    ],
)
def test_output_matches_the_golden_file(pytestconfig, project, args):
    check_golden(pytestconfig, args, project, lumos(project, *args.split()))


def _dagster_checks(project) -> dict[str, dict[str, tuple[bool, str, str]]]:
    """dataset → check → (passed, severity, description), as the failed run recorded them."""
    run_id = project["run"].run_id
    out: dict[str, dict[str, tuple[bool, str, str]]] = {}
    for record in project["instance"].all_logs(run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION):
        e = record.dagster_event.event_specific_data
        out.setdefault("/".join(e.asset_key.path), {})[e.check_name] = (e.passed, e.severity.value, e.description)
    return out


def _statuses(summary: str) -> dict[str, str]:
    """dataset → its status cell, from `lumos summary`'s table."""
    lines = summary.splitlines()
    at = lines[0].index("status")
    return {line.split()[0]: line[at:] for line in lines[1 : DATASETS + 1]}


def test_summary_statuses_are_the_checks_dagster_recorded(project):
    checks = _dagster_checks(project)
    summary = lumos(project, "summary").output
    statuses = _statuses(summary)
    assert set(statuses) == set(checks) | {"analytics/customer_360", "analytics/daily_revenue"}
    for name, by_check in checks.items():
        failed = [c for c, (passed, severity, _) in by_check.items() if not passed and severity == "ERROR"]
        warned = [c for c, (passed, severity, _) in by_check.items() if not passed and severity == "WARN"]
        said = [f"{w}: {', '.join(cs)}" for w, cs in (("failed", failed), ("warning", warned)) if cs]
        assert statuses[name] == ("; ".join(said) or "ok"), name
        for check, (passed, _, description) in by_check.items():  # the reasons are Dagster's, word for word
            assert (f"{name}: {check}: {description}" in summary) is not passed, (name, check)
    # the failure this run shows the reader of a summary: what Dagster calls a failed quality test and a
    # failed gate must not read "ok"
    assert statuses["raw/customers"] == "failed: data_quality"
    assert statuses["clean/orders"].startswith("failed: schema_compatible")
    # not materialized by this run: Dagster has no check of them in it, the summary says why
    for held in ("analytics/customer_360", "analytics/daily_revenue"):
        assert held not in checks
        assert statuses[held] == "held back: clean/orders failed schema_compatible"


def test_the_gate_fails_exactly_the_datasets_whose_schema_compatible_check_failed(project):
    import json

    checks = _dagster_checks(project)
    failed = {name for name, by_check in checks.items() if not by_check["schema_compatible"][0]}
    gate = lumos(project, "gate", "--format", "json")
    breaking = {d["name"] for d in json.loads(gate.output)["datasets"] if any(
        c["severity"] == "BREAKING" and c["accepted"] is None for c in d["changes"])}  # fmt: skip
    assert breaking == failed == {"clean/orders"} and gate.exit_code == 1


def test_an_acceptance_recorded_in_the_store_turns_the_summary_and_the_gate_green(project, tmp_path):
    import shutil

    import sqlalchemy as sa

    from lumos_dagster.store import acceptances

    copy = tmp_path / "p"
    shutil.copytree(project["dir"], copy)
    config = str(copy / "lumos.yaml")
    engine = sa.create_engine(load_config(config).store_url)
    with engine.begin() as conn:
        acceptances.record(conn, "clean/orders", "2.0.0", "status", "FIELD_REMOVED", "retired", "ci")
    engine.dispose()
    env = {"LUMOS_CONFIG": config}
    statuses = _statuses(CliRunner().invoke(main, ["summary"], env=env).output)
    assert statuses["clean/orders"] == "warning: metadata_complete"  # the gate passes; the owner is still missing
    # its consumers were held back by a check that now passes: their own (older) snapshots are judged
    assert statuses["analytics/daily_revenue"] == "ok"
    assert CliRunner().invoke(main, ["gate"], env=env).exit_code == 0


def test_a_failed_blocking_check_is_said_once_naming_dataset_field_and_change(project):
    logs = project["instance"].all_logs(project["run"].run_id)
    (message,) = [e.user_message for e in logs if e.user_message.startswith("failed blocking checks")]
    assert "clean/orders: schema_compatible failed: 1 breaking change under FULL (FIELD_REMOVED status)" in message
    assert "accept_major" in message and "compatibility.allow" in message and "/acceptances" in message
    assert "held back: analytics/customer_360" in message


def test_colour_on_a_terminal_only_and_never_with_no_color(project):
    coloured = lumos(project, "summary", env={"NO_COLOR": ""}, color=True).output  # set but empty: colour
    assert "\x1b[31m" in coloured and "\x1b[32m" in coloured  # failed red, ok green
    assert "\x1b[" not in lumos(project, "summary").output  # not a terminal: click strips it
    assert "\x1b[" not in lumos(project, "summary", env={"NO_COLOR": "1"}, color=True).output


def test_min_quality_takes_a_score_or_a_percentage(project):
    assert lumos(project, "search", "customer", "--min-quality", "60").output == (
        lumos(project, "search", "customer", "--min-quality", "0.6").output
    )
    assert "raw/customers  (" in lumos(project, "search", "customer", "--min-quality", "60").output
    refused = lumos(project, "search", "x", "--min-quality", "101")
    assert refused.exit_code == 2 and "101: give a score from 0 to 1 (0.95) or a percentage (95)" in refused.output


def test_version_policy_choices_and_one_error_prefix(project, tmp_path):
    assert lumos(project, "--version").output.startswith("lumos, version ")
    usage = lumos(project, "diff", "--help").output
    assert usage.count("full_transitive") + usage.count("FULL_TRANSITIVE") == 1
    assert lumos(project, "diff", "a.avsc", "b.avsc", "--policy", "FULL").exit_code == 2  # accepted, files missing
    bad = lumos(project, "gate", "--since", "yesterday")
    assert (bad.exit_code, bad.output) == (2, "Error: --since 'yesterday' is not an ISO 8601 time\n")
    (tmp_path / "x.parquet").write_bytes(b"nope")
    assert lumos(project, "schema", tmp_path / "x.parquet").output.startswith("Error: ")
