"""Each dataset's status — ok, warning, failed, held back, not materialized — the one answer `lumos
summary`, the API, the reports and Dagster's asset checks give.

A dataset's status is its last run judged again now: the captures that run took (and the dataset's
newest capture) go through the run's own judge step (`governance.checks.judge`), under lumos.yaml
and the acceptances recorded in the store now. So it is what Dagster's checks recorded for that run,
a backfill's whole range included, until something changed since: an acceptance, a policy. Dagster
shows the change at the dataset's next run; everything else at once (docs/api.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from lumos_dagster.floor.config import LumosConfig
from lumos_dagster.floor.dataset_specs import Catalogue, DatasetSpec
from lumos_dagster.floor.model import FileError, Snapshot
from lumos_dagster.governance.checks import ERROR, WARN, CheckOutcome, judge
from lumos_dagster.store.roles import HistoryAndReleases

OK, WARNING, FAILED, HELD_BACK, NOT_MATERIALIZED = "ok", "warning", "failed", "held back", "not materialized"
STATUSES = (OK, WARNING, FAILED, HELD_BACK, NOT_MATERIALIZED)


def status_of(checks: Sequence[CheckOutcome], held_back: tuple[str, str] | None = None,
              materialized: bool = True) -> str:  # fmt: skip
    """The word for a dataset's checks, by severity as Dagster shows them: a failed ERROR check fails
    the dataset, a failed WARN one warns."""
    if held_back is not None:
        return HELD_BACK
    if not materialized:
        return NOT_MATERIALIZED
    failed = [c for c in checks if not c.passed]
    if any(c.severity == ERROR for c in failed):
        return FAILED
    return WARNING if failed else OK


def said_of(checks: Sequence[CheckOutcome], held_back: tuple[str, str] | None = None, materialized: bool = True) -> str:
    """The status with its reasons: `failed: schema_compatible; warning: metadata_complete`, or
    `held back: clean/orders failed schema_compatible`."""
    if held_back is not None:
        return f"{HELD_BACK}: {held_back[1]} failed {held_back[0]}"
    failed = [c for c in checks if not c.passed]
    by_severity = ((FAILED, [c.name for c in failed if c.severity == ERROR]),
                   (WARNING, [c.name for c in failed if c.severity == WARN]))  # fmt: skip
    named = "; ".join(f"{word}: {', '.join(names)}" for word, names in by_severity if names)
    return named or status_of(checks, held_back, materialized)


@dataclass(frozen=True)
class Standing:
    """One dataset's newest capture and its checks. `held_back`: (check, upstream) when an upstream
    fails a blocking check and this dataset's last run is older, so a run stopped before it."""

    spec: DatasetSpec
    snapshot: Snapshot | None
    checks: tuple[CheckOutcome, ...] = ()
    held_back: tuple[str, str] | None = None
    captures: tuple[Snapshot, ...] = ()  # those judged: the last run's, oldest partition first

    @property
    def errors(self) -> list[FileError]:
        """The files the captures judged could not read, each once."""
        return list(dict.fromkeys(e for s in self.captures for e in s.errors))

    @property
    def failed(self) -> list[CheckOutcome]:
        return [c for c in self.checks if not c.passed]

    @property
    def status(self) -> str:
        return status_of(self.checks, self.held_back, self.snapshot is not None)

    @property
    def said(self) -> str:
        return said_of(self.checks, self.held_back, self.snapshot is not None)


def judged(config: LumosConfig, catalogue: Catalogue, datasets: Sequence[DatasetSpec],
           captures: Mapping[str, Sequence[Snapshot]], accepted: Sequence = (),
           unread: Mapping[str, Sequence[Snapshot]] | None = None) -> list[Standing]:  # fmt: skip
    """`datasets` (lineage order, their upstreams among them) judged on `captures` (name → what its
    last run took, oldest partition first) as a run judges them; `accepted`: the store's acceptances;
    `unread`: name → its partitions' latest captures that could not read some files, which stay in its
    files_readable check (`checks.judge`). Held back: a dataset whose last run is older than its failing
    upstream's."""
    at = {name: max(s.captured_at for s in snaps) for name, snaps in captures.items() if snaps}
    by_partition = {name: {s.partition_key: s for s in snaps} for name, snaps in captures.items()}
    judgements = judge(config, catalogue, datasets, by_partition, accepted, unread=unread,
                       held=lambda d, upstream: d.name not in at or at[d.name] < at[upstream])  # fmt: skip
    out = []
    for d in datasets:
        snaps, j = captures.get(d.name, ()), judgements[d.name]
        seen = by_partition.get(d.name, {})
        past = [s for s in (unread or {}).get(d.name, ()) if s.partition_key not in seen] if j.checks else []
        every = tuple(sorted([*past, *snaps], key=lambda s: s.partition_key or ""))
        out.append(Standing(d, snaps[-1] if snaps else None, j.checks, j.held_back, every))
    return out


def standings(config: LumosConfig, catalogue: Catalogue, store: HistoryAndReleases, names: Sequence[str] | None = None,
              partition: str | None = None) -> list[Standing]:  # fmt: skip
    """The status of every dataset of `catalogue` (lineage order), or of those `names` (their upstreams
    judged too, not returned), from what `store` holds now, its acceptances included. `partition`: that
    partition's latest capture judged alone instead of the last run."""
    datasets = list(catalogue.datasets) if names is None else _with_upstreams(catalogue, names)
    urns = [d.ref.urn for d in datasets]
    if partition is None:
        found, unread = store.last_runs(urns), store.unread(urns)
    else:
        found, unread = {urn: [s] for urn in urns if (s := store.latest(urn, partition)) is not None}, {}
    captures = {d.name: found.get(d.ref.urn, []) for d in datasets}
    past = {d.name: unread[d.ref.urn] for d in datasets if d.ref.urn in unread}
    out = judged(config, catalogue, datasets, captures, store.acceptances([d.name for d in datasets]), past)
    asked = None if names is None else set(names)
    return out if asked is None else [s for s in out if s.spec.name in asked]


def _with_upstreams(catalogue: Catalogue, names: Sequence[str]) -> list[DatasetSpec]:
    """The datasets named and everything upstream of them, in lineage order."""
    specs = catalogue.by_name()
    wanted, todo = set(), [n for n in names if n in specs]
    while todo:
        name = todo.pop()
        if name not in wanted:
            wanted.add(name)
            todo += [u for u in specs[name].upstream if u in specs]
    return [d for d in catalogue.datasets if d.name in wanted]
