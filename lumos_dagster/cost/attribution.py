"""What each dataset costs, what it inherits from upstream, and what switching datasets
off would save. Pure functions over the lineage graph.

Every dataset has a direct monthly cost (storage + compute). Its *total* is its direct
cost plus what it inherits: each dataset that has consumers passes its whole total on to
them, split by the attribution method, so the cost of the estate ends up in the datasets
nobody consumes (the products). Cost is conserved — summed over those leaves, totals
equal the sum of every direct cost — with no double counting through diamonds or shared
upstreams (tests/test_cost.py checks it on random DAGs).

Methods:
* `equal_split` — an upstream's total is divided equally among its consumers;
* `lineage_weighted` — in proportion to declared weights (the share each consumer reads),
  else to the consumers' bytes, a stand-in for bytes read;
* `last_touch` — all of it goes to the consumer that touched it last (the most recently
  modified; ties by name).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from lumos_dagster.floor.errors import UnknownDataset
from lumos_dagster.floor.model import DirectCost, RolledUpCost
from lumos_dagster.floor.wording import plural

METHODS = ("equal_split", "lineage_weighted", "last_touch")
GIB = 2**30  # cloud prices "per GB-month" are per GiB-month

#: list prices per GB-month, USD; the source and date are in docs/cost.md
DEFAULT_STORAGE_PRICES = {
    "s3:standard": 0.023,  # AWS S3 Standard, first 50 TB, us-east-1 (aws.amazon.com/s3/pricing, 2026-11)
    "gcs:standard": 0.020,  # Google Cloud Storage Standard, us multi-region ≈ (cloud.google.com/storage/pricing)
    "azure:hot": 0.018,  # Azure Blob Hot, LRS, first 50 TB ≈ (azure.microsoft.com/pricing/details/storage/blobs)
}


@dataclass(frozen=True)
class Node(DirectCost):
    """A dataset in the cost graph."""

    name: str
    storage: float = 0.0  # direct monthly cost of storing it
    compute: float = 0.0  # direct monthly cost of producing it
    upstream: tuple[str, ...] = ()
    bytes: int = 0
    last_modified: float = 0.0  # epoch seconds, for last_touch
    weights: Mapping[str, float] | None = None  # upstream name → declared share this dataset reads


@dataclass(frozen=True)
class Rollup(RolledUpCost):
    storage: float
    compute: float
    inherited: float


def storage_cost(total_bytes: int, price_per_gb_month: float) -> float:
    return total_bytes / GIB * price_per_gb_month


def _order(nodes: Mapping[str, Node]) -> list[str]:
    """Upstreams first (Kahn's algorithm; the lineage is acyclic, checked when it is declared)."""
    indegree = {n: 0 for n in nodes}
    children: dict[str, list[str]] = defaultdict(list)
    for node in nodes.values():
        for u in node.upstream:
            if u in nodes:
                indegree[node.name] += 1
                children[u].append(node.name)
    ready = [n for n, d in indegree.items() if d == 0]
    order = []
    while ready:
        n = ready.pop()
        order.append(n)
        for c in children[n]:
            indegree[c] -= 1
            if indegree[c] == 0:
                ready.append(c)
    if len(order) != len(nodes):
        raise ValueError("the lineage has a cycle: cost cannot flow through it")
    return order


def consumers(nodes: Mapping[str, Node]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {n: [] for n in nodes}
    for node in nodes.values():
        for u in node.upstream:
            if u in out:
                out[u].append(node.name)
    return out


def shares(upstream: str, consumer_names: Sequence[str], nodes: Mapping[str, Node], method: str) -> dict[str, float]:
    """How an upstream's total splits among its consumers (fractions summing to 1)."""
    if not consumer_names:
        return {}
    if method == "equal_split":
        return {c: 1 / len(consumer_names) for c in consumer_names}
    if method == "last_touch":
        last = max(consumer_names, key=lambda c: (nodes[c].last_modified, c))
        return {c: 1.0 if c == last else 0.0 for c in consumer_names}
    if method == "lineage_weighted":
        declared = {c: (nodes[c].weights or {}).get(upstream) for c in consumer_names}
        weights = {c: w for c, w in declared.items() if w is not None}
        if len(weights) == len(declared) and sum(weights.values()) > 0:
            raw = weights
        else:  # no (complete) declaration: each consumer's bytes stand for what it reads
            raw = {c: float(nodes[c].bytes) for c in consumer_names}
        total = sum(raw.values())
        if total <= 0:
            return {c: 1 / len(consumer_names) for c in consumer_names}
        return {c: w / total for c, w in raw.items()}
    raise ValueError(f"unknown attribution method {method!r} (one of {', '.join(METHODS)})")


def attribute(
    nodes: Mapping[str, Node], method: str = "lineage_weighted", known: Mapping[str, Rollup] | None = None
) -> dict[str, Rollup]:
    """Every dataset's direct and inherited monthly cost. `known` rollups are taken as they are
    (datasets priced earlier, e.g. stored), and passed on to their consumers."""
    known = known or {}
    children = consumers(nodes)
    inherited: dict[str, float] = defaultdict(float)
    out: dict[str, Rollup] = {}
    for name in _order(nodes):
        rollup = known.get(name) or Rollup(nodes[name].storage, nodes[name].compute, inherited[name])
        out[name] = rollup
        for c, share in shares(name, children[name], nodes, method).items():
            inherited[c] += rollup.total * share
    return out


def contributions(nodes: Mapping[str, Node], target: str, method: str = "lineage_weighted") -> dict[str, float]:
    """Where a dataset's total comes from: each dataset's direct cost that flows into it."""
    children = consumers(nodes)
    reach: dict[str, float] = {target: 1.0}  # fraction of a dataset's total that ends up in target
    for name in reversed(_order(nodes)):
        if name != target:
            split = shares(name, children[name], nodes, method)
            reach[name] = sum(reach.get(c, 0.0) * s for c, s in split.items())
    return {n: reach[n] * nodes[n].direct for n in nodes if reach.get(n, 0.0) > 0 and nodes[n].direct}


# ----------------------------------------------------------------- savings


@dataclass(frozen=True)
class Savings:
    requested: tuple[str, ...]
    removed: tuple[str, ...]  # the requested datasets, everything downstream, and upstreams left unused
    storage: float  # monthly
    compute: float  # monthly
    risk: str  # low | medium | high
    reasons: tuple[str, ...]

    @property
    def monthly(self) -> float:
        return self.storage + self.compute

    @property
    def annual(self) -> float:
        return self.monthly * 12


def switch_off(nodes: Mapping[str, Node], requested: Iterable[str], owners: Mapping[str, Sequence[str]]) -> Savings:
    """Removing `requested` removes everything downstream of them, then every upstream all of
    whose consumers are removed, to a fixed point. A shared upstream someone else still
    reads is kept, and not counted as saved."""
    requested = tuple(requested)
    unknown = [n for n in requested if n not in nodes]
    if unknown:
        raise UnknownDataset(unknown, nodes)
    children = consumers(nodes)
    removed = set(requested)
    stack = list(requested)
    while stack:  # downstream closure
        for c in children[stack.pop()]:
            if c not in removed:
                removed.add(c)
                stack.append(c)
    changed = True
    while changed:  # upstreams nobody reads any more
        changed = False
        for n in list(removed):
            for u in nodes[n].upstream:
                if u in nodes and u not in removed and all(c in removed for c in children[u]):
                    removed.add(u)
                    changed = True
    downstream_only = removed - set(requested)
    teams = {o for n in removed for o in owners.get(n, ())}
    reasons = []
    if len(removed) >= 10:
        reasons.append(f"{plural(len(removed), 'dataset goes', 'datasets go')}")
    if len(teams) >= 3:
        reasons.append(f"{len(teams)} owners are affected")
    if any(not owners.get(n) for n in removed):
        reasons.append("some datasets have no owner to ask")
    if downstream_only:
        reasons.append(f"{plural(len(downstream_only), 'dataset')} beyond those asked for go too")
    risk = "high" if len(removed) >= 10 or len(teams) >= 3 else ("medium" if downstream_only else "low")
    order = [n for n in _order(nodes) if n in removed]
    return Savings(
        requested=requested,
        removed=tuple(order),
        storage=sum(nodes[n].storage for n in removed),
        compute=sum(nodes[n].compute for n in removed),
        risk=risk,
        reasons=tuple(reasons),
    )
