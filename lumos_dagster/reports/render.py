"""The estate overview — what a CTO sees — rendered from one plain, JSON-able dict.

Formats: JSON, a markdown summary (Dagster metadata), one CSV per section, an Excel workbook,
and one self-contained HTML page whose inline script draws the charts as SVG. Pure functions:
the same overview always gives the same output.
"""

from __future__ import annotations

import html
import json
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

from lumos_dagster.floor.extras import needs
from lumos_dagster.floor.wording import visible
from lumos_dagster.governance.status import OK, STATUSES
from lumos_dagster.reports.csvsafe import SafeWriter

Table = tuple[tuple[str, ...], list[tuple[Any, ...]]]

TOTALS_ORDER = ("datasets", "owned", "unowned", "documented", "tagged", "with_quality", "stale", "breaking_this_week")
COVERAGE_ORDER = ("owners", "docs", "tags", "quality")
INVENTORY_DIMENSIONS = (("platform", "by_platform"), ("domain", "by_domain"), ("team", "by_team"))
LIST_SECTIONS = {
    "stale": ("dataset", "last_modified", "days", "owners"),
    "unowned": ("dataset", "platform", "domain"),
    "changes_this_week": ("dataset", "version", "previous_version", "change_class", "breaking", "changes", "when"),
    "risky": ("dataset", "downstream", "owners", "failed"),
}
SHEETS = (
    ("Inventory", "inventory"),
    ("Stale", "stale"),
    ("Unowned", "unowned"),
    ("Changes", "changes_this_week"),
    ("Risky", "risky"),
    ("Coverage", "coverage"),
)
MARKDOWN_ROWS = 10  # Dagster shows the markdown inline: a summary, not the whole list
STATUS_COLUMNS = ("dataset", "status", "checks")


# --- the sections as tables, shared by CSV, Excel and the HTML tables ---------------------------


def _ranked(counts: dict[str, Any]) -> list[tuple[str, Any]]:
    """Largest first, ties by name: the order comes from the data, not from the producer's dicts."""
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def _ordered(mapping: dict[str, Any], preferred: tuple[str, ...]) -> list[tuple[str, Any]]:
    """The known keys in their natural order, then any others by name."""
    keys = [k for k in preferred if k in mapping] + sorted(set(mapping) - set(preferred))
    return [(k, mapping[k]) for k in keys]


def _flat(value: Any) -> Any:
    return ", ".join(map(str, value)) if isinstance(value, (list, tuple)) else value


def riskiest(overview: dict[str, Any]) -> list[dict[str, Any]]:
    """A breaking change that failed its check first, then most downstream dependants: the order a reader
    should look at them in."""
    return sorted(overview["risky"], key=lambda r: (not r.get("failed"), -r["downstream"], r["dataset"]))


def _tables(overview: dict[str, Any]) -> dict[str, Table]:
    inventory = overview["inventory"]
    out: dict[str, Table] = {
        "inventory": (
            ("dimension", "name", "datasets"),
            [(dim, name, n) for dim, key in INVENTORY_DIMENSIONS for name, n in _ranked(inventory.get(key, {}))],
        )
    }
    for section, columns in LIST_SECTIONS.items():
        items = riskiest(overview) if section == "risky" else overview[section]
        out[section] = (columns, [tuple(_flat(item.get(c)) for c in columns) for item in items])
    if "status" in overview:  # an overview of an older Lumos has none
        out["status"] = (STATUS_COLUMNS, [tuple(r[c] for c in STATUS_COLUMNS) for r in overview["status"]])
    out["coverage"] = (
        ("metric", "fraction", "percent"),
        [(m, f, round(f * 100, 1)) for m, f in _ordered(overview["coverage"], COVERAGE_ORDER)],
    )
    cost = overview.get("cost")
    if cost:
        out["cost_by_domain"] = (("domain", "total"), _ranked(cost["by_domain"]))
        out["cost_top"] = (("dataset", "total"), [(t["dataset"], t["total"]) for t in cost["top"]])
    return out


def _summary(overview: dict[str, Any]) -> Table:
    totals = _ordered(overview["totals"], TOTALS_ORDER)
    return ("metric", "value"), [("title", overview["title"]), ("generated_at", overview["generated_at"]), *totals]


def _status_counts(overview: dict[str, Any]) -> str:
    """`2 ok · 1 failed · 1 held back`, in the order of governance.status.STATUSES."""
    counts = Counter(r["status"] for r in overview["status"])
    return " · ".join(f"{counts[word]} {word}" for word in STATUSES if counts[word]) or "no dataset"


def _not_ok(overview: dict[str, Any]) -> Table:
    """The datasets whose status is not ok: what a reader acts on."""
    columns, rows = _tables(overview)["status"]
    return columns, [r for r in rows if r[1] != OK]


def _label(key: str) -> str:
    return key.replace("_", " ").capitalize()


def _figure(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.2f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _percent(fraction: float) -> str:
    return f"{fraction * 100:.0f}%"


# --- JSON, markdown, CSV, Excel --------------------------------------------------------------------


def to_json(overview: dict[str, Any]) -> str:
    return json.dumps(overview, indent=2, sort_keys=True)


def _md(text: Any) -> str:
    """Dataset names are data: no markdown or HTML of theirs reaches the renderer, nor a control character."""
    return re.sub(r"([\\`*_\[\]<>|])", r"\\\1", visible(str(text)))


def _md_table(columns: tuple[str, ...], rows: list[tuple[Any, ...]]) -> list[str]:
    if not rows:
        return ["none"]
    lines = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    lines += ["| " + " | ".join(_md(v) for v in row) + " |" for row in rows[:MARKDOWN_ROWS]]
    return lines + ([f"\nand {len(rows) - MARKDOWN_ROWS} more"] if len(rows) > MARKDOWN_ROWS else [])


def to_markdown(overview: dict[str, Any]) -> str:
    lines = [f"# {_md(overview['title'])}", "", f"Generated {_md(overview['generated_at'])}", ""]
    lines += _md_table(
        ("Metric", "Value"), [(_label(k), _figure(v)) for k, v in _ordered(overview["totals"], TOTALS_ORDER)]
    )
    coverage = _ordered(overview["coverage"], COVERAGE_ORDER)
    lines += ["", "**Coverage:** " + " · ".join(f"{_md(m)} {_percent(f)}" for m, f in coverage), ""]

    if "status" in overview:
        lines += ["## Status", "", f"**Datasets:** {_md(_status_counts(overview))}", ""]
        lines += _md_table(("Dataset", "Status", "Checks"), _not_ok(overview)[1]) + [""]

    lines += ["## Riskiest datasets", ""]
    lines += _md_table(
        ("Dataset", "Downstream", "Owners", "Failed"),
        [(r["dataset"], r["downstream"], _flat(r["owners"]), r.get("failed") or "") for r in riskiest(overview)],
    )

    lines += ["", "## Changes this week", ""]
    lines += _md_table(
        ("Dataset", "Version", "Class", "Breaking", "Changes"),
        [
            (c["dataset"], _version_step(c), c["change_class"], c["breaking"], c["changes"])
            for c in overview["changes_this_week"]
        ],
    )

    cost = overview.get("cost")
    lines += [
        "",
        f"**Cost {_md(cost['month'])}:** {cost['total']:,.2f} {_md(cost['currency'])}" if cost else "**Cost:** n/a",
    ]
    return "\n".join(lines) + "\n"


def _version_step(change: dict[str, Any]) -> str:
    previous = change.get("previous_version")
    return f"{previous} → {change['version']}" if previous else f"new {change['version']}"


def to_csv_files(overview: dict[str, Any], folder: str | os.PathLike[str]) -> list[str]:
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, (columns, rows) in _tables(overview).items():
        path = target / f"{name}.csv"
        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = SafeWriter(handle)
            writer.writerow(columns)
            writer.writerows(rows)
        paths.append(str(path))
    return paths


def _cost_sheet(cost: dict[str, Any]) -> Table:
    rows = [("month", cost["month"], cost["total"])]
    rows += [("domain", name, total) for name, total in _ranked(cost["by_domain"])]
    rows += [("dataset", t["dataset"], t["total"]) for t in cost["top"]]
    return ("breakdown", "name", f"total ({cost['currency']})"), rows


def _fill_sheet(sheet: Any, table: Table) -> None:
    from openpyxl.styles import Font
    from openpyxl.utils import get_column_letter

    columns, rows = table
    sheet.append(columns)
    for row in rows:
        sheet.append([visible(v) if isinstance(v, str) else v for v in row])  # openpyxl refuses control characters
        for cell in sheet[sheet.max_row]:
            if cell.data_type == "f":  # a name starting with "=" is text, never a formula Excel would run
                cell.data_type = "s"
    for cell in sheet[1]:
        cell.font = Font(bold=True)
    sheet.freeze_panes = "A2"
    for index, column in enumerate(sheet.iter_cols(), start=1):
        longest = max(len(str(cell.value)) for cell in column if cell.value is not None)
        sheet.column_dimensions[get_column_letter(index)].width = min(max(longest + 2, 10), 60)


def to_xlsx(overview: dict[str, Any], path: str | os.PathLike[str]) -> None:
    with needs("excel", "the report's Excel workbook"):
        from openpyxl import Workbook
    workbook = Workbook()
    _fill_sheet(workbook.active, _summary(overview))
    workbook.active.title = "Summary"
    tables = _tables(overview)
    for title, section in SHEETS:
        _fill_sheet(workbook.create_sheet(title), tables[section])
    if "status" in tables:
        _fill_sheet(workbook.create_sheet("Status"), tables["status"])
    if overview.get("cost"):
        _fill_sheet(workbook.create_sheet("Cost"), _cost_sheet(overview["cost"]))
    workbook.save(path)


# --- HTML ------------------------------------------------------------------------------------------

# The page may load nothing from anywhere: the browser enforces it, not just our good intentions.
_CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'"

_CSS = """
:root { --ink: #1f2633; --muted: #6b7385; --line: #e3e6ee; --bg: #f6f7fb; --accent: #4f6bed; --bad: #d9484d; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--ink);
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1120px; margin: 0 auto; padding: 28px 24px 48px; }
h1 { margin: 0 0 4px; font-size: 26px; }
h2 { margin: 32px 0 12px; font-size: 18px; }
.meta, .none, figcaption { color: var(--muted); }
.none { font-style: italic; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(150px, 1fr)); gap: 12px; margin-top: 20px; }
.card, figure, table { background: #fff; border: 1px solid var(--line); border-radius: 8px; }
.card { padding: 12px 14px; }
.card .value { display: block; font-size: 22px; font-weight: 600; }
.card .label { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(340px, 1fr)); gap: 12px; }
figure { margin: 0; padding: 12px 14px; }
figcaption { margin-bottom: 6px; font-weight: 600; }
svg.chart { display: block; width: 100%; height: auto; }
svg.chart text { font-size: 12px; fill: var(--ink); }
svg.chart .bar { fill: var(--accent); }
svg.chart .bar.breaking { fill: var(--bad); }
table { width: 100%; border-collapse: separate; border-spacing: 0; overflow: hidden; margin-top: 12px; }
th, td { padding: 7px 10px; text-align: left; border-bottom: 1px solid var(--line); }
th { background: #eef0f6; font-weight: 600; }
tr:last-child td { border-bottom: 0; }
th.num, td.num { text-align: right; font-variant-numeric: tabular-nums; }
"""

# Draws every chart slot as an SVG bar chart from the embedded overview. DOM APIs only (textContent,
# setAttribute), so no string from the data is ever parsed as markup.
_JS = """
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("lumos-data").textContent);
  const SVG = "http://www.w3.org/2000/svg";
  const COVERAGE_ORDER = ["owners", "docs", "tags", "quality"];

  const byName = (a, b) => (a < b ? -1 : a > b ? 1 : 0);
  const thousands = (n) => String(Math.round(n)).replace(/\\B(?=(\\d{3})+(?!\\d))/g, ",");
  const ranked = (counts) =>
    Object.keys(counts || {})
      .map((k) => ({ label: k, value: counts[k] }))
      .sort((a, b) => b.value - a.value || byName(a.label, b.label));

  function coverage(fractions) {
    const others = Object.keys(fractions).filter((k) => !COVERAGE_ORDER.includes(k)).sort(byName);
    return COVERAGE_ORDER.filter((k) => k in fractions)
      .concat(others)
      .map((k) => ({ label: k, value: Math.round(fractions[k] * 1000) / 10 }));
  }

  function changes(rows) {
    if (!rows.length) return [];
    const breaking = rows.reduce((sum, r) => sum + r.breaking, 0);
    const all = rows.reduce((sum, r) => sum + r.changes, 0);
    return [{ label: "breaking", value: breaking, kind: "breaking" }, { label: "other", value: all - breaking }];
  }

  const currency = data.cost ? " " + data.cost.currency : "";
  const CHARTS = {
    "inventory-platform": { series: ranked(data.inventory.by_platform), format: thousands },
    "inventory-domain": { series: ranked(data.inventory.by_domain), format: thousands },
    "inventory-team": { series: ranked(data.inventory.by_team), format: thousands },
    "coverage": { series: coverage(data.coverage), format: (v) => v + "%", max: 100 },
    "changes": { series: changes(data.changes_this_week), format: thousands },
    "cost-domain": { series: data.cost ? ranked(data.cost.by_domain) : [], format: (v) => thousands(v) + currency },
  };

  function el(name, attrs, text) {
    const node = document.createElementNS(SVG, name);
    Object.keys(attrs).forEach((k) => node.setAttribute(k, String(attrs[k])));
    if (text !== undefined) node.textContent = text;
    return node;
  }

  const short = (label) => (label.length > 18 ? label.slice(0, 17) + "\\u2026" : label);

  function draw(slot, name, chart) {
    if (!chart.series.length) {
      const none = document.createElement("p");
      none.className = "none";
      none.textContent = "none";
      slot.replaceChildren(none);
      return;
    }
    const bars = 156, values = 84, row = 24, bar = 16;
    const max = chart.max || Math.max(0, ...chart.series.map((d) => d.value)) || 1;
    const height = chart.series.length * row + 6;
    const svg = el("svg", { class: "chart", "data-chart": name, role: "img" });
    slot.replaceChildren(svg);  // in the page first: a label's width is measured, not guessed
    const names = chart.series.map((d, i) =>
      svg.appendChild(el("text", { y: 3 + i * row + bar / 2, "text-anchor": "end", "dominant-baseline": "middle" },
                         short(d.label))));
    // the label column as wide as its widest label (a fixed one cut "alice@example.com" to "lice@…")
    const labels = Math.ceil(Math.max(60, ...names.map((t) => t.getComputedTextLength()))) + 8;
    const width = labels + bars + values;
    svg.setAttribute("viewBox", "0 0 " + width + " " + height);
    chart.series.forEach((d, i) => {
      const y = 3 + i * row, middle = y + bar / 2;
      names[i].setAttribute("x", labels - 8);
      names[i].setAttribute("data-left", Math.floor(names[i].getBBox().x));  // where it starts: never cut
      const length = (Math.max(0, d.value) / max) * bars;
      const rect = el("rect", { class: d.kind ? "bar " + d.kind : "bar", x: labels, y: y, width: length,
                                height: bar, rx: 3, "data-label": d.label, "data-value": d.value });
      const value = chart.format(d.value);
      rect.append(el("title", {}, d.label + ": " + value));
      names[i].after(rect, el("text", { x: labels + length + 6, y: middle, "dominant-baseline": "middle" }, value));
    });
  }

  document.querySelectorAll(".chart-slot").forEach((slot) => {
    const name = slot.getAttribute("data-slot");
    draw(slot, name, CHARTS[name]);
  });
})();
"""


def _h(value: Any) -> str:
    return html.escape("" if value is None else visible(str(value)))


def _script_json(overview: dict[str, Any]) -> str:
    """JSON escapes for <, > and &: the data can neither close the <script> element nor open a comment in it."""
    return to_json(overview).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _html_table(table: Table) -> str:
    columns, rows = table
    if not rows:
        return '<p class="none">none</p>'
    # numbers line up on the right, their header too
    numeric = [all(isinstance(row[i], (int, float)) for row in rows) for i in range(len(columns))]
    cls = [' class="num"' if n else "" for n in numeric]
    head = "".join(f"<th{cls[i]}>{_h(_label(c))}</th>" for i, c in enumerate(columns))
    body = "".join(
        "<tr>" + "".join(f"<td{cls[i]}>{_h(_text(v))}</td>" for i, v in enumerate(row)) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _text(value: Any) -> str:
    if value is None:
        return ""
    return _figure(value) if isinstance(value, (int, float)) else str(value)


def _chart(name: str, caption: str) -> str:
    return f'<figure><figcaption>{_h(caption)}</figcaption><div class="chart-slot" data-slot="{name}"></div></figure>'


def _cards(overview: dict[str, Any]) -> str:
    cards = "".join(
        f'<div class="card"><span class="value">{_h(_figure(v))}</span><span class="label">{_h(_label(k))}</span></div>'
        for k, v in _ordered(overview["totals"], TOTALS_ORDER)
    )
    return f'<section class="cards">{cards}</section>'


def _cost_section(overview: dict[str, Any], tables: dict[str, Table]) -> str:
    cost = overview.get("cost")
    if not cost:
        return '<h2>Cost</h2><p class="none">none</p>'
    total = f"{cost['total']:,.2f} {cost['currency']}"
    return (
        f"<h2>Cost — {_h(cost['month'])}</h2>"
        f'<p class="meta">Total {_h(total)}</p>'
        f'<div class="charts">{_chart("cost-domain", "By domain")}</div>'
        f"<h3>Most expensive datasets</h3>{_html_table(tables['cost_top'])}"
    )


def _status_section(overview: dict[str, Any]) -> str:
    if "status" not in overview:
        return ""
    return f'<h2>Status</h2><p class="meta">{_h(_status_counts(overview))}</p>{_html_table(_not_ok(overview))}'


def to_html(overview: dict[str, Any]) -> str:
    tables = _tables(overview)
    # the charts are empty slots here: the inline script draws them from the embedded JSON
    inventory = "".join(_chart(f"inventory-{dim}", f"By {dim}") for dim, _ in INVENTORY_DIMENSIONS)
    body = [
        f"<header><h1>{_h(overview['title'])}</h1>",
        f'<p class="meta">Generated {_h(overview["generated_at"])}</p></header>',
        _cards(overview),
        _status_section(overview),
        f'<h2>Inventory</h2><div class="charts">{inventory}</div>',
        f'<h2>Coverage</h2><div class="charts">{_chart("coverage", "Share of datasets (%)")}</div>',
        f'<h2>Changes this week</h2><div class="charts">{_chart("changes", "Schema changes")}</div>',
        _html_table(tables["changes_this_week"]),
        _cost_section(overview, tables),
        f"<h2>Riskiest datasets</h2>{_html_table(tables['risky'])}",
        f"<h2>Stale datasets</h2>{_html_table(tables['stale'])}",
        f"<h2>Unowned datasets</h2>{_html_table(tables['unowned'])}",
    ]
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{_h(overview['title'])}</title>",
            f"<style>{_CSS}</style></head>",
            "<body><main>",
            *body,
            "</main>",
            f'<script type="application/json" id="lumos-data">{_script_json(overview)}</script>',
            f"<script>{_JS}</script>",
            "</body></html>",
        ]
    )
