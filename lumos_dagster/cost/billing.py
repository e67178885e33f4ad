"""Real bills: FOCUS billing exports (FinOps Open Cost and Usage Specification), CSV or
Parquet, mapped to datasets.

A charge belongs to a dataset when a tag names it (`lumos_dataset: sales/orders` by
default), or when its ResourceId matches a rule's glob — then, like a bucket-level S3
charge, it is split over the rule's datasets by their bytes. Storage or compute comes from
the charge's ServiceCategory (or, failing that, its service name). Billed amounts replace
list prices for the datasets and components they cover.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Mapping, Sequence

import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from lumos_dagster.floor.errors import LumosError

if TYPE_CHECKING:  # for the annotation only
    from lumos_dagster.floor.config import BillingRule

_STORAGE_WORDS = ("storage", "s3", "blob", "gcs", "bucket")


class BillingError(LumosError):
    """A billing export that cannot be read as FOCUS."""


@dataclass(frozen=True)
class Charge:
    resource_id: str
    service: str
    category: str
    cost: float
    tags: Mapping[str, str]
    start: datetime

    @property
    def component(self) -> str:
        text = f"{self.category} {self.service}".lower()
        return "storage" if any(w in text for w in _STORAGE_WORDS) else "compute"

    @property
    def month(self) -> str:
        return self.start.strftime("%Y-%m")


def _tags(value) -> dict[str, str]:
    if value is None or value == "":
        return {}
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()}
    if isinstance(value, list):  # Parquet maps arrive as (key, value) pairs
        return {str(k): str(v) for k, v in value}
    return {str(k): str(v) for k, v in json.loads(value).items()}


def read_focus(path: str) -> list[Charge]:
    try:
        table = pq.read_table(path) if path.endswith(".parquet") else pcsv.read_csv(path)
    except Exception as exc:  # any reader failure: name the file
        raise BillingError(f"{path}: cannot read the billing export: {exc}") from None
    columns = set(table.column_names)
    cost_column = "EffectiveCost" if "EffectiveCost" in columns else "BilledCost"
    missing = {cost_column, "ChargePeriodStart"} - columns
    if missing:
        raise BillingError(f"{path}: not a FOCUS export: missing column(s) {', '.join(sorted(missing))}")
    out = []
    for row in table.to_pylist():
        start = row["ChargePeriodStart"]
        if isinstance(start, str):
            start = datetime.fromisoformat(start.replace("Z", "+00:00"))
        try:
            tags = _tags(row.get("Tags"))
        except (ValueError, AttributeError):
            raise BillingError(f"{path}: Tags is neither JSON nor a map: {row.get('Tags')!r}") from None
        out.append(
            Charge(
                resource_id=row.get("ResourceId") or "",
                service=row.get("ServiceName") or "",
                category=row.get("ServiceCategory") or "",
                cost=float(row[cost_column] or 0),
                tags=tags,
                start=start,
            )
        )
    return out


@dataclass
class Allocation:
    by_dataset: dict[str, dict[str, float]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(float)))
    unallocated: float = 0.0  # charges no rule mapped to a dataset

    def billed(self, name: str, component: str) -> float | None:
        got = self.by_dataset.get(name, {})
        return got[component] if component in got else None


def allocate(
    charges: Sequence[Charge], rules: Sequence[BillingRule], datasets: Mapping[str, int], month: str
) -> Allocation:
    """`datasets`: name → bytes (the weights of a shared charge)."""
    out = Allocation()
    for charge in charges:
        if charge.month != month:
            continue
        for rule in rules:
            if rule.tag is not None:
                name = charge.tags.get(rule.tag)
                if name is not None and name in datasets:
                    out.by_dataset[name][charge.component] += charge.cost
                    break
            elif rule.resource is not None and fnmatchcase(charge.resource_id, rule.resource):  # one of the two
                sharing = {n: b for n, b in datasets.items() if fnmatchcase(n, rule.datasets)}
                total = sum(sharing.values())
                if not sharing:
                    continue
                for name, size in sharing.items():
                    share = size / total if total else 1 / len(sharing)
                    out.by_dataset[name][charge.component] += charge.cost * share
                break
        else:
            out.unallocated += charge.cost
    return out
