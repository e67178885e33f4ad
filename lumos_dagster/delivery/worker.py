"""A run's delivery: after each batch is stored and queued for every catalog (`run.record`), the
outbox is delivered.

Stored first, so nothing is lost: a catalog that fails keeps its share queued for the next run
or `lumos sync`, and is not tried again in this run (a dead server must not cost a timeout per
batch). Delivery runs in a forked worker process beside the caller, which goes on with the run
meanwhile (in Dagster, recording its events): building DataHub's aspects is pure Python, so a
thread would only take turns with it. The first batch is delivered before the caller goes on, so
a catalog that is down is known from the start; later batches are delivered while the caller
works. The worker starts with the run and builds the catalog adapters itself: importing their
clients (DataHub's, ~0.7 s) happens on the other core while the caller lists and reads.
"""

from __future__ import annotations

import multiprocessing
import os
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Callable, Sequence

from lumos_dagster.catalog.base import CatalogAdapter
from lumos_dagster.delivery.outbox import deliver
from lumos_dagster.floor.collector import end_with_parent, frozen
from lumos_dagster.store import SnapshotStore
from lumos_dagster.store.roles import OutboxStore

#: (catalog → its first error in the run): a delivery round's outcome
Down = dict[str, str]
#: seconds the first batch waits for its delivery before the run goes on (a backlog of earlier runs,
#: a slow catalog: a catalog found down later shows from then on)
FIRST_WAIT = 30
CHECK_EVERY = 5  # seconds between checks that a waited-for worker is still alive


def deliver_all(store: OutboxStore, catalogs: Sequence[CatalogAdapter], down: Down) -> None:
    """Deliver the outbox to each catalog not known to be down; a failure marks its catalog down."""
    for catalog in catalogs:
        if catalog.name not in down:
            report = deliver(store, catalog)
            if report.failed:
                down[catalog.name] = next(iter(report.failed.values()))


def _worker(store_url: str, make_catalogs: Callable[[], list[CatalogAdapter]], inbox: Connection,
            parent_end: Connection, parent: int) -> None:  # fmt: skip
    """Build the catalogs and say their names (or why they cannot be built); then deliver after each
    request and answer each with the catalogs that are down so far. The run going away (even
    `kill -9`) ends the worker, in the middle of a delivery too (`end_with_parent`)."""
    end_with_parent(parent)
    parent_end.close()  # else this process holds the pipe open itself and never sees the run go
    down: Down = {}
    try:
        catalogs = make_catalogs()
    except Exception as exc:  # a missing credential, say: the run reports it, as if built there
        inbox.send(exc)
        return
    inbox.send([c.name for c in catalogs])
    try:
        with SnapshotStore(store_url) as store:
            while True:
                last = inbox.recv()
                while inbox.poll():  # requests that came meanwhile: one round delivers them all
                    last = inbox.recv()
                deliver_all(store, catalogs, down)
                inbox.send((last, dict(down)))
                if last is None:
                    return
    finally:
        for catalog in catalogs:
            catalog.close()


class Delivery:
    """`deliver` after each batch of a run is stored, `finish` at its end: one delivery worker a run.
    `make_catalogs` builds the catalog adapters: in the delivery worker (which must not share this
    process's connections), and here only when delivering here."""

    def __init__(self, store_url: str, make_catalogs: Callable[[], list[CatalogAdapter]],
                 warn: Callable[[str], None], background: bool = True):  # fmt: skip
        self.store, self.make_catalogs, self.warn = SnapshotStore(store_url), make_catalogs, warn
        self.catalogs: list[CatalogAdapter] = []  # built here only when delivering here
        self._names: list[str] | None = None
        self.down: Down = {}
        self._worker: BaseProcess | None = None
        self._pipe: Connection | None = None
        self._sent = 0  # rounds asked for
        if background and "fork" in multiprocessing.get_all_start_methods():
            self._start()
        else:
            self._deliver_here_from_now()

    @property
    def names(self) -> list[str]:
        """The catalogs' names, as the worker built them (waiting for it the first time)."""
        if self._names is None:
            try:
                answer = self._receive()
            except (EOFError, OSError) as exc:
                return self._lost(exc)
            if isinstance(answer, Exception):  # the worker could not build the catalogs, and ends
                worker, self._worker = self._worker, None
                if worker is not None:
                    worker.join(timeout=60)
                raise answer
            self._names = answer
        return self._names

    def deliver(self) -> dict[str, int]:
        """Deliver what is queued (the first round waits for it, later ones go on in the worker);
        returns what each catalog known to be down still has queued."""
        if self._worker is not None:
            self._request(wait=0 if self._sent else FIRST_WAIT)
        else:
            self._deliver_here()
        return self._pending()

    def finish(self) -> dict[str, int]:
        """Wait for the last deliveries; returns what each catalog that failed still has queued."""
        try:
            if self._worker is not None:
                self._request(wait=None, last=True)
            return self._pending()
        finally:
            if self._worker is not None:
                self._worker.join(timeout=60)
            for catalog in self.catalogs:
                catalog.close()
            self.store.close()

    def _pending(self) -> dict[str, int]:
        return {name: self.store.outbox_counts(name).get("pending", 0) for name in self.down}

    def _deliver_here(self) -> None:
        down = dict(self.down)
        deliver_all(self.store, self.catalogs, down)
        self._update(down)

    def _deliver_here_from_now(self) -> list[str]:
        """Build the catalogs here, and deliver here from now on; their names."""
        self._worker = None
        self.catalogs = self.make_catalogs()
        self._names = [c.name for c in self.catalogs]
        return self._names

    def _start(self) -> None:
        parent, child = multiprocessing.Pipe()
        worker = multiprocessing.get_context("fork").Process(
            target=_worker,
            args=(self.store.url, self.make_catalogs, child, parent, os.getpid()),
            name="lumos-delivery",
            daemon=True,
        )
        with frozen():
            worker.start()
        child.close()
        self._worker, self._pipe = worker, parent

    def _receive(self, wait: float | None = None):
        """The worker's next answer, waiting `wait` seconds at most (None: as long as it lives);
        None when none came in time."""
        worker, pipe = self._worker, self._pipe
        if worker is None or pipe is None:  # it gave up on its catalogs: as if gone
            raise EOFError("the delivery process is gone")
        waited = 0.0
        while not pipe.poll(0 if wait == 0 else CHECK_EVERY):
            if wait == 0:
                return None
            if not worker.is_alive():
                raise EOFError("the delivery process is gone")
            waited += CHECK_EVERY
            if wait is not None and waited >= wait:
                return None
        return pipe.recv()

    def _request(self, wait: float | None, last: bool = False) -> None:
        """Ask the worker for a round; read its answers so far, and wait `wait` seconds at most (None:
        as long as the worker lives) for this round's."""
        self.names  # noqa: B018  the worker's first answer is its catalogs' names: read it first
        if self._worker is None or self._pipe is None:  # it could not start them, and delivery moved here
            self._deliver_here()
            return
        self._sent += 1
        expected = None if last else self._sent
        try:
            self._pipe.send(expected)
            while True:
                answer = self._receive(wait)
                if answer is None:
                    if wait:
                        self.warn(f"delivery has taken over {wait:.0f} s (a backlog, a slow catalog): the run goes on")
                    return
                answered, down = answer
                self._update(down)
                if wait != 0 and answered == expected:
                    return
        except (EOFError, OSError) as exc:
            self._lost(exc)
            self._deliver_here()

    def _lost(self, exc: BaseException) -> list[str]:
        """The worker died: deliver here from now on; the catalogs' names."""
        self.warn(f"the delivery process stopped ({type(exc).__name__}); delivering in the run instead")
        return self._deliver_here_from_now()

    def _update(self, down: Down) -> None:
        for name, error in down.items():
            if name not in self.down:
                self.down[name] = error
                self.warn(
                    f"catalog {name} did not take the metadata; what it misses stays queued "
                    f"for the next run or `lumos sync`: {error}"
                )
