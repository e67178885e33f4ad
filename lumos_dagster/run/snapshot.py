"""The snapshot run: the use case every snapshot of Lumos goes through, from listing a dataset's
files to its catalogs.

One run takes datasets × partitions through its steps, a batch of whole lineage groups at a time:
list → read → assemble → price → govern → store and judge (versions decided there, once) →
deliver → alert → release versions. Each step takes and returns values. Each batch ends in a
`BatchOutcome`: what the store kept, each dataset's checks or why it was held back, the warnings,
the step times. The Dagster op turns outcomes into events; `lumos snapshot` prints them.

Reading ahead: the next batch is listed and its files' reads started (in a thread that waits on
the reader's processes) before a batch is handed over, so files are read while the caller records
the batch before them. No step looks across batches: each holds whole lineage groups.

What touches the outside world comes in as plain callables (`Services`): how schemas are read (in
process, a process pool or Spark), compute hours, bills, profiles. So the whole run works with
neither Dagster nor Spark (a test checks `sys.modules`).
"""

from __future__ import annotations

import functools
import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable, Iterator, Mapping, Sequence

from lumos_dagster.cost.pricing import Bills, BillsLookup, HoursLookup, price
from lumos_dagster.delivery.worker import Delivery
from lumos_dagster.floor.config import LumosConfig
from lumos_dagster.floor.dataset_specs import Catalogue, DatasetSpec, chunks
from lumos_dagster.floor.model import Snapshot
from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.floor.windows import Window
from lumos_dagster.formats import FileResult
from lumos_dagster.governance.alerts import alert_run
from lumos_dagster.governance.checks import Judgement, blocking_checks, failure_message, has_data
from lumos_dagster.governance.govern import govern
from lumos_dagster.governance.profiling import FileProfiler, profiler
from lumos_dagster.run.assemble import assemble
from lumos_dagster.run.listing import Listing, files_to_read, list_datasets, observe
from lumos_dagster.run.record import record
from lumos_dagster.sources import Source
from lumos_dagster.store import SnapshotStore

log = logging.getLogger(__name__)

#: (path, format, remote file system or None): one file to read
Item = tuple
Reader = Callable[[Sequence[Item]], "dict[str, FileResult]"]
#: datasets a batch takes through the run (whole lineage groups): the next batch's files are read
#: while this one's outcome is recorded, and a run's memory is bounded by a batch
BATCH = 200
#: a batch reading at least this many files says so when it starts (a few seconds on 2 cores)
MANY_FILES = 10_000
#: the steps, in order; each batch's outcome says what each took
STEPS = ("list", "read", "assemble", "price", "govern", "store", "deliver", "alert")


@dataclass(frozen=True)
class Services:
    """What a run asks of the world outside the core."""

    read: Reader
    #: hours the Dagster asset producing a dataset ran this month (`cost.compute.dagster_asset`)
    hours: HoursLookup = lambda name: None
    #: the FOCUS bills' allocation for a month (`cost.billing`); None: the run reads lumos.yaml's bills itself
    bills: BillsLookup | None = None
    #: profile of a partition's files (within the cap); None: no Spark here (database tables are still
    #: profiled, by their sources)
    profile: FileProfiler | None = None
    say: Callable[[str], None] = log.info
    now: Callable[[], datetime] = lambda: datetime.now(timezone.utc)
    #: the engine `read` reads a number of files with, as the log names it (`a process pool of 2`,
    #: `Spark (master local[2])`): each batch's line says it; None: not said
    engine: Callable[[int], str] | None = None


@dataclass(frozen=True)
class DatasetOutcome:
    """One dataset of a batch: its partitions (as the store keeps them; a partition without data as
    observed, not stored) and its checks, or why it was held back."""

    spec: DatasetSpec
    snapshots: Mapping[str | None, Snapshot]
    judgement: Judgement

    @property
    def held_back(self) -> tuple[str, str] | None:
        return self.judgement.held_back

    @property
    def recorded(self) -> dict[str | None, Snapshot]:
        """The partitions the store kept (none when held back)."""
        if self.held_back is not None:
            return {}
        return {pk: s for pk, s in self.snapshots.items() if has_data(s)}


@dataclass(frozen=True)
class BatchOutcome:
    number: int  # 1-based
    of: int
    datasets: tuple[DatasetOutcome, ...]  # lineage order
    warnings: tuple[str, ...]  # said once (an unreadable dbt file, a dataset held back…)
    pending: Mapping[str, int]  # catalog known to be down → entries it still has queued
    seconds: Mapping[str, float]  # step → seconds (read: what this batch waited for its files)
    report: ScanReport
    engine: str | None = None  # what read the batch's files, when it read any (`a process pool of 2`)

    def line(self) -> str:
        """`batch 2/5 (200 datasets, 1000 files read with Spark (master local[2])): list 0.06 s, read 0.05 s, …`:
        the progress line."""
        steps = ", ".join(f"{name} {s:.2f} s" for name, s in self.seconds.items())
        read = f"{self.report.files_read} files read" + (f" with {self.engine}" if self.engine else "")
        return f"batch {self.number}/{self.of} ({len(self.datasets)} datasets, {read}): {steps}"


@dataclass
class Done:
    """A whole run's outcome: each dataset's partitions (as stored) and checks, its warnings, report
    and what failed blocking checks stopped (None: nothing)."""

    snapshots: dict[str, dict[str | None, Snapshot]]
    judgements: dict[str, Judgement]
    warnings: list[str]
    report: ScanReport
    failure: str | None = None


def held_message(outcome: DatasetOutcome) -> str:
    """Why a dataset was not snapshotted, with its own schema changes (judged when it is released)."""
    check, upstream = outcome.held_back or ("", "")
    own = [c for s in outcome.snapshots.values() for c in s.changes]
    shown = ", ".join(f"{c.kind} `{c.path}`" for c in own[:5]) + (f" and {len(own) - 5} more" if len(own) > 5 else "")
    said = f"; its own schema changes, judged when it is released: {shown}" if own else ""
    return f"{outcome.spec.name}: not materialized: upstream {upstream} failed {check}{said}"


@dataclass
class _Batch:
    datasets: Sequence[DatasetSpec]
    listing: Listing
    report: ScanReport
    seconds: dict[str, float]
    reading: Future | None


@dataclass
class SnapshotRun:
    """One run over `datasets` × `windows` (`run`), storing into `store` and delivering through
    `delivery`; `release`: the release whose refresh this is (its datasets' versions are recorded
    in it). The totals (`report`, `judgements`, `seconds`) grow as batches finish."""

    config: LumosConfig
    catalogue: Catalogue
    sources: Mapping[str, Source]
    store: SnapshotStore
    delivery: Delivery | None  # None: queued for no catalog, delivered nowhere
    services: Services
    release: str | None = None
    batch_size: int = BATCH
    report: ScanReport = field(default_factory=ScanReport)
    judgements: dict[str, Judgement] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def run(self, datasets: Sequence[DatasetSpec], windows: Sequence[Window]) -> Iterator[BatchOutcome]:
        """Each batch's outcome, in lineage order; `datasets` in lineage order too."""
        batches = chunks(datasets, self.batch_size)
        keys = sorted((w.key for w in windows), key=lambda k: k or "")
        captured_at = self.services.now()
        ahead = ThreadPoolExecutor(1, thread_name_prefix="lumos-read-ahead")

        def start(batch: Sequence[DatasetSpec]) -> _Batch:
            report, began = ScanReport(), time.perf_counter()
            listing = list_datasets(batch, windows, self.sources, report, self.services.say, self.services.now())
            items = files_to_read(listing, self.sources)
            if len(items) >= MANY_FILES:  # the batch's line comes once they are read: say a long read has begun
                self.services.say(f"reading the schemas of {len(items)} files")
            reading = ahead.submit(self.services.read, items) if items else None
            return _Batch(batch, listing, report, {"list": time.perf_counter() - began}, reading)

        try:
            current = start(batches[0]) if batches else None
            for i in range(len(batches)):
                following = start(batches[i + 1]) if i + 1 < len(batches) else None  # read while this one finishes
                if current is not None:
                    outcome = self._finish(current, i + 1, len(batches), keys, captured_at)
                    self.services.say(outcome.line())
                    yield outcome
                current = following
        finally:  # done, or the caller stopped early, or a step failed: reads not started yet are dropped
            ahead.shutdown(wait=True, cancel_futures=True)

    def complete(self, datasets: Sequence[DatasetSpec], windows: Sequence[Window]) -> Done:
        """The whole run at once: what `lumos snapshot` and the tests take."""
        out = Done({}, {}, [], self.report)
        for batch in self.run(datasets, windows):
            out.warnings += batch.warnings
            for o in batch.datasets:
                out.snapshots[o.spec.name] = dict(o.snapshots)
                out.judgements[o.spec.name] = o.judgement
        out.failure = self.failure
        return out

    @property
    def failure(self) -> str | None:
        """What failed blocking checks stopped so far (None: nothing): the datasets that broke, and
        those held back behind them."""
        return failure_message(self.judgements, blocking_checks(self.config))

    def _finish(
        self, b: _Batch, number: int, of: int, keys: Sequence[str | None], captured_at: datetime
    ) -> BatchOutcome:
        config, catalogue, services, seconds = self.config, self.catalogue, self.services, b.seconds
        clock = time.perf_counter()

        def lap(step: str) -> None:
            nonlocal clock
            now = time.perf_counter()
            seconds[step], clock = now - clock, now

        results = b.reading.result() if b.reading else {}
        engine = services.engine(len(results)) if services.engine is not None and results else None
        observed = observe(b.listing, results, b.report)
        lap("read")  # what this batch waited for its files: they were read while the one before was recorded
        snapshots = assemble(b.datasets, keys, observed, captured_at, b.report)
        lap("assemble")
        snapshots = price(config, catalogue, b.datasets, snapshots, observed.sizes, self._stored, services.hours,
                          services.bills or self._bills.month)  # fmt: skip
        lap("price")
        snapshots, warnings = govern(config, catalogue, b.datasets, snapshots, observed.readable, services.now(),
                                     profiler(self.sources, services.profile))  # fmt: skip
        warnings = [*b.listing.warnings, *warnings]
        lap("govern")
        catalogs = self.delivery.names if self.delivery is not None else []
        recorded = record(self.store, config, catalogue, b.datasets, snapshots, catalogs)
        lap("store")
        pending = self.delivery.deliver() if self.delivery is not None else {}
        lap("deliver")
        outcomes = tuple(DatasetOutcome(d, recorded.snapshots[d.name], recorded.judgements[d.name]) for d in b.datasets)
        kept = [s for o in outcomes for s in o.recorded.values()]
        # here, after storing: a change failing the gate is still recorded, and its owners told once
        alert_run(self.store, config, catalogue, kept, warnings.append)
        if self.release:  # a refresh after a release: the versions it brought, as the store numbered them
            newest = {o.spec.name: o.recorded[max(o.recorded, key=lambda k: k or "")] for o in outcomes if o.recorded}
            self.store.record_release_versions(self.release, {n: s.version for n, s in newest.items() if s.version})
        lap("alert")
        warnings += [held_message(o) for o in outcomes if o.held_back is not None]
        self.report.add(b.report)
        self.judgements.update(recorded.judgements)
        for step, s in seconds.items():
            self.seconds[step] = self.seconds.get(step, 0.0) + s
        return BatchOutcome(number, of, outcomes, tuple(warnings), pending, dict(seconds), b.report, engine)

    @functools.cached_property
    def _bills(self) -> Bills:
        return Bills(self.config, self.catalogue)

    @functools.cached_property
    def _specs(self) -> dict[str, DatasetSpec]:
        return self.catalogue.by_name()

    def _stored(self, name: str, pk: str | None) -> Snapshot | None:
        """The same partition's snapshot, else the latest one before it (another cadence, or not yet
        materialized); the latest of all when `pk` is None: what pricing reads of upstreams outside."""
        urn = self._specs[name].ref.urn
        return self.store.latest(urn, pk) or (self.store.previous(urn, pk) if pk is not None else None)
