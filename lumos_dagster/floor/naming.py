"""Names the Dagster wiring and the core share: dataset names as asset paths, and the tags and metadata
keys that assets, sensors and the IO manager agree on (pure, no Dagster import)."""

from __future__ import annotations

import hashlib
import re
from typing import Iterable

#: a run the release sensor requests carries the release's name: its versions are recorded under it
RELEASE_TAG = "lumos/release"
#: what triggered a run: storage-change | release | schedule
TRIGGER_TAG = "lumos/trigger"
#: a dataset asset's Lumos URN, in its definition metadata (the IO manager finds snapshots by it)
URN_METADATA_KEY = "lumos/urn"

_NOT_NAME = re.compile(r"[^A-Za-z0-9_]")
# `%` (the escape itself), the separators of dataset names (`/`) and of SQL names (`.`), and what DataHub
# URNs reserve (it would encode those one way only, so a name read back from DataHub would differ)
_SPECIAL = re.compile("[%/.,()\u241f]")


def name_part(identifier: str) -> str:
    """A database identifier as one part of a dataset name, percent-encoded where it could be read as
    more than one part (`a/b` → `a%2Fb`); urllib.parse.unquote reverses it. Plain names are unchanged."""
    return _SPECIAL.sub(lambda m: "".join(f"%{b:02X}" for b in m[0].encode()), identifier)


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
