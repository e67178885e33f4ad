"""The snapshot run in a process beside its caller (`lumos_dagster.run.beside`): the same batches as
in process, what it says and raises brought back, and no process left when the caller stops."""

import os
import signal

import pytest

from lumos_dagster.formats.readers import PoolReader
from lumos_dagster.run.beside import RunBeside, RunProcessLost
from lumos_dagster.run.snapshot import Services, SnapshotRun
from lumos_dagster.store import SnapshotStore
from tests.test_snapshot_run import _generated, _run


def _beside(tmp_path, config, sources, catalogue, day, read=None, size=3, said=None):
    """(RunBeside, make_run): the run of `catalogue` beside the caller, into tmp_path/beside.db."""
    url = f"sqlite:///{tmp_path}/beside.db"

    def make_run(say, warn):
        services = Services(read=read or PoolReader(), say=say, now=lambda: day)
        return SnapshotRun(config, catalogue, sources, SnapshotStore(url), None, services, batch_size=size)

    said = said if said is not None else []
    return RunBeside(config, said.append, lambda text: said.append(f"warning: {text}")), make_run, url


def test_a_run_beside_gives_the_batches_totals_and_store_of_the_same_run_in_process(tmp_path):
    config, sources, catalogue, partitions, day = _generated(tmp_path, 8)
    said: list[str] = []
    beside, make_run, url = _beside(tmp_path, config, sources, catalogue, day, said=said)
    batches = list(beside.run(make_run, catalogue.datasets, partitions))
    with SnapshotStore("sqlite:///:memory:") as store:
        here = _run(config, sources, catalogue, day, PoolReader(), store, 3)
        expected = list(here.run(catalogue.datasets, partitions))
    assert [[o.spec.name for o in b.datasets] for b in batches] == [[o.spec.name for o in b.datasets] for b in expected]
    assert [dict(o.snapshots) for b in batches for o in b.datasets] == [
        dict(o.snapshots) for b in expected for o in b.datasets
    ]
    # the totals grew here, as the batches came
    assert beside.judgements == here.judgements and beside.failure == here.failure
    assert beside.report.files_read == here.report.files_read > 0 and set(beside.seconds) == set(here.seconds)
    # what the run said came back, a line per batch, in order
    assert [line.split(" (")[0] for line in said if line.startswith("batch ")] == [f"batch {i}/3" for i in (1, 2, 3)]
    with SnapshotStore(url) as store:  # stored by the run's own process
        assert all(store.latest(d.ref.urn, partitions[-1].key) for d in catalogue.datasets)


def test_an_error_in_the_run_is_raised_here_with_its_own_traceback(tmp_path):
    config, sources, catalogue, partitions, day = _generated(tmp_path, 6)

    def read(items):
        raise ValueError("the reader broke on purpose")

    beside, make_run, _ = _beside(tmp_path, config, sources, catalogue, day, read=read)
    with pytest.raises(ValueError, match="the reader broke on purpose") as raised:
        list(beside.run(make_run, catalogue.datasets, partitions))
    (note,) = raised.value.__notes__
    assert note.startswith("in the snapshot run's process:") and 'raise ValueError("the reader broke' in note


def test_a_run_process_killed_midway_says_so_and_keeps_what_it_sent(tmp_path):
    config, sources, catalogue, partitions, day = _generated(tmp_path, 6)
    calls = []

    def read(items):
        calls.append(len(items))
        if len(calls) == 3:  # batch 1 is stored and sent; the run dies as it starts reading batch 3
            os.kill(os.getpid(), signal.SIGKILL)
        return PoolReader()(items)

    beside, make_run, url = _beside(tmp_path, config, sources, catalogue, day, read=read, size=2)
    got = []
    with pytest.raises(RunProcessLost, match=r"ended without finishing \(exit code -9\)"):
        for batch in beside.run(make_run, catalogue.datasets, partitions):
            got.append(batch)
    assert len(got) == 1 and beside.report.files_read == got[0].report.files_read > 0
    with SnapshotStore(url) as store:
        kept = {d.name for d in catalogue.datasets if store.latest(d.ref.urn) is not None}
    assert {o.spec.name for o in got[0].datasets} <= kept


def test_a_caller_that_stops_early_leaves_no_run_process(tmp_path):
    config, sources, catalogue, partitions, day = _generated(tmp_path, 9)
    beside, make_run, _ = _beside(tmp_path, config, sources, catalogue, day, size=1)
    before = _children()
    batches = beside.run(make_run, catalogue.datasets, partitions)
    next(batches)
    assert _children() - before, "the run is not in a process of its own"
    batches.close()
    assert _children() == before


def _children() -> set[int]:
    """This process's children (the kernel's list, per thread that forked them)."""
    found: set[int] = set()
    for task in os.listdir(f"/proc/{os.getpid()}/task"):
        with open(f"/proc/{os.getpid()}/task/{task}/children") as fh:
            found |= {int(p) for p in fh.read().split()}
    return found
