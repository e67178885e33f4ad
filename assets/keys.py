"""Dataset names → Dagster asset keys, groups, owners and tags that Dagster accepts."""

from __future__ import annotations

import re
from typing import Iterable

from dagster import AssetKey
from dagster._core.definitions.utils import is_valid_owner

from lumos_dagster.naming import segment

_TAG_KEY = re.compile(r"^[A-Za-z0-9_.\-/]{1,63}$")


def dataset_keys(catalogue) -> dict[str, AssetKey]:
    """Keys of every dataset and of every upstream named but missing (they appear as external assets)."""
    return {n: AssetKey(list(p)) for n, p in catalogue.asset_paths().items()}


def group_name(domain: str | None) -> str:
    return segment(domain) if domain else "datasets"


def dagster_owners(owners) -> list[str]:
    """Groups as `team:` names, and the users Dagster takes (e-mail addresses by its own test):
    an id it rejects (`bob`, `bob@localhost`, `jürgen@exämple.com`) would fail the whole code
    location, so it stays catalog-only, as written."""
    out = [f"team:{segment(o.id)}" if o.kind == "group" else o.id for o in owners]
    return [o for o in out if is_valid_owner(o)]


def dagster_tags(tags: Iterable[str]) -> dict[str, str]:
    return {t: "" for t in tags if _TAG_KEY.match(t)}
