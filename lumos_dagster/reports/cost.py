"""The cost report: by dataset, owner, domain and platform; month over month; the datasets
nobody consumes, with what they cost; and what switching each of them off would save.

Group sums add *direct* costs, so nothing is counted twice; a dataset's total (direct +
inherited) is what the products — the datasets without consumers — carry.
"""

from __future__ import annotations

import io
import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

from lumos_dagster.cost.attribution import Node, Savings, switch_off
from lumos_dagster.floor.dataset_specs import Catalogue
from lumos_dagster.floor.model import Cost, RolledUpCost, Snapshot
from lumos_dagster.floor.wording import visible
from lumos_dagster.reports.csvsafe import SafeWriter
from lumos_dagster.store.roles import HistoryStore

#: a month as the report takes it: YYYY-MM, a month that exists (2026-13 is none)
MONTH = r"^\d{4}-(0[1-9]|1[0-2])$"


@dataclass(frozen=True)
class Row(RolledUpCost):
    dataset: str
    owners: tuple[str, ...]
    domain: str
    platform: str
    storage: float
    compute: float
    inherited: float
    consumers: int
    basis: str


@dataclass
class CostReport:
    month: str
    currency: str
    rows: list[Row]
    trend: dict[str, float] = field(default_factory=dict)  # month → direct cost of every dataset
    # switching off each of the costliest unconsumed datasets (`lumos savings` for one dataset)
    savings: list[tuple[Savings, tuple[str, ...]]] = field(default_factory=list)  # (savings, owners to ask)

    def _group(self, key: Callable[[Row], Sequence[str]]) -> dict[str, float]:
        out: dict[str, float] = defaultdict(float)
        for r in self.rows:
            names = key(r) or ("(none)",)
            for name in names:  # shared ownership: an equal share each, so the groups still add up
                out[name] += r.direct / len(names)
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    @property
    def by_owner(self) -> dict[str, float]:
        return self._group(lambda r: r.owners)

    @property
    def by_domain(self) -> dict[str, float]:
        return self._group(lambda r: (r.domain,))

    @property
    def by_platform(self) -> dict[str, float]:
        return self._group(lambda r: (r.platform,))

    @property
    def unconsumed(self) -> list[Row]:
        """Datasets nobody reads, costliest first: the optimization hints."""
        return sorted((r for r in self.rows if r.consumers == 0), key=lambda r: -r.total)

    @property
    def direct(self) -> float:
        return sum((r.direct for r in self.rows), 0.0)  # a float when no row has a cost too

    @property
    def unpriced(self) -> list[str]:
        """Platforms whose datasets' storage has no price: a local disk costs 0.00 until
        `cost.platform_storage_class` names its class."""
        priced = {r.platform for r in self.rows if r.storage}
        return sorted({r.platform for r in self.rows} - priced)

    @property
    def unpriced_hint(self) -> str | None:
        if not self.unpriced:
            return None
        first = self.unpriced[0]
        return (f"storage of {', '.join(self.unpriced)} datasets has no price: set cost.platform_storage_class "
                f"(e.g. `{first}: s3:standard`) to price it")  # fmt: skip


def _owners(snapshot: Snapshot) -> tuple[str, ...]:
    return tuple(o.id for o in snapshot.owners)


def build(store: HistoryStore, catalogue: Catalogue, month: str | None = None) -> CostReport:
    """The latest priced snapshot of each dataset in `month` (default: the newest month priced)."""
    consumers = catalogue.consumers()
    per_month: dict[str, dict[str, tuple[Snapshot, Cost]]] = defaultdict(dict)
    for d in catalogue.datasets:
        for s in store.history(d.ref.urn):  # oldest first: the latest capture of a month wins
            if s.cost is not None and not s.removed:
                per_month[s.cost.period][d.name] = s, s.cost
    month = month or max(per_month, default="")
    latest = per_month.get(month, {})
    rows = [
        Row(
            name,
            _owners(s),
            s.domain or "(none)",
            s.dataset.platform,
            cost.storage,
            cost.compute,
            cost.inherited,
            len(consumers.get(name, ())),
            cost.basis,
        )  # fmt: skip
        for name, (s, cost) in sorted(latest.items())
    ]
    trend = {m: sum(cost.direct for _, cost in snaps.values()) for m, snaps in sorted(per_month.items())}
    currency = next((cost.currency for _, cost in latest.values()), "USD")
    report = CostReport(month, currency, rows, trend)
    report.savings = [
        (found, affected_owners(catalogue, found))
        for r in report.unconsumed[:SAVINGS_LISTED]
        if (found := savings(report, catalogue, [r.dataset])).monthly > 0
    ]
    return report


SAVINGS_LISTED = 20  # the costliest unconsumed datasets the report prices switching off


def savings(report: CostReport, catalogue: Catalogue, datasets: list[str]) -> Savings:
    """What switching `datasets` off saves, from the report's direct costs."""
    priced = {r.dataset: r for r in report.rows}
    nodes = {
        d.name: Node(d.name, storage=priced[d.name].storage if d.name in priced else 0.0,
                     compute=priced[d.name].compute if d.name in priced else 0.0, upstream=d.upstream)
        for d in catalogue.datasets
    }  # fmt: skip
    owners = {d.name: [o.id for o in d.enrichment.owners] for d in catalogue.datasets}
    return switch_off(nodes, datasets, owners)


def affected_owners(catalogue: Catalogue, result: Savings) -> tuple[str, ...]:
    """Who to ask before switching off: the owners of every dataset that would go."""
    return tuple(sorted({o.id for d in catalogue.datasets if d.name in result.removed for o in d.enrichment.owners}))


def savings_to_json(result: Savings, owners: tuple[str, ...]) -> dict:
    return {
        "requested": list(result.requested),
        "removed": list(result.removed),
        "owners": list(owners),
        "monthly": {"storage": round(result.storage, 2), "compute": round(result.compute, 2),
                    "total": round(result.monthly, 2)},
        "annual": {"storage": round(result.storage * 12, 2), "compute": round(result.compute * 12, 2),
                   "total": round(result.annual, 2)},
        "risk": result.risk,
        "reasons": list(result.reasons),
    }  # fmt: skip


# ------------------------------------------------------------------ output


def _money(value: float, currency: str) -> str:
    return f"{value:,.2f} {currency}"


def to_json(report: CostReport) -> dict:
    return {
        "month": report.month,
        "currency": report.currency,
        "direct_total": round(report.direct, 2),
        "datasets": [{**asdict(r), "direct": round(r.direct, 2), "total": round(r.total, 2)} for r in report.rows],
        "by_owner": {k: round(v, 2) for k, v in report.by_owner.items()},
        "by_domain": {k: round(v, 2) for k, v in report.by_domain.items()},
        "by_platform": {k: round(v, 2) for k, v in report.by_platform.items()},
        "trend": {k: round(v, 2) for k, v in report.trend.items()},
        "unconsumed": [
            {"dataset": r.dataset, "total": round(r.total, 2), "owners": list(r.owners)} for r in report.unconsumed
        ],  # fmt: skip
        "savings": [savings_to_json(found, owners) for found, owners in report.savings],
        "unpriced_platforms": report.unpriced,
    }


def to_csv(report: CostReport) -> str:
    out = io.StringIO()
    writer = SafeWriter(out)
    writer.writerow(["month", "dataset", "owners", "domain", "platform", "storage", "compute", "direct", "inherited",
                     "total", "consumers", "basis"])  # fmt: skip
    for r in report.rows:
        writer.writerow([report.month, r.dataset, ";".join(r.owners), r.domain, r.platform, f"{r.storage:.2f}",
                         f"{r.compute:.2f}", f"{r.direct:.2f}", f"{r.inherited:.2f}", f"{r.total:.2f}", r.consumers,
                         r.basis])  # fmt: skip
    return out.getvalue()


def to_markdown(report: CostReport) -> str:
    c = report.currency
    lines = [f"### Cost, {report.month or 'no priced month yet'}", "",
             f"Direct cost of {len(report.rows)} datasets: **{_money(report.direct, c)}** a month.", "",
             *([f"_{report.unpriced_hint}._", ""] if report.unpriced_hint else []),
             "| dataset | direct | inherited | total | consumers |", "|---|---:|---:|---:|---:|"]  # fmt: skip
    for r in sorted(report.rows, key=lambda r: -r.total):
        lines.append(f"| `{r.dataset}` | {r.direct:,.2f} | {r.inherited:,.2f} | {r.total:,.2f} | {r.consumers} |")
    for title, groups in (("owner", report.by_owner), ("domain", report.by_domain), ("platform", report.by_platform)):
        lines += ["", f"| {title} | direct |", "|---|---:|"] + [f"| {k} | {v:,.2f} |" for k, v in groups.items()]
    lines += ["", "| month | direct |", "|---|---:|"] + [f"| {m} | {v:,.2f} |" for m, v in report.trend.items()]
    if report.unconsumed:
        lines += ["", "Nobody consumes these; each carries what it was built from:", ""]
        lines += [f"* `{r.dataset}`: {_money(r.total, c)}" for r in report.unconsumed]
    if report.savings:
        lines += ["", "Switching one off (`lumos savings --datasets …` for any set):", "",
                  "| switch off | a month | a year | storage | compute | datasets that go | risk | ask |",
                  "|---|---:|---:|---:|---:|---:|---|---|"]  # fmt: skip
        for found, owners in report.savings:
            lines.append(f"| `{found.requested[0]}` | {found.monthly:,.2f} | {found.annual:,.2f} | "
                         f"{found.storage:,.2f} | {found.compute:,.2f} | {len(found.removed)} | {found.risk} | "
                         f"{', '.join(owners) or 'no owner'} |")  # fmt: skip
    return "\n".join(map(visible, lines))  # a line each: a name's newline must not start one


def to_text(report: CostReport) -> str:
    lines = [f"{report.month}: direct cost {_money(report.direct, report.currency)} a month"]
    if report.unpriced_hint:
        lines.append(f"note: {report.unpriced_hint}")
    lines.append(f"{'dataset':<40} {'direct':>12} {'inherited':>12} {'total':>12}")
    for r in sorted(report.rows, key=lambda r: -r.total):
        lines.append(f"{r.dataset:<40} {r.direct:>12,.2f} {r.inherited:>12,.2f} {r.total:>12,.2f}")
    for title, groups in (("owner", report.by_owner), ("domain", report.by_domain), ("platform", report.by_platform)):
        lines.append(f"by {title}: " + ", ".join(f"{k} {v:,.2f}" for k, v in groups.items()))
    lines.append("trend: " + ", ".join(f"{m} {v:,.2f}" for m, v in report.trend.items()))
    for r in report.unconsumed:
        lines.append(f"no consumer: {r.dataset} {r.total:,.2f}")
    for found, _ in report.savings:
        lines.append(f"switching off {found.requested[0]} saves {found.monthly:,.2f} a month, "
                     f"{found.annual:,.2f} a year ({len(found.removed)} datasets go, risk {found.risk})")  # fmt: skip
    return "\n".join(map(visible, lines))  # a line each: a name's newline must not start one


RENDER = {"text": to_text, "markdown": to_markdown, "csv": to_csv, "json": lambda r: json.dumps(to_json(r), indent=2)}
