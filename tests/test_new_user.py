"""Issue 41, the rough edges a new user hit on a lake of their own, each a test that failed on the code
before it: one "unknown dataset" message with suggestions everywhere, a report that names the riskiest
change and counts unowned datasets, a past partition's unreadable files kept in `lumos summary` until
that partition is read whole (the check naming the partition), and a summary line instead of one
`FAILED` line per file past the first few. Real files, the real `lumos` commands, a SQLite store."""

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from click.testing import CliRunner

from lumos_dagster.cli import main
from lumos_dagster.floor.scan_report import FAILURES_SHOWN
from tests.lake import write_parquet

DAYS = ("2026-11-24", "2026-11-25", "2026-11-26")
ORDERS = pa.table({"id": [1, 2], "customer_id": [7, 8], "amount": [1.5, 2.5]})


class Project:
    def __init__(self, root: Path):
        self.root, self.lake = root, root / "lake"
        for day in DAYS[:2]:
            write_parquet(self.lake / "sales" / "orders" / f"dt={day}" / "part-0.parquet", ORDERS)
            write_parquet(self.lake / "sales" / "order_items" / f"dt={day}" / "part-0.parquet",
                          pa.table({"order_id": [1], "sku": ["a"]}))  # fmt: skip
        config = {"sources": [{"name": "lake", "root": "lake"}], "store": {"path": "store.db"},
                  "catalog": {"path": "lite.db"}, "partitions": {"start": "2026-11-20"}}  # fmt: skip
        (root / "lumos.yaml").write_text(yaml.safe_dump(config))
        self.lumos("discover")

    def lumos(self, *args: str, ok: bool | None = True):
        """`lumos ARGS`, which must succeed (`ok`), fail (not `ok`), or either (None)."""
        result = CliRunner().invoke(main, [*args, "-c", str(self.root / "lumos.yaml")])
        assert ok is None or (result.exit_code == 0) == ok, result.output
        assert "Traceback" not in result.output
        return result

    def snapshot(self, first: str, last: str | None = None):
        return self.lumos("snapshot", "--partition-range", f"{first}...{last or first}", ok=None)


@pytest.fixture
def project(tmp_path):
    return Project(tmp_path)


SUGGESTION = "unknown dataset sales/ordrs (did you mean sales/orders or sales/order_items?)"


def test_an_unknown_dataset_is_one_message_with_suggestions_everywhere(project):
    """Was three messages and no suggestion: `history` "no snapshot in the store (materialize it first)",
    `impact` "unknown dataset", `diff` "has no version latest"."""
    project.snapshot(*DAYS[:2])
    for args in (["history", "sales/ordrs"], ["impact", "sales/ordrs"],
                 ["diff", "sales/ordrs@latest", "sales/orders@latest"], ["gate", "--datasets", "sales/ordrs"],
                 ["release", "--datasets", "sales/ordrs"], ["savings", "--datasets", "sales/ordrs"]):  # fmt: skip
        said = project.lumos(*args, ok=False).stderr
        assert SUGGESTION in said and said.count("\n") == 1, (args, said)
    # a dataset Lumos knows but has not snapshotted is not unknown
    write_parquet(project.lake / "web" / "views" / "v.parquet", pa.table({"view_id": [1]}))
    project.lumos("discover")
    said = project.lumos("history", "web/views", ok=False).stderr
    assert "unknown" not in said and "web/views: no snapshot in the store yet" in said


def test_the_report_names_the_riskiest_change_and_counts_unowned_datasets(project, tmp_path):
    """Was "0 owners with context to fill in" with every dataset unowned, and "Riskiest: none" beside a
    failed breaking change."""
    project.snapshot(DAYS[0])
    write_parquet(project.lake / "sales" / "orders" / f"dt={DAYS[1]}" / "part-0.parquet", ORDERS.drop(["amount"]))
    project.snapshot(DAYS[1])  # a breaking change nobody accepted: schema_compatible fails
    out = project.lumos("report", "-o", str(tmp_path / "reports"), "--no-webhook").stdout
    first = out.splitlines()[0]
    assert "0 owned, 2 unowned" in first, first
    assert "riskiest: sales/orders 2.0.0: FIELD_REMOVED amount (failed schema_compatible)" in first, first
    markdown = (tmp_path / "reports" / "overview.md").read_text()
    assert "| sales/orders | 0 |  | 2.0.0: FIELD\\_REMOVED amount |" in markdown
    assert "| Unowned | 2 |" in markdown


def test_a_past_partitions_unreadable_files_stay_in_the_summary_until_it_is_read_whole(project):
    """Was: gone from `lumos summary` once a newer partition was snapshotted, and the check named no
    partition."""
    torn = project.lake / "sales" / "orders" / f"dt={DAYS[0]}" / "part-1.parquet"
    torn.write_bytes(b"PAR1" + b"\0" * 64)  # a Parquet file without its footer
    project.snapshot(*DAYS[:2])
    write_parquet(project.lake / "sales" / "orders" / f"dt={DAYS[2]}" / "part-0.parquet", ORDERS)
    project.snapshot(DAYS[2])
    out = project.lumos("summary").stdout
    assert f"sales/orders: files_readable: 1 file(s) could not be read in {DAYS[0]}" in out, out
    assert f"{torn}: cannot read parquet: not a valid Parquet file" in out and f"({DAYS[0]})" in out
    orders = next(line for line in out.splitlines() if line.startswith("sales/orders "))
    assert orders.endswith("warning: files_readable"), orders
    write_parquet(torn, ORDERS)  # whole now, and its partition read again
    project.snapshot(DAYS[0])
    out = project.lumos("summary").stdout
    assert "could not be read" not in out and str(torn) not in out, out


def test_many_unreadable_files_are_a_few_lines_and_a_count(project):
    """100,000 unreadable files printed 100,000 `FAILED` lines (7.8 MB)."""
    folder = project.lake / "sales" / "orders" / f"dt={DAYS[0]}"
    for i in range(40):
        (folder / f"bad-{i:02}.parquet").write_bytes(b"PAR1" + b"\0" * 64)
    out = project.snapshot(DAYS[0]).stdout
    failed = [line for line in out.splitlines() if line.startswith("FAILED")]
    assert len(failed) == FAILURES_SHOWN + 1, out
    assert failed[-1] == (f"FAILED  and {40 - FAILURES_SHOWN} more: {40 - FAILURES_SHOWN} × cannot read parquet: not a "
                          "valid Parquet file: no PAR1 footer (truncated or another format)")  # fmt: skip
    summary = project.lumos("summary").stdout
    assert len([line for line in summary.splitlines() if "bad-" in line]) == FAILURES_SHOWN
    assert f"and {40 - FAILURES_SHOWN} more: " in summary


ROOT = Path(__file__).resolve().parents[1]
#: a page a message, a comment or a docstring of the package names: `docs/x.md` or `lumos docs x`
PAGE = re.compile(r"\bdocs/([a-z_]+)\.md\b|`lumos docs ([a-z_]+)`")


@pytest.mark.slow  # seconds of its own (a budget reached, a build, a process): make test
def test_every_docs_page_the_package_names_is_installed_with_it(tmp_path):
    """lumos.yaml's comments and the error messages named docs/*.md, which a pip install did not hold: the
    docs are package data now, each page the package names is in the wheel, and `lumos docs TOPIC` prints it."""
    named = {a or b for p in (ROOT / "lumos_dagster").rglob("*.py") for a, b in PAGE.findall(p.read_text())}
    assert {"configuration", "sources", "catalogs", "compatibility"} <= named
    source = tmp_path / "src"  # the wheel built from a copy: the checkout keeps no build/ or egg-info
    for part in ("lumos_dagster", "assets", "resources", "sensors", "spark", "docs"):
        shutil.copytree(ROOT / part, source / part, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__", "img"))  # fmt: skip
    for file in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / file, source / file)
    wheel = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", str(source)]
    built = subprocess.run([*wheel, "-w", str(tmp_path / "wheel")], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp_path / "wheel").glob("lumos-*.whl")
    installed = {n for n in zipfile.ZipFile(wheel).namelist() if n.startswith("lumos_dagster/docs/")}
    assert {f"lumos_dagster/docs/{page}.md" for page in named} <= installed
    for page in sorted(named):
        shown = CliRunner().invoke(main, ["docs", page])
        assert shown.exit_code == 0 and shown.stdout == (ROOT / "docs" / f"{page}.md").read_text(), page
    wrong = CliRunner().invoke(main, ["docs", "configuraton"])
    assert wrong.exit_code == 1 and "did you mean configuration" in wrong.stderr


def test_lumos_init_names_pages_lumos_docs_prints(tmp_path, monkeypatch):
    write_parquet(tmp_path / "lake" / "sales" / "orders" / "o.parquet", ORDERS)
    monkeypatch.chdir(tmp_path)
    assert CliRunner().invoke(main, ["init", "lake"]).exit_code == 0
    comments = [line for line in (tmp_path / "lumos.yaml").read_text().splitlines() if line.startswith("#")]
    pages = {b for line in comments for _, b in PAGE.findall(line)}
    assert pages == {"configuration", "sources", "catalogs"}  # named as a command that works anywhere
    assert not [line for line in comments if "docs/" in line]


def test_create_dagster_comes_with_lumos_dg_extra():
    """The README says `create-dagster project`; installing Lumos did not bring it (`dg scaffold project` and
    `dg init` do not exist in this Dagster). It comes with the `dg` extra the README installs."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    hard = {re.split(r"[<>=!~ \[]", d, maxsplit=1)[0]: d for d in project["dependencies"]}
    dg = {re.split(r"[<>=!~ ]", d, maxsplit=1)[0]: d for d in project["optional-dependencies"]["dg"]}
    assert dg["create-dagster"] == hard["dagster"].replace("dagster", "create-dagster")  # Dagster's release
    assert "create-dagster==" in (ROOT / "constraints.txt").read_text()
    readme = (ROOT / "README.md").read_text()
    assert "create-dagster project my-project" in readme and "pip install 'lumos[dg]'" in readme
    assert (Path(sys.executable).parent / "create-dagster").exists()  # test_component runs it
