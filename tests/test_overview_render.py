"""The estate overview's renderers: JSON, markdown, CSV, Excel, and the HTML page as a real browser draws it."""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
from html import escape
from html.parser import HTMLParser
from pathlib import Path

import openpyxl
import pytest

from lumos_dagster.reports.render import to_csv_files, to_html, to_json, to_markdown, to_xlsx

pytestmark = pytest.mark.browser

# Dataset and domain names are data: they must show as text everywhere, never act as markup.
EVIL = 'raw/</script><script>document.body.dataset.pwned = "yes"</script>'
EVIL_DOMAIN = "<b>ops</b>"
FORMULA = "=SUM(1,2)"


def _overview() -> dict:
    return {
        "title": "Lumos estate overview",
        "generated_at": "2026-11-25T10:00:00+00:00",
        "totals": {
            "datasets": 120,
            "owned": 80,
            "documented": 70,
            "tagged": 30,
            "with_quality": 12,
            "stale": 2,
            "breaking_this_week": 3,
            "monthly_cost": 12345.6,
        },
        "inventory": {
            "by_platform": {"s3": 40, "file": 80, "postgres": 40},
            "by_domain": {"sales": 10, "raw": 60, EVIL_DOMAIN: 5},
            "by_team": {"team-a": 5, "(none)": 40, "alice@example.com": 3},
        },
        "stale": [
            {"dataset": "raw/x", "last_modified": "2026-10-01T00:00:00+00:00", "days": 55, "owners": ["ann@x.io"]},
            {"dataset": EVIL, "last_modified": None, "days": 400, "owners": ["bob@x.io", "data-eng"]},
        ],
        "unowned": [
            {"dataset": "raw/y", "platform": "file", "domain": "raw"},
            {"dataset": EVIL, "platform": "s3", "domain": EVIL_DOMAIN},
            {"dataset": FORMULA, "platform": "postgres", "domain": "sales"},
        ],
        "changes_this_week": [
            {
                "dataset": "sales/orders",
                "version": "2.0.0",
                "previous_version": "1.3.0",
                "change_class": "major",
                "breaking": 1,
                "changes": 3,
                "when": "2026-11-24T08:00:00+00:00",
            },
            {
                "dataset": "sales/refunds",
                "version": "1.1.0",
                "previous_version": "1.0.0",
                "change_class": "minor",
                "breaking": 0,
                "changes": 2,
                "when": "2026-11-23T09:30:00+00:00",
            },
            {
                "dataset": "raw/events",
                "version": "3.0.0",
                "previous_version": "2.4.1",
                "change_class": "major",
                "breaking": 2,
                "changes": 2,
                "when": "2026-11-22T17:00:00+00:00",
            },
        ],
        "risky": [
            {"dataset": "sales/orders", "downstream": 7, "owners": ["ann@x.io"]},
            {"dataset": "raw/events", "downstream": 12, "owners": ["data-eng"]},
        ],
        "coverage": {"owners": 0.66, "docs": 0.583, "tags": 0.25, "quality": 0.1},
        "cost": {
            "month": "2026-11",
            "currency": "USD",
            "total": 8200.5,
            "by_domain": {"sales": 5000.0, "marketing": 2000.0, "raw": 1200.5},
            "top": [{"dataset": "sales/orders", "total": 7000.0}, {"dataset": "raw/events", "total": 1200.5}],
        },
    }


def _empty_overview() -> dict:
    return {
        "title": "Lumos estate overview",
        "generated_at": "2026-11-25T10:00:00+00:00",
        "totals": {
            "datasets": 3,
            "owned": 3,
            "documented": 0,
            "tagged": 0,
            "with_quality": 0,
            "stale": 0,
            "breaking_this_week": 0,
            "monthly_cost": None,
        },
        "inventory": {"by_platform": {"file": 3}, "by_domain": {"raw": 3}, "by_team": {}},
        "stale": [],
        "unowned": [],
        "changes_this_week": [],
        "risky": [],
        "coverage": {"owners": 1.0, "docs": 0.0, "tags": 0.0, "quality": 0.0},
        "cost": None,
    }


@pytest.fixture
def overview() -> dict:
    return _overview()


@pytest.fixture
def empty_overview() -> dict:
    return _empty_overview()


# --- JSON and markdown ----------------------------------------------------------------------------


def test_json_round_trips_with_sorted_keys(overview, empty_overview):
    for data in (overview, empty_overview):
        text = to_json(data)
        assert json.loads(text) == data
        assert text.startswith('{\n  "changes_this_week": ')  # indent 2, keys sorted


def test_output_depends_on_the_data_not_on_dict_order(overview):
    # a JSON round trip re-orders every dict: the renderers must not care
    reordered = json.loads(to_json(overview))
    assert list(reordered["inventory"]["by_platform"]) != list(overview["inventory"]["by_platform"])
    assert to_html(reordered) == to_html(overview)
    assert to_markdown(reordered) == to_markdown(overview)


def test_markdown_has_the_key_figures(overview):
    md = to_markdown(overview)
    assert md.startswith("# Lumos estate overview\n")
    for line in ("| Datasets | 120 |", "| Breaking this week | 3 |", "| Monthly cost | 12,345.60 |"):
        assert line in md
    assert "owners 66% · docs 58% · tags 25% · quality 10%" in md
    # riskiest first, whatever the input order
    assert md.index("| raw/events | 12 | data-eng |") < md.index("| sales/orders | 7 | ann@x.io |")
    assert "| sales/orders | 1.3.0 → 2.0.0 | major | 1 | 3 |" in md
    assert "**Cost 2026-11:** 8,200.50 USD" in md


def test_markdown_of_an_empty_estate(empty_overview):
    md = to_markdown(empty_overview)
    assert "| Monthly cost | n/a |" in md
    assert md.count("\nnone\n") == 2  # risky, changes
    assert "**Cost:** n/a" in md


def test_markdown_stays_compact():
    data = _overview()
    data["risky"] = [{"dataset": f"raw/t{i:02}", "downstream": i, "owners": []} for i in range(25)]
    md = to_markdown(data)
    assert "| raw/t24 | 24 |" in md and "| raw/t15 | 15 |" in md and "raw/t14" not in md
    assert "and 15 more" in md


def test_markdown_escapes_names():
    data = _overview()
    data["risky"] = [{"dataset": EVIL, "downstream": 1, "owners": ["a|b"]}]
    md = to_markdown(data)
    assert "<script>" not in md
    assert "\\<script\\>" in md and "a\\|b" in md


# --- CSV and Excel --------------------------------------------------------------------------------


def _read_csv(path: Path) -> list[list[str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def test_csv_files(overview, tmp_path):
    folder = tmp_path / "new" / "csv"
    paths = to_csv_files(overview, folder)
    names = [Path(p).name for p in paths]
    assert names == [
        "inventory.csv",
        "stale.csv",
        "unowned.csv",
        "changes_this_week.csv",
        "risky.csv",
        "coverage.csv",
        "cost_by_domain.csv",
        "cost_top.csv",
    ]
    assert all(Path(p).parent == folder for p in paths)

    inventory = _read_csv(folder / "inventory.csv")
    assert inventory[0] == ["dimension", "name", "datasets"]
    assert inventory[1:4] == [["platform", "file", "80"], ["platform", "postgres", "40"], ["platform", "s3", "40"]]
    assert ["domain", EVIL_DOMAIN, "5"] in inventory
    assert ["team", "(none)", "40"] in inventory
    assert len(inventory) == 1 + 3 + 3 + 3

    stale = _read_csv(folder / "stale.csv")
    assert stale[0] == ["dataset", "last_modified", "days", "owners"]
    assert stale[2] == [EVIL, "", "400", "bob@x.io, data-eng"]

    changes = _read_csv(folder / "changes_this_week.csv")
    assert changes[1] == ["sales/orders", "2.0.0", "1.3.0", "major", "1", "3", "2026-11-24T08:00:00+00:00"]
    assert [row[:2] for row in _read_csv(folder / "risky.csv")] == [  # riskiest first
        ["dataset", "downstream"],
        ["raw/events", "12"],
        ["sales/orders", "7"],
    ]
    assert _read_csv(folder / "coverage.csv")[1:3] == [["owners", "0.66", "66.0"], ["docs", "0.583", "58.3"]]
    assert _read_csv(folder / "cost_top.csv") == [
        ["dataset", "total"],
        ["sales/orders", "7000.0"],
        ["raw/events", "1200.5"],
    ]


def test_csv_files_of_an_empty_estate(empty_overview, tmp_path):
    paths = to_csv_files(empty_overview, tmp_path)
    assert not any("cost" in Path(p).name for p in paths)
    assert _read_csv(tmp_path / "stale.csv") == [["dataset", "last_modified", "days", "owners"]]


def test_xlsx(overview, tmp_path):
    path = tmp_path / "overview.xlsx"
    to_xlsx(overview, path)
    book = openpyxl.load_workbook(path)
    assert book.sheetnames == ["Summary", "Inventory", "Stale", "Unowned", "Changes", "Risky", "Coverage", "Cost"]

    summary = {row[0]: row[1] for row in book["Summary"].iter_rows(min_row=2, values_only=True)}
    assert summary["title"] == "Lumos estate overview"
    assert summary["datasets"] == 120 and summary["monthly_cost"] == 12345.6
    assert all(cell.font.bold for cell in book["Summary"][1])

    unowned = book["Unowned"]
    assert [c.value for c in unowned[1]] == ["dataset", "platform", "domain"]
    assert unowned["A3"].value == EVIL
    assert unowned["A4"].value == FORMULA and unowned["A4"].data_type == "s"  # text, not a formula
    assert 10 <= unowned.column_dimensions["A"].width <= 60

    assert [c.value for c in book["Changes"][2]][:4] == ["sales/orders", "2.0.0", "1.3.0", "major"]
    assert book["Stale"]["D3"].value == "bob@x.io, data-eng"
    assert [row for row in book["Cost"].iter_rows(values_only=True)][:3] == [
        ("breakdown", "name", "total (USD)"),
        ("month", "2026-11", 8200.5),
        ("domain", "sales", 5000),
    ]


def test_xlsx_of_an_empty_estate(empty_overview, tmp_path):
    path = tmp_path / "overview.xlsx"
    to_xlsx(empty_overview, path)
    book = openpyxl.load_workbook(path)
    assert "Cost" not in book.sheetnames
    assert book["Stale"].max_row == 1
    summary = {row[0]: row[1] for row in book["Summary"].iter_rows(min_row=2, values_only=True)}
    assert "monthly_cost" in summary and summary["monthly_cost"] is None


# --- HTML, before and after a real browser ran it --------------------------------------------------


class _Page(HTMLParser):
    """What the tests look at in a page: charts (bars and texts), scripts, table cells, tag names."""

    def __init__(self, markup: str):
        super().__init__()
        self.charts: dict[str, dict[str, list]] = {}
        self.scripts: list[tuple[dict, str]] = []
        self.cells: list[str] = []
        self.tags: set[str] = set()
        self._chart: dict[str, list] | None = None
        self._text: list[str] | None = None
        self._script: dict | None = None
        self.feed(markup)
        self.close()

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        classes = (attributes.get("class") or "").split()
        self.tags.add(tag)
        if tag == "svg" and "chart" in classes:
            assert attributes["data-chart"] not in self.charts, "chart drawn twice"
            self._chart = self.charts[attributes["data-chart"]] = {"bars": [], "texts": [], "left": []}
        elif tag == "rect" and "bar" in classes and self._chart is not None:
            self._chart["bars"].append((attributes["data-label"], attributes["data-value"]))
        elif tag in ("td", "text", "script"):
            if tag == "text" and self._chart is not None and "data-left" in attributes:
                self._chart["left"].append(int(attributes["data-left"]))  # a label's left edge, as drawn
            self._text = []
            self._script = attributes if tag == "script" else None

    def handle_endtag(self, tag):
        if tag == "svg":
            self._chart = None
        elif tag == "td" and self._text is not None:
            self.cells.append("".join(self._text))
        elif tag == "text" and self._chart is not None and self._text is not None:
            self._chart["texts"].append("".join(self._text))
        elif tag == "script" and self._script is not None:
            self.scripts.append((self._script, "".join(self._text or [])))
        if tag in ("td", "text", "script"):
            self._text = None

    def handle_data(self, data):
        if self._text is not None:
            self._text.append(data)


def _chromium() -> str:
    binary = shutil.which("chromium")
    if binary is None:
        pytest.fail("chromium is missing: install Debian's package with `apt-get install -y chromium`")
    return binary


def _browse(markup: str, folder: Path) -> tuple[str, Path]:
    """The DOM after the page's scripts ran, and a screenshot, from one headless Chromium run."""
    page, png = folder / "overview.html", folder / "overview.png"
    page.write_text(markup, encoding="utf-8")
    command = [
        _chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={folder / 'profile'}",
        "--window-size=1200,2000",
        f"--screenshot={png}",
        "--dump-dom",
        page.as_uri(),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout, png


@pytest.fixture(scope="module")
def browsed(tmp_path_factory) -> tuple[str, str, Path]:
    markup = to_html(_overview())
    return (markup, *_browse(markup, tmp_path_factory.mktemp("html")))


@pytest.fixture(scope="module")
def browsed_empty(tmp_path_factory) -> tuple[str, str, Path]:
    markup = to_html(_empty_overview())
    return (markup, *_browse(markup, tmp_path_factory.mktemp("html-empty")))


def test_html_is_self_contained_and_charts_come_from_the_script(browsed, overview):
    markup = browsed[0]
    assert "<svg" not in markup and "<rect" not in markup
    # the only address is the SVG namespace; nothing is fetched
    assert re.findall(r"https?://[^\s\"'<>]+", markup) == ["http://www.w3.org/2000/svg"]
    assert not re.search(r"\s(src|href)=", markup)

    raw = _Page(markup)
    assert [attrs for attrs, _ in raw.scripts] == [{"type": "application/json", "id": "lumos-data"}, {}]
    embedded = raw.scripts[0][1]
    assert "</" not in embedded
    assert json.loads(embedded) == overview
    # the tables are there without JavaScript, with the names escaped
    assert EVIL in raw.cells and escape(EVIL) in markup
    assert "sales/orders" in raw.cells and "7,000.00" in raw.cells  # cost_top, money formatted


def test_browser_draws_every_chart(browsed):
    page = _Page(browsed[1])
    bars = {name: chart["bars"] for name, chart in page.charts.items()}
    assert bars == {
        "inventory-platform": [("file", "80"), ("postgres", "40"), ("s3", "40")],
        "inventory-domain": [("raw", "60"), ("sales", "10"), (EVIL_DOMAIN, "5")],
        "inventory-team": [("(none)", "40"), ("team-a", "5"), ("alice@example.com", "3")],
        "coverage": [("owners", "66"), ("docs", "58.3"), ("tags", "25"), ("quality", "10")],
        "changes": [("breaking", "3"), ("other", "4")],
        "cost-domain": [("sales", "5000"), ("marketing", "2000"), ("raw", "1200.5")],
    }
    # a label and a value per bar
    assert page.charts["coverage"]["texts"] == ["owners", "66%", "docs", "58.3%", "tags", "25%", "quality", "10%"]
    assert page.charts["cost-domain"]["texts"][:2] == ["sales", "5,000 USD"]
    assert all(len(chart["texts"]) == 2 * len(chart["bars"]) for chart in page.charts.values())
    # every label starts inside its chart: "alice@example.com" used to show as "lice@example.com"
    assert "alice@example.com" in page.charts["inventory-team"]["texts"]
    assert all(len(c["left"]) == len(c["bars"]) and min(c["left"]) >= 0 for c in page.charts.values())


def test_browser_shows_names_as_text(browsed):
    page = _Page(browsed[1])
    # the evil names did not become elements: still our two scripts, no <b>, and the text is intact
    assert [attrs.get("id") for attrs, _ in page.scripts] == ["lumos-data", None]
    assert "b" not in page.tags
    assert "data-pwned" not in browsed[1]  # the injected script would have set it on <body>
    assert page.cells.count(EVIL) == 2  # stale and unowned
    assert EVIL_DOMAIN in page.charts["inventory-domain"]["texts"]


def test_browser_screenshot(browsed):
    png = browsed[2]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 10_000


def test_browser_page_of_an_empty_estate(browsed_empty):
    markup, dom, _ = browsed_empty
    page = _Page(dom)
    assert set(page.charts) == {"inventory-platform", "inventory-domain", "coverage"}
    assert page.charts["coverage"]["bars"] == [("owners", "100"), ("docs", "0"), ("tags", "0"), ("quality", "0")]
    assert 'data-slot="cost-domain"' not in markup
    # team and changes charts (drawn as "none" by the script), changes, cost, risky, stale and unowned sections
    assert dom.count('<p class="none">none</p>') == 7
    assert page.cells == []
