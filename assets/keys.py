"""Dataset names → Dagster asset keys, groups, owners and tags that Dagster accepts."""

from __future__ import annotations

import re
from typing import Iterable

from dagster import AssetKey

from lumos_dagster.floor.naming import segment
from lumos_dagster.resources.tuning.dagster_private import is_valid_owner

_TAG_KEY = re.compile(r"^[A-Za-z0-9_.\-/]{1,63}$")


def dataset_keys(catalogue) -> dict[str, AssetKey]:
    """Keys of every dataset and of every upstream named but missing (they appear as external assets)."""
    return {n: AssetKey(list(p)) for n, p in catalogue.asset_paths().items()}


def group_name(domain: str | None, key: AssetKey) -> str:
    """The domain, then the key's folders (`sales` + `raw/orders` → `sales_raw`; `raw/events` in
    domain `raw` → `raw`). Dagster labels a graph node with the key's last segment only, and keys
    are unique, so two nodes of a group share a label only if their folders join alike (`a/b/x`,
    `a_b/x`) (docs/design.md)."""
    parts = [segment(domain)] if domain else []
    for folder in key.path[:-1]:
        if not parts or parts[-1] != folder:
            parts.append(folder)
    return "_".join(parts) or "datasets"


def dagster_owners(owners) -> list[str]:
    """Groups as `team:` names spelled as everywhere else (Dagster takes any text after `team:`),
    and the users Dagster takes (e-mail addresses by its own test): an id it rejects (`bob`,
    `bob@localhost`, `jürgen@exämple.com`) would fail the whole code location, so it stays
    catalog-only, as written."""
    out = [f"team:{o.id}" if o.kind == "group" else o.id for o in owners]
    return [o for o in out if is_valid_owner(o)]


def dagster_tags(tags: Iterable[str]) -> dict[str, str]:
    return {t: "" for t in tags if _TAG_KEY.match(t)}
