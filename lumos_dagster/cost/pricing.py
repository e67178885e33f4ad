"""Pricing snapshots: direct cost from bytes and declared compute (or the bills), and the
inherited cost from the upstreams' own rollups — a downstream partition's cost reads its
upstreams' costs of the same partition, from this run or from the store."""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Mapping, Sequence

from lumos_dagster.config import LumosConfig
from lumos_dagster.cost.attribution import DEFAULT_STORAGE_PRICES, Node, consumers, shares, storage_cost
from lumos_dagster.cost.billing import Allocation, Charge, allocate, read_focus
from lumos_dagster.model import Cost, Snapshot
from lumos_dagster.scan.catalogue import Catalogue, DatasetSpec

#: (dataset name, partition key or None for its newest) → its stored snapshot (cost, last modification)
SnapshotLookup = Callable[[str, "str | None"], "Snapshot | None"]
#: (dataset name) → hours its producing Dagster asset ran this month, when declared
HoursLookup = Callable[[str], "float | None"]


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


def cost_graph(config: LumosConfig, catalogue: Catalogue, sizes: Mapping[str, int],
               modified: Mapping[str, float]) -> dict[str, Node]:  # fmt: skip
    """The lineage as cost nodes (the weights and sizes attribution needs)."""
    out = {}
    for d in catalogue.datasets:
        decl = config.declaration(d.name)
        out[d.name] = Node(
            d.name,
            upstream=d.upstream,
            bytes=sizes.get(d.name, d.total_bytes),
            last_modified=modified.get(d.name, 0.0),
            weights=dict(decl.cost.weights) if decl and decl.cost and decl.cost.weights else None,
        )
    return out


def price_run(
    config: LumosConfig,
    catalogue: Catalogue,
    selected: Sequence[DatasetSpec],
    snapshots: Mapping[str, Mapping[str | None, Snapshot]],
    sizes: Mapping[str, int],
    stored: SnapshotLookup,
    bills: Callable[[str], Allocation | None],
    hours: HoursLookup,
) -> dict[str, dict[str | None, Snapshot]]:
    """The run's snapshots with their cost; `selected` in lineage order, `sizes` the datasets'
    whole bytes (all partitions: what is stored and paid for)."""
    method = config.cost.method
    modified = {
        n: max((s.stats.last_modified.timestamp() for s in snaps.values() if s.stats.last_modified), default=0.0)
        for n, snaps in snapshots.items()
    }
    if method == "last_touch":  # the consumers outside this run compete for their upstreams too
        for d in catalogue.datasets:
            if d.name not in modified and (last := stored(d.name, None)) and last.stats.last_modified:
                modified[d.name] = last.stats.last_modified.timestamp()
    graph = cost_graph(config, catalogue, sizes, modified)
    children = consumers(graph)
    priced: dict[str, dict[str | None, Snapshot]] = {}
    for spec in selected:
        out = {}
        for pk, snap in snapshots[spec.name].items():
            month = month_of(pk, snap.captured_at.strftime("%Y-%m"))
            allocation = bills(month)
            storage = storage_cost(sizes.get(spec.name, spec.total_bytes), storage_price(config, spec))
            compute = compute_cost(config, spec.name, hours)
            billed_storage = allocation.billed(spec.name, "storage") if allocation else None
            billed_compute = allocation.billed(spec.name, "compute") if allocation else None
            billed = billed_storage is not None or billed_compute is not None
            listed = (billed_storage is None and storage > 0) or (billed_compute is None and compute > 0)
            basis = "mixed" if billed and listed else ("bill" if billed else "list")
            inherited = 0.0
            for upstream in spec.upstream:
                cost = priced[upstream][pk].cost if upstream in priced and pk in priced[upstream] else None
                cost = cost or ((found := stored(upstream, pk)) and found.cost)
                if cost is not None:
                    inherited += cost.total * shares(upstream, children[upstream], graph, method).get(spec.name, 0.0)
            out[pk] = replace(
                snap,
                cost=Cost(
                    period=month,
                    storage=billed_storage if billed_storage is not None else storage,
                    compute=billed_compute if billed_compute is not None else compute,
                    inherited=inherited,
                    method=method,
                    basis=basis,
                    currency=config.cost.currency,
                ),
            )
        priced[spec.name] = out
    return priced
