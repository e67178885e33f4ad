"""Pricing a run's snapshots (the `price` step): direct cost from bytes and declared compute (or the
bills), inherited cost from the upstreams' rollups through `attribution.attribute` — a downstream
partition inherits its upstreams' totals of the same partition, from this run or from the store."""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Mapping, Sequence

from lumos_dagster.cost.attribution import DEFAULT_STORAGE_PRICES, Node, Rollup, attribute, storage_cost
from lumos_dagster.cost.billing import Allocation, Charge, allocate, read_focus
from lumos_dagster.floor.config import LumosConfig
from lumos_dagster.floor.dataset_specs import Catalogue, DatasetSpec
from lumos_dagster.floor.model import Cost, Snapshot, Snapshots

#: (dataset name) → hours its producing Dagster asset ran this month, when declared
HoursLookup = Callable[[str], "float | None"]
#: (dataset name, partition key or None for its newest) → its stored snapshot
StoredLookup = Callable[[str, "str | None"], "Snapshot | None"]
#: a month (YYYY-MM) → the FOCUS bills' allocation for it
BillsLookup = Callable[[str], "Allocation | None"]


class Bills:
    """The FOCUS exports of lumos.yaml, read once, allocated per month on demand."""

    def __init__(self, config: LumosConfig, catalogue: Catalogue):
        self.config, self.catalogue = config, catalogue
        self._charges: list[Charge] | None = None
        self._months: dict[str, Allocation] = {}

    def month(self, month: str) -> Allocation | None:
        if not self.config.cost.billing:
            return None
        if self._charges is None:
            self._charges = [c for path in self.config.cost.billing for c in read_focus(self.config.resolve(path))]
        if month not in self._months:
            sizes = {d.name: d.total_bytes for d in self.catalogue.datasets}
            self._months[month] = allocate(self._charges, self.config.cost.billing_rules, sizes, month)
        return self._months[month]


def month_of(partition_key: str | None, fallback: str) -> str:
    return partition_key[:7] if partition_key else fallback


def storage_price(config: LumosConfig, spec: DatasetSpec) -> float:
    decl = config.declaration(spec.name)
    cls = decl.cost.storage_class if decl and decl.cost and decl.cost.storage_class else None
    cls = cls or config.cost.platform_storage_class.get(spec.platform)
    prices = {**DEFAULT_STORAGE_PRICES, **config.cost.storage_prices}
    return prices.get(cls, 0.0) if cls else 0.0  # a local disk costs nothing unless priced


def compute_cost(config: LumosConfig, name: str, hours: HoursLookup) -> float:
    decl = config.declaration(name)
    compute = decl.cost.compute if decl and decl.cost else None
    if compute is None:
        return 0.0
    rate = config.cost.compute_rates.get(compute.unit, 0.0)
    if compute.per_month is not None:
        quantity = compute.per_month
    elif compute.per_run is not None and compute.runs_per_month is not None:
        quantity = compute.per_run * compute.runs_per_month
    elif compute.dagster_asset:
        quantity = (hours(name) or 0.0) * compute.cores
    else:
        quantity = 0.0
    return quantity * rate


def cost_node(config: LumosConfig, spec: DatasetSpec, size: int, modified: float, direct: tuple[float, float] = (0, 0)):
    """A dataset as a node of the cost graph: its (storage, compute) and what attribution weighs."""
    decl = config.declaration(spec.name)
    return Node(
        spec.name,
        storage=direct[0],
        compute=direct[1],
        upstream=spec.upstream,
        bytes=size,
        last_modified=modified,
        weights=dict(decl.cost.weights) if decl and decl.cost and decl.cost.weights else None,
    )


def _neighbourhood(catalogue: Catalogue, datasets: Sequence[DatasetSpec]) -> list[str]:
    """What pricing the run's datasets needs: them, their upstreams and every consumer of either
    (an upstream's share depends on all its consumers) — not the whole estate."""
    specs, children = catalogue.by_name(), catalogue.consumers()
    near = {d.name for d in datasets} | {u for d in datasets for u in d.upstream if u in specs}
    return sorted(near | {c for n in near for c in children.get(n, ())})


def price(config: LumosConfig, catalogue: Catalogue, datasets: Sequence[DatasetSpec], snapshots: Snapshots,
          sizes: Mapping[str, int], stored: StoredLookup, hours: HoursLookup = lambda name: None,
          bills: BillsLookup | None = None) -> Snapshots:  # fmt: skip
    """`snapshots` (every partition of `datasets`) with their costs: direct from `sizes` (bytes of each
    dataset now), declared compute or `bills`; inherited from the upstreams, in this run or `stored`."""
    specs = catalogue.by_name()
    names = _neighbourhood(catalogue, datasets)
    modified = {
        n: max((s.stats.last_modified.timestamp() for s in snaps.values() if s.stats.last_modified), default=0.0)
        for n, snaps in snapshots.items()
    }
    if config.cost.method == "last_touch":  # the consumers outside this run compete for their upstreams too
        for n in names:
            if n not in modified and (last := stored(n, None)) and last.stats.last_modified:
                modified[n] = last.stats.last_modified.timestamp()
    selected = {d.name for d in datasets}
    outside = {u for d in datasets for u in d.upstream if u not in selected and u in specs}
    keys = sorted({pk for d in datasets for pk in snapshots[d.name]}, key=lambda k: k or "")
    out: Snapshots = {d.name: {} for d in datasets}
    for pk in keys:
        basis: dict[str, tuple[float, float, str, str]] = {}  # name → (storage, compute, basis, month)
        for d in datasets:
            snap = snapshots[d.name][pk]
            month = month_of(pk, snap.captured_at.strftime("%Y-%m"))
            allocation = bills(month) if bills else None
            storage = storage_cost(sizes.get(d.name, d.total_bytes), storage_price(config, d))
            compute = compute_cost(config, d.name, hours)
            billed_storage = allocation.billed(d.name, "storage") if allocation else None
            billed_compute = allocation.billed(d.name, "compute") if allocation else None
            billed = billed_storage is not None or billed_compute is not None
            listed = (billed_storage is None and storage > 0) or (billed_compute is None and compute > 0)
            basis[d.name] = (
                billed_storage if billed_storage is not None else storage,
                billed_compute if billed_compute is not None else compute,
                "mixed" if billed and listed else ("bill" if billed else "list"),
                month,
            )
        nodes = {
            n: cost_node(config, specs[n], sizes.get(n, specs[n].total_bytes), modified.get(n, 0.0),
                         basis[n][:2] if n in basis else (0, 0))
            for n in names
        }  # fmt: skip
        known = {}
        for n in outside:  # upstreams outside the run pass on their stored totals
            found = stored(n, pk)
            c = found.cost if found else None
            known[n] = Rollup(c.storage, c.compute, c.inherited) if c else Rollup(0, 0, 0)
        rollups = attribute(nodes, config.cost.method, known)
        for d in datasets:
            storage, compute, how, month = basis[d.name]
            cost = Cost(month, storage, compute, rollups[d.name].inherited, config.cost.method, how,
                        config.cost.currency)  # fmt: skip
            out[d.name][pk] = replace(snapshots[d.name][pk], cost=cost)
    return out
