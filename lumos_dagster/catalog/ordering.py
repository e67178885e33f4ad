"""The order datasets are written to a catalog in: upstreams before the datasets that read them."""

from __future__ import annotations

from typing import Sequence

from lumos_dagster.floor.model import Snapshot


def upstream_first(snapshots: Sequence[Snapshot]) -> list[Snapshot]:
    """Each dataset after its upstreams among `snapshots` (others keep their order): a catalog that
    links an edge only to a table it already has (OpenMetadata) then gets every edge of an import
    written in batches. A lineage cycle is broken where it is met."""
    by_name = {s.dataset.name: s for s in snapshots}
    placed: set[str] = set()
    out: list[Snapshot] = []
    for first in snapshots:
        stack = [(first, False)]
        while stack:  # depth first, without recursion (lineage chains may be long)
            s, expanded = stack.pop()
            name = s.dataset.name
            if name in placed:
                continue
            if expanded:
                placed.add(name)
                out.append(s)
                continue
            stack.append((s, True))
            on_path = {x.dataset.name for x, e in stack if e}  # a cycle: do not go round it again
            stack.extend((by_name[u], False) for e in reversed(s.upstream)
                         if (u := e.upstream.name) in by_name and u not in placed and u not in on_path)  # fmt: skip
    return out
