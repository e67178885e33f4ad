"""Who is affected downstream: the lineage closure of a dataset, and fan-out rankings."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from lumos_dagster.floor.dataset_specs import Catalogue
from lumos_dagster.floor.model import Owner


@dataclass(frozen=True)
class Affected:
    name: str
    depth: int  # 1 = a direct consumer
    via: str  # the upstream it is reached through
    owners: tuple[Owner, ...]


def downstream(catalogue: Catalogue, name: str, max_depth: int | None = None) -> list[Affected]:
    """Breadth first, so each dataset appears once at its smallest depth."""
    children = catalogue.consumers()  # built once per catalogue: alerts ask once per breaking dataset
    specs = catalogue.by_name()
    seen, out = {name}, []
    queue = deque([(name, 0)])
    while queue:
        current, depth = queue.popleft()
        if max_depth is not None and depth >= max_depth:
            continue
        for child in children.get(current, ()):
            if child not in seen:
                seen.add(child)
                out.append(Affected(child, depth + 1, current, specs[child].enrichment.owners))
                queue.append((child, depth + 1))
    return out


def fan_out(catalogue: Catalogue) -> list[tuple[str, int]]:
    """Datasets ranked by how many datasets sit downstream of them (riskiest first)."""
    children = catalogue.consumers()
    memo: dict[str, frozenset[str]] = {}
    for d in reversed(catalogue.datasets):  # lineage order reversed: children are done first
        below: set[str] = set()
        for c in children.get(d.name, ()):
            below |= {c} | memo[c]
        memo[d.name] = frozenset(below)
    return sorted(((n, len(s)) for n, s in memo.items()), key=lambda x: (-x[1], x[0]))
