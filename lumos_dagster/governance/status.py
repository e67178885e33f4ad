"""The asset checks of the snapshots the store holds, decided by the judge step's own functions:
what `lumos summary` says of a dataset is what Dagster's checks said of the run that stored it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from lumos_dagster.config import LumosConfig
from lumos_dagster.datasets import Catalogue, DatasetSpec
from lumos_dagster.governance.checks import ERROR, CheckOutcome, blocking_checks, dataset_checks
from lumos_dagster.model import Snapshot

OK, WARNING, FAILED, HELD_BACK, NOT_MATERIALIZED = "ok", "warning", "failed", "held back", "not materialized"
STATUSES = (OK, WARNING, FAILED, HELD_BACK, NOT_MATERIALIZED)


@dataclass(frozen=True)
class Standing:
    """One dataset's latest snapshot and its checks. `held_back`: (check, upstream) when an upstream
    failed a blocking check after this snapshot was taken, so a run stopped before this dataset."""

    spec: DatasetSpec
    snapshot: Snapshot | None
    checks: tuple[CheckOutcome, ...] = ()
    held_back: tuple[str, str] | None = None

    @property
    def failed(self) -> list[CheckOutcome]:
        return [c for c in self.checks if not c.passed]

    def failed_with(self, severity: str) -> list[str]:
        return [c.name for c in self.failed if c.severity == severity]

    @property
    def status(self) -> str:
        if self.held_back is not None:
            return HELD_BACK
        if self.snapshot is None:
            return NOT_MATERIALIZED
        if any(c.severity == ERROR for c in self.failed):
            return FAILED
        return WARNING if self.failed else OK


def standings(
    config: LumosConfig, catalogue: Catalogue, latest: Callable[[DatasetSpec], Snapshot | None], accepted: Sequence = ()
) -> list[Standing]:
    """Every dataset of `catalogue` (lineage order) with `latest(spec)` judged as a run judges it;
    `accepted`: acceptances recorded in the store (schema.acceptances), as `lumos gate` honours them."""
    blocking = blocking_checks(config)
    blocked: dict[str, tuple[str, str, Snapshot]] = {}  # dataset → (check failed, by which dataset, its snapshot)
    out = []
    for d in catalogue.datasets:  # upstreams first
        s = latest(d)
        stop = next((blocked[u] for u in d.upstream if u in blocked), None)
        # a snapshot taken after the failure came from a later run that did not stop here
        if stop is not None and (s is None or s.captured_at < stop[2].captured_at):
            blocked[d.name] = stop
            out.append(Standing(d, s, held_back=stop[:2]))
            continue
        if s is None:
            out.append(Standing(d, None))
            continue
        checks = dataset_checks(config, catalogue, d, {s.partition_key: s}, accepted)
        failed = next((c.name for c in checks if not c.passed and c.name in blocking), None)
        if failed is not None:
            blocked[d.name] = (failed, d.name, s)
        out.append(Standing(d, s, checks))
    return out
