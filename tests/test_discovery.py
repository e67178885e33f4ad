import pytest

from lumos_dagster.floor.errors import ConfigError
from lumos_dagster.sources.discovery import FileEntry, PathTemplate, group_files
from lumos_dagster.sources.local import list_files
from tests.cases import load_cases


@pytest.mark.parametrize("case", load_cases("discovery.yaml"), ids=lambda c: c["title"])
def test_grouping(case):
    entries = [FileEntry(p, 100, 1_700_000_000.0) for p in case["paths"]]
    formats = frozenset(case["formats"]) if "formats" in case else None
    grouping = group_files(entries, case.get("template"), formats)
    got = {
        name: {
            "location": ds.location,
            "format": ds.format,
            "domain": ds.domain,
            "partition_keys": list(ds.partition_keys),
            "time_key": ds.time_partition_key,
            "files": len(ds.files),
        }
        for name, ds in grouping.datasets.items()
    }
    assert got == case["datasets"]
    assert dict(grouping.skipped) == case.get("skipped", {})


def test_every_listed_file_is_either_in_a_dataset_or_skipped():
    paths = [c for case in load_cases("discovery.yaml") for c in case["paths"]]
    grouping = group_files([FileEntry(p, 1, 0.0) for p in paths])
    placed = [f.entry.path for ds in grouping.datasets.values() for f in ds.files]
    assert sorted(placed + [p for p, _ in grouping.skipped]) == sorted(paths)


def test_file_dates_follow_the_time_partition_format():
    grouping = group_files([FileEntry("a/b/day=20260105/x.csv", 1, 0.0)])
    ds = grouping.datasets["a/b"]
    assert ds.time_format == "%Y%m%d"
    assert str(ds.file_date(ds.files[0])) == "2026-01-05"


@pytest.mark.parametrize("template", ["dt={date}/*", "static/path/*", "{date}/*.csv"])
def test_a_template_must_name_the_dataset(template):
    with pytest.raises(ConfigError, match="names no dataset"):
        PathTemplate(template)


@pytest.mark.parametrize("subpath", ["", "sales", "sales/", "sales/orders", "sales/orders/dt=2026-11-01/part-0.csv"])
def test_listing_gives_root_relative_paths_of_every_walked_file(tmp_path, subpath):
    """Paths are joined while walking, not computed from absolute ones: they must equal what
    os.walk and relpath say, hidden folders skipped but for a table's own."""
    files = [
        "top.csv",
        "sales/orders/dt=2026-11-01/part-0.csv",
        "sales/orders/dt=2026-11-02/part-0.csv",
        "sales/orders/_temporary/part-9.csv",
        "sales/orders/.git/HEAD",
        "sales/events/_delta_log/00000000000000000000.json",
    ]
    for rel in files:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("a\n1\n")
    listed = sorted(e.path for e in list_files(str(tmp_path), subpath))
    hidden = ("/_temporary/", "/.git/")
    start = subpath.rstrip("/")
    expected = sorted(
        f
        for f in files
        if not any(h in f"/{f}" for h in hidden) and (not start or f == start or f.startswith(start + "/"))
    )
    assert listed == expected


def test_a_symlinked_file_is_read_only_when_it_points_under_the_root(tmp_path):
    """A link to a file outside the root (a CSV whose first line would become column names in the
    store and the catalog) is skipped and reported; a link within the root is listed."""
    from lumos_dagster.floor.scan_report import ScanReport

    secret = tmp_path / "outside" / "passwd.csv"
    secret.parent.mkdir()
    secret.write_text("root:x:0:0\n1\n")
    root = tmp_path / "lake"
    (root / "sales" / "orders").mkdir(parents=True)
    (root / "sales" / "orders" / "a.csv").write_text("id\n1\n")
    (root / "sales" / "orders" / "b.csv").symlink_to(root / "sales" / "orders" / "a.csv")
    (root / "sales" / "orders" / "leak.csv").symlink_to(secret)
    (root / "top.csv").symlink_to(secret)
    report = ScanReport()
    listed = sorted(e.path for e in list_files(str(root), "", report))
    assert listed == ["sales/orders/a.csv", "sales/orders/b.csv"]
    assert report.skipped_samples["symlink to a file outside the source's root"] == ["top.csv", "sales/orders/leak.csv"]
    assert list(list_files(str(root), "top.csv", ScanReport())) == []  # asked for by name too


def test_discovering_a_lake_loads_no_reader_library(tmp_path):
    """`lumos discover` lists and groups files (a text file's first bytes included) without the readers'
    libraries: importing pyarrow and fastavro was ~0.15 s of its 0.7 s on the benchmark lake. A forked
    reader pool imports them once, before it forks."""
    import subprocess
    import sys

    from lumos_dagster.cli.demo_lake import build_demo_lake

    build_demo_lake(str(tmp_path / "lake"))
    (tmp_path / "lumos.yaml").write_text(f"sources: [{{name: lake, root: {tmp_path / 'lake'}}}]\n")
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from lumos_dagster.cli import main\n"
        f"result = CliRunner().invoke(main, ['discover', '-c', {str(tmp_path / 'lumos.yaml')!r}])\n"
        "assert result.exit_code == 0, result.output\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'pyarrow', 'fastavro', 'numpy'}))\n"
        "from lumos_dagster.formats.readers import PoolReader\n"
        "PoolReader(workers=1)([(sys.argv[1], 'parquet')])\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'pyarrow', 'fastavro', 'numpy'}))\n"
    )
    parquet = next((tmp_path / "lake").rglob("*.parquet"))
    out = subprocess.run([sys.executable, "-c", code, str(parquet)], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["[]", "['fastavro', 'numpy', 'pyarrow']"]
