"""Dataset names as Dagster asset paths (pure: the Dagster wiring and the reports' links share it)."""

from __future__ import annotations

import hashlib
import re
from typing import Iterable

_NOT_NAME = re.compile(r"[^A-Za-z0-9_]")


def segment(text: str) -> str:
    return _NOT_NAME.sub("_", text) or "_"


def asset_paths(names: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """One readable path per dataset name (`sales/orders-v2` → sales/orders_v2).

    Dagster derives identifiers from keys, so segments keep only [A-Za-z0-9_]; names
    that would collide (`raw/a.csv` and `raw/a_csv`) get a short hash suffix.
    """
    names = list(names)
    plain = {n: tuple(segment(s) for s in n.split("/")) for n in names}
    counts: dict[tuple[str, ...], int] = {}
    for parts in plain.values():
        counts[parts] = counts.get(parts, 0) + 1
    out = {}
    for n, parts in plain.items():
        if counts[parts] > 1:
            parts = (*parts[:-1], f"{parts[-1]}_{hashlib.sha1(n.encode()).hexdigest()[:6]}")
        out[n] = parts
    return out
