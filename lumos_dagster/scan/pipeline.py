"""The snapshot run: one `Run` taken through named steps, list → read → assemble → price → govern → judge.

This is the main path of Lumos. Each step is a function `(run, services) -> None` that fills in
its part of the run; each lives in the module of its area. What touches the outside world comes in
as plain callables (`Services`): how schemas are read (in process, a process pool or Spark), what
the store remembers, profiles, compute hours. So the whole pipeline runs with neither Dagster nor
Spark (a test checks `sys.modules`); the Dagster op turns a finished run into materializations.
"""

from __future__ import annotations

import logging
import re
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable, Iterator, Mapping, Sequence

from lumos_dagster.config import LumosConfig
from lumos_dagster.cost.billing import Allocation
from lumos_dagster.cost.pricing import price
from lumos_dagster.formats import FileResult
from lumos_dagster.governance.govern import govern
from lumos_dagster.model import Profile, Snapshot
from lumos_dagster.scan.assemble import Contents, assemble
from lumos_dagster.scan.catalogue import Catalogue, DatasetSpec
from lumos_dagster.scan.discovery import DatasetFile, DiscoveredDataset
from lumos_dagster.scan.judge import judge
from lumos_dagster.scan.listing import files_to_read, list_files, read_files, take_results
from lumos_dagster.scan.report import ScanReport
from lumos_dagster.schema.acceptances import Acceptance
from lumos_dagster.sources import Source

log = logging.getLogger(__name__)

#: (partition key, window start, window end); start and end are None for an unpartitioned run
Partition = tuple["str | None", "datetime | None", "datetime | None"]
#: (path, format, remote file system or None): one file to read
Item = tuple
Reader = Callable[[Sequence[Item]], "dict[str, FileResult]"]
#: (urns, partition key, urns wanting all their versions) → urn → what to version against, oldest
#: first, the previous last (a store's `version_histories`)
HistoryLookup = Callable[[Sequence[str], "str | None", Sequence[str]], "dict[str, list[Snapshot]]"]
#: (dataset name, partition key or None for its newest) → its stored snapshot
SnapshotLookup = Callable[[str, "str | None"], "Snapshot | None"]


@dataclass(frozen=True)
class Services:
    """What the pipeline asks of the world outside the core."""

    read: Reader
    history: HistoryLookup
    stored: SnapshotLookup
    #: hours the Dagster asset producing a dataset ran this month (`cost.compute.dagster_asset`)
    hours: Callable[[str], "float | None"] = lambda name: None
    #: the FOCUS bills' allocation for a month (`cost.billing`); None: list prices only
    bills: Callable[[str], "Allocation | None"] | None = None
    #: profile of a partition's readable files; None: no profiling here (e.g. no Spark)
    profile: Callable[[DatasetSpec, Sequence[str]], Profile] | None = None
    progress: Callable[[str], None] = log.info
    now: Callable[[], datetime] = lambda: datetime.now(timezone.utc)
    #: breaking changes accepted in the store (the API's acceptances) for these datasets
    acceptances: Callable[[list[str]], Sequence[Acceptance]] = lambda names: ()


@dataclass
class Run:
    """One run over some datasets × partitions; each step fills in its part."""

    config: LumosConfig
    catalogue: Catalogue
    sources: Mapping[str, Source]
    datasets: Sequence[DatasetSpec]  # the selected ones, lineage order
    partitions: Sequence[Partition]
    captured_at: datetime
    report: ScanReport = field(default_factory=ScanReport)
    # list
    listed: dict[str, DiscoveredDataset | None] = field(default_factory=dict)
    files: dict[tuple[str, str | None], list[tuple[str, DatasetFile]]] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)  # bytes of the whole dataset, all partitions
    # read
    contents: dict[tuple[str, str | None], Contents] = field(default_factory=dict)
    readable: dict[tuple[str, str | None], list[str]] = field(default_factory=dict)  # files read, per partition
    # assemble, price, govern
    snapshots: dict[str, dict[str | None, Snapshot]] = field(default_factory=dict)  # name → pk → snapshot
    # judge
    judgements: dict = field(default_factory=dict)  # name → scan.judge.Judgement
    warnings: list[str] = field(default_factory=list)  # said once for the run (an unreadable dbt file…)

    @property
    def partition_keys(self) -> list[str | None]:
        return sorted((pk for pk, _, _ in self.partitions), key=lambda k: k or "")


#: a batch reading at least this many files says so when it starts (a few seconds on 2 cores)
MANY_FILES = 10_000

Step = tuple[str, Callable[[Run, Services], None]]
#: what follows reading, in order: what `run_pipelines` runs on a batch once its reads are in
AFTER_READING: tuple[Step, ...] = (
    ("assemble", assemble),
    ("price", price),
    ("govern", govern),
    ("judge", judge),
)
#: the pipeline, in order
STEPS: tuple[Step, ...] = (("list", list_files), ("read", read_files), *AFTER_READING)


def _timed(step: Callable[[Run, Services], None], run: Run, services: Services) -> float:
    start = time.perf_counter()
    step(run, services)
    return time.perf_counter() - start


def timings(seconds: Mapping[str, float]) -> str:
    """`list 0.12 s, read 0.30 s, …`: what each step took, one progress line per run or batch."""
    return ", ".join(f"{name} {s:.2f} s" for name, s in seconds.items())


_HEAD = re.compile(r"steps|batch \d+/\d+ \([^)]*\)")
_TIMING = re.compile(r"(\w+) ([0-9]+\.[0-9]+) s")


def read_timings(line: str) -> dict[str, float]:
    """The step seconds of a run's (`steps: …`) or batch's (`batch 2/5 (…): …`) progress line; {} for
    any other line, a warning about a dataset named `steps` included (what benchmarks sum into phases)."""
    head, sep, tail = line.partition(": ")
    if not (sep and _HEAD.fullmatch(head)):
        return {}
    steps = [_TIMING.fullmatch(timing) for timing in tail.split(", ")]
    return {m[1]: float(m[2]) for m in steps} if all(steps) else {}


def run_pipeline(
    config: LumosConfig,
    catalogue: Catalogue,
    sources: Mapping[str, Source],
    datasets: Sequence[DatasetSpec],
    partitions: Sequence[Partition],
    services: Services,
) -> Run:
    run = Run(config, catalogue, sources, datasets, partitions, services.now())
    services.progress(f"steps: {timings({name: _timed(step, run, services) for name, step in STEPS})}")
    return run


def run_pipelines(
    config: LumosConfig,
    catalogue: Catalogue,
    sources: Mapping[str, Source],
    batches: Sequence[Sequence[DatasetSpec]],
    partitions: Sequence[Partition],
    services: Services,
) -> Iterator[Run]:
    """`run_pipeline` over each batch in turn, reading ahead: the next batch is listed and its files'
    reads started (in a thread that waits on the reader's processes) before a run is handed over,
    so the files are read while the caller records the run before them. No step looks across
    batches: each must hold whole lineage groups (`catalogue.chunks`)."""
    now = services.now()

    def start(batch: Sequence[DatasetSpec]) -> tuple[Run, float, Future | None]:
        run = Run(config, catalogue, sources, batch, partitions, now)
        listing = _timed(list_files, run, services)
        items = files_to_read(run)
        if len(items) >= MANY_FILES:  # the batch line comes once they are read: say a long read has begun
            services.progress(f"reading the schemas of {len(items)} files")
        return run, listing, (ahead.submit(services.read, items) if items else None)

    ahead = ThreadPoolExecutor(1, thread_name_prefix="lumos-read-ahead")
    try:
        following = start(batches[0]) if batches else None
        for i in range(len(batches)):
            run, listing, reading = following
            following = start(batches[i + 1]) if i + 1 < len(batches) else None
            waited = time.perf_counter()
            take_results(run, reading.result() if reading else {})
            # "read" is what this batch waited for its files: they were read while the one before was recorded
            seconds = {"list": listing, "read": time.perf_counter() - waited}
            seconds.update((name, _timed(step, run, services)) for name, step in AFTER_READING)
            services.progress(
                f"batch {i + 1}/{len(batches)} ({len(run.datasets)} datasets, {run.report.files_read} files read): "
                + timings(seconds)
            )
            yield run
    finally:  # done, or the caller stopped early, or a step failed: reads not started yet are dropped
        ahead.shutdown(wait=True, cancel_futures=True)
