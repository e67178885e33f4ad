"""Dataset names → Dagster asset keys, groups, owners and tags that Dagster accepts."""

from __future__ import annotations

import hashlib
import re
from typing import Iterable

from dagster import AssetKey

_NOT_NAME = re.compile(r"[^A-Za-z0-9_]")
_TAG_KEY = re.compile(r"^[A-Za-z0-9_.\-/]{1,63}$")


def _segment(text: str) -> str:
    return _NOT_NAME.sub("_", text) or "_"


def asset_keys(names: Iterable[str]) -> dict[str, AssetKey]:
    """One readable key per dataset name (`sales/orders-v2` → sales/orders_v2).

    Dagster derives identifiers from keys, so segments keep only [A-Za-z0-9_]; names
    that would collide (`raw/a.csv` and `raw/a_csv`) get a short hash suffix.
    """
    names = list(names)
    plain = {n: tuple(_segment(s) for s in n.split("/")) for n in names}
    counts: dict[tuple[str, ...], int] = {}
    for parts in plain.values():
        counts[parts] = counts.get(parts, 0) + 1
    out = {}
    for n, parts in plain.items():
        if counts[parts] > 1:
            parts = (*parts[:-1], f"{parts[-1]}_{hashlib.sha1(n.encode()).hexdigest()[:6]}")
        out[n] = AssetKey(list(parts))
    return out


def dataset_keys(catalogue) -> dict[str, AssetKey]:
    """Keys of every dataset and of every upstream named but missing (they appear as external assets)."""
    return asset_keys([d.name for d in catalogue.datasets] + list(catalogue.missing_upstreams))


def group_name(domain: str | None) -> str:
    return _segment(domain) if domain else "datasets"


def dagster_owners(owners) -> list[str]:
    """Dagster takes e-mail addresses and `team:` names; other user ids stay catalog-only."""
    out = []
    for o in owners:
        if o.kind == "group":
            out.append(f"team:{_segment(o.id)}")
        elif "@" in o.id:
            out.append(o.id)
    return out


def dagster_tags(tags: Iterable[str]) -> dict[str, str]:
    return {t: "" for t in tags if _TAG_KEY.match(t)}
