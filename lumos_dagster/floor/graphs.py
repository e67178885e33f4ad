"""The one rule lineage graphs share wherever they are declared (lumos.yaml, a portable document):
no cycles, self-loops included."""

from __future__ import annotations

from graphlib import CycleError, TopologicalSorter
from typing import Iterable, Mapping, Sequence


def first_cycle(upstream: Mapping[str, Iterable[str]], order: Sequence[str]) -> list[str] | None:
    """A cycle of the graph (node → its upstreams) as a closed ring `[a, b, a]`, told from its node
    first in `order` so the message is the same whatever the sorter met first; None when acyclic."""
    try:
        TopologicalSorter(upstream).prepare()
    except CycleError as exc:
        ring = exc.args[1][:-1]
        index = {name: i for i, name in enumerate(order)}
        k = min(range(len(ring)), key=lambda j: index.get(ring[j], len(index)))
        return ring[k:] + ring[:k] + [ring[k]]
    return None
