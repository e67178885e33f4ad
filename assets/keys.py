"""Dataset names → Dagster asset keys, groups, owners and tags that Dagster accepts."""

from __future__ import annotations

import re
from typing import Iterable

from dagster import AssetKey

from lumos_dagster.naming import segment

_TAG_KEY = re.compile(r"^[A-Za-z0-9_.\-/]{1,63}$")


def dataset_keys(catalogue) -> dict[str, AssetKey]:
    """Keys of every dataset and of every upstream named but missing (they appear as external assets)."""
    return {n: AssetKey(list(p)) for n, p in catalogue.asset_paths().items()}


def group_name(domain: str | None) -> str:
    return segment(domain) if domain else "datasets"


def dagster_owners(owners) -> list[str]:
    """Dagster takes e-mail addresses and `team:` names; other user ids stay catalog-only."""
    out = []
    for o in owners:
        if o.kind == "group":
            out.append(f"team:{segment(o.id)}")
        elif "@" in o.id:
            out.append(o.id)
    return out


def dagster_tags(tags: Iterable[str]) -> dict[str, str]:
    return {t: "" for t in tags if _TAG_KEY.match(t)}
