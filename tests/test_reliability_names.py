"""Issue 42, items 3 and 7: one rule for names from storage. A folder named with OSC 0 (window
title), OSC 52 (clipboard) and CSI 2J (clear screen) sequences, or with a newline, shows escaped
(`\\x1b`, `\\n`) in every command's output, on a terminal and elsewhere, in Dagster's logs, and in
every report; an ESC in a name no longer kills `lumos report` or the `lumos_reports` step (openpyxl
refused it)."""

from __future__ import annotations

import csv
import json
import os
import pty
import re
import subprocess
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from click.testing import CliRunner
from openpyxl import load_workbook

from lumos_dagster.cli import main
from lumos_dagster.floor.wording import visible
from tests.lake import write_parquet

pytestmark = [pytest.mark.dagster, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
BIN = ROOT / ".venv" / "bin"
DAY = "2026-11-25"
#: window title, clipboard write, clear screen, a bell: what a terminal would act on
HOSTILE = "raw/evil\x1b]0;pwned\x07\x1b]52;c;cm0gLXJmIH4\x07\x1b[2Jname"
SPOOF = "raw/nl\nOK everything is fine"
#: escape sequences but Lumos' own colours (SGR): what no output may hold
TAKEOVER = re.compile(r"\x1b(?!\[[0-9;]*m)|\x07|\x9b|\x9d")


def _project(folder: Path) -> Path:
    for i, name in enumerate((HOSTILE, SPOOF, "raw/orders")):  # schemas apart: three datasets, not one's partitions
        table = pa.table({f"c{i}": pa.array([1], pa.int64())})
        write_parquet(folder / "lake" / name / f"dt={DAY}" / "p.parquet", table)
    config = {"sources": [{"name": "lake", "root": "lake"}], "store": {"path": "store.db"},
              "catalog": {"path": "catalog.db"}, "reports": {"dir": "reports"},
              "partitions": {"start": DAY}}  # fmt: skip
    (folder / "lumos.yaml").write_text(yaml.safe_dump(config))
    return folder / "lumos.yaml"


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """The lake, discovered and snapshotted for DAY."""
    config = _project(tmp_path_factory.mktemp("names"))
    for args in (["discover"], ["snapshot", "--partition", DAY]):
        result = CliRunner().invoke(main, [*args, "-c", str(config)])
        assert result.exit_code == 0, result.output
    return config


def _shows_names_escaped(output: str) -> None:
    assert not TAKEOVER.search(output)
    assert visible(HOSTILE) in output and "raw/nl\\nOK everything is fine" in output
    assert not any(line.startswith("OK everything") for line in output.splitlines())  # no spoofed line


COMMANDS = [["discover"], ["summary"], ["search", "raw"], ["history", HOSTILE], ["cost"], ["impact"]]


@pytest.mark.parametrize("args", COMMANDS, ids=[a[0] for a in COMMANDS])
def test_names_show_escaped_in_every_command_when_not_on_a_terminal(project, args):
    result = CliRunner().invoke(main, [*args, "-c", str(project)])
    assert result.exit_code == 0, result.output
    assert not TAKEOVER.search(result.output)
    if args[0] in ("discover", "summary", "search", "cost"):
        _shows_names_escaped(result.output)


def _on_a_terminal(*args: str, cwd: Path) -> str:
    """What `lumos ARGS` writes to a terminal (a pseudo-terminal: colours on)."""
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"} | {"TERM": "xterm", "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen([str(BIN / "lumos"), *args], stdout=slave, stderr=slave, cwd=cwd, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the other side closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    assert process.wait(timeout=120) == 0, b"".join(chunks).decode()
    return b"".join(chunks).decode()


@pytest.mark.parametrize("args", [["discover"], ["summary"], ["search", "raw"]], ids=lambda a: a[0])
def test_names_show_escaped_on_a_terminal_in_lumos_own_colours(project, args):
    out = _on_a_terminal(*args, cwd=project.parent)
    _shows_names_escaped(out)
    if args[0] == "summary":
        assert "\x1b[32m" in out  # the status colours still reach the terminal


def test_lumos_report_writes_every_format_with_the_names_escaped(project):
    result = CliRunner().invoke(main, ["report", "-c", str(project)])
    assert result.exit_code == 0, result.output
    reports = project.parent / "reports"
    shown = visible(HOSTILE)
    sheet = load_workbook(reports / "overview.xlsx")["Unowned"]
    assert shown in [row[0] for row in sheet.iter_rows(values_only=True)]
    with (reports / "overview-csv" / "unowned.csv").open(newline="") as fh:
        assert shown in [row[0] for row in csv.reader(fh)]
    assert shown in (reports / "overview.html").read_text() and "\x1b" not in (reports / "overview.html").read_text()
    assert HOSTILE in [d["dataset"] for d in json.loads((reports / "overview.json").read_text())["unowned"]]
    assert "\x1b" not in (reports / "overview.md").read_text()


def test_the_reports_step_and_a_run_of_hostile_names_succeed_and_their_logs_show_names_escaped(tmp_path):
    """A Dagster run of the lake and of `lumos_reports` (the overview's Excel workbook included): both
    succeed, and neither the console nor the compute logs carry a sequence a terminal would act on."""
    config = _project(tmp_path)
    (tmp_path / "lake" / HOSTILE / f"dt={DAY}" / "bad.parquet").write_text("not parquet")  # the run's log names it
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text((ROOT / "dagster.yaml").read_text())
    env = {**os.environ, "LUMOS_CONFIG": str(config), "DAGSTER_HOME": str(home), "PYTHONPATH": str(ROOT)}
    assert CliRunner().invoke(main, ["discover", "-c", str(config)]).exit_code == 0
    run = [BIN / "dagster", "asset", "materialize", "-m", "lumos_dagster.definitions", "--select", "*"]
    run += ["--partition", DAY]
    out = subprocess.run(list(map(str, run)), capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert (tmp_path / "reports" / "overview.xlsx").exists()
    logs = [p.read_text(errors="replace") for p in (home / "storage").rglob("*") if p.suffix in (".out", ".err")]
    for text in [out.stdout + out.stderr, *logs]:
        assert not TAKEOVER.search(text)
    assert any(f"{visible(HOSTILE)}/dt={DAY}/bad.parquet" in text for text in logs)  # the scan report, escaped


def test_an_error_quoting_a_name_shows_it_escaped(project):
    """click prints the errors commands raise: their control characters are made visible too (a
    message's own lines, as in lumos.yaml's list of problems, stay lines)."""
    result = CliRunner().invoke(main, ["history", "raw/none\x1b]0;pwned\x07", "-c", str(project)])
    assert result.exit_code == 1 and not TAKEOVER.search(result.output)
    assert result.output.startswith("Error: unknown dataset raw/none\\x1b]0;pwned\\x07: ")
