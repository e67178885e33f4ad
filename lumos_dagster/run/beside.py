"""The snapshot run in a process of its own beside its caller, the caller taking each batch's
outcome as it comes.

In Dagster the caller records each batch as events, which is Python work on one core as long as
the run's own work (listing, reading, storing, delivering) is. In one process the two take turns;
here the run works on the next batch while the caller records the one before, so a run takes
about the longer of the two on two cores, not their sum.

The run is forked when its batches start (the caller's code, configuration and catalogue come
with it) and builds what must not be shared across a fork itself (`make_run`: its store
connection, its delivery worker). What it says comes back as lines the caller logs; an error
comes back as the exception it raised, its traceback in a note. Batches are stored in order
before they are sent, and a batch sent is one the store kept: a caller that stops (a killed
step) loses no snapshot, only events Dagster would have recorded, and the run's process ends
with it (`end_with_parent`). Nothing it needs may hold a thread, socket or connection made
before the fork (Spark's session, Dagster's instance): `SnapshotRun.services` are taken as they
are, so the caller passes ones that do not (`assets.snapshots` keeps Spark runs in process).
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import traceback
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Callable, Iterator, Sequence

from lumos_dagster.collector import end_with_parent, frozen
from lumos_dagster.config import LumosConfig
from lumos_dagster.datasets import DatasetSpec
from lumos_dagster.governance.checks import Judgement
from lumos_dagster.report import ScanReport
from lumos_dagster.run.snapshot import BatchOutcome, SnapshotRun, Totals
from lumos_dagster.windows import Window

#: (say, warn) → the run, made in its own process: its store opened and its delivery started there
MakeRun = Callable[[Callable[[str], None], Callable[[str], None]], SnapshotRun]
#: seconds between checks, while waiting for the next batch, that the run's process is alive
CHECK_EVERY = 5.0


class RunProcessLost(RuntimeError):
    """The run's process ended without saying why (killed, out of memory)."""


def _portable(exc: BaseException) -> BaseException:
    """`exc` if it survives a pipe, else a RuntimeError that says what it was."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")


def _run(make_run: MakeRun, datasets: Sequence[DatasetSpec], windows: Sequence[Window], out: Connection,
         theirs: Connection, parent: int) -> None:  # fmt: skip
    end_with_parent(parent)
    theirs.close()  # else a caller gone would not end this process's sends
    run = None
    try:
        run = make_run(lambda text: out.send(("say", text)), lambda text: out.send(("warn", text)))
        for outcome in run.run(datasets, windows):
            out.send(("batch", outcome))
        if run.delivery is not None:
            run.delivery.finish()  # the last batch delivered while the caller recorded it
        out.send(("done", None))
    except BaseException as exc:  # noqa: BLE001  every failure goes to the caller, which raises it
        out.send(("error", (_portable(exc), traceback.format_exc())))
    finally:
        if run is not None:
            run.store.close()
        out.close()


@dataclass
class RunBeside(Totals):
    """`run` streams the batches of a run made by `make_run` in its own process; the totals grow as
    they arrive. `say` and `warn` log what the run says."""

    config: LumosConfig
    say: Callable[[str], None]
    warn: Callable[[str], None]
    report: ScanReport = field(default_factory=ScanReport)
    judgements: dict[str, Judgement] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def run(
        self, make_run: MakeRun, datasets: Sequence[DatasetSpec], windows: Sequence[Window]
    ) -> Iterator[BatchOutcome]:
        ours, theirs = multiprocessing.Pipe(duplex=False)
        process = multiprocessing.get_context("fork").Process(
            target=_run, args=(make_run, datasets, windows, theirs, ours, os.getpid()), name="lumos-run"
        )
        with frozen():  # the child's collections would copy every page of ours they visit
            process.start()
        theirs.close()
        ended = False  # the process said it is done, or why it failed
        try:
            while True:
                while not ours.poll(CHECK_EVERY):
                    if not process.is_alive():
                        break
                try:
                    kind, value = ours.recv()
                except EOFError:
                    process.join(timeout=CHECK_EVERY)
                    raise RunProcessLost(
                        f"the snapshot run's process ended without finishing (exit code {process.exitcode}): "
                        "the batches it sent were stored; run the same partitions again for the rest"
                    ) from None
                if kind == "say":
                    self.say(value)
                elif kind == "warn":
                    self.warn(value)
                elif kind == "batch":
                    self.count(value)
                    yield value
                elif kind == "error":
                    ended = True
                    exc, trace = value
                    exc.add_note(f"in the snapshot run's process:\n{trace}")
                    raise exc
                else:  # done
                    ended = True
                    return
        finally:
            ours.close()
            if not ended:  # the caller stopped early, or the process is gone: the run stops with it
                process.kill()
            process.join()
