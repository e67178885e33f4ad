"""When Python's cycle collector runs: three places where its default costs seconds.

* **Forking workers** (schema readers, the delivery worker). A forked child shares the parent's
  memory until it writes to it, and the collector writes to every object it visits: a collection
  in the child would copy every page of the parent it touches. Frozen objects are left out of
  collections, in the child as in the parent, so they are frozen while children are forked and
  thawed in the parent afterwards (`frozen`).
* **Building a code location.** Thousands of assets are millions of new objects: the collector's
  thresholds trip again and again, and each full collection walks everything imported too (~0.5 s
  at 5,000 datasets). Nothing built is garbage before the build ends (`paused`).
* **Exiting.** CPython clears every module and collects what is left: with Dagster, DataHub and a
  run's objects loaded, 0.6–1.1 s of every `dagster asset materialize` and `lumos` command spent
  freeing memory the operating system takes back anyway. Everything is frozen at exit instead
  (`skip_final_collection`); objects still die by reference count as modules are cleared, and
  atexit handlers (event-log flushes, `weakref.finalize`) still run: only objects caught in
  reference cycles are left to the operating system unfinalized.

And how long forked workers live (`end_with_parent`): no longer than the process that forked them.
"""

from __future__ import annotations

import atexit
import ctypes
import gc
import os
import signal
import sys
import threading
import time
from contextlib import contextmanager
from typing import Iterator

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
#: seconds between a worker's checks that its parent is alive, where the kernel cannot tell it
PARENT_CHECK_EVERY = 0.5


@contextmanager
def frozen() -> Iterator[None]:
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@contextmanager
def paused() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def skip_final_collection() -> None:
    """Freeze every object when the interpreter exits (registering it twice does no harm)."""
    atexit.register(gc.freeze)


def end_with_parent(parent: int) -> None:
    """In a worker `parent` (a pid) just started: end this process when the parent ends, even by
    `kill -9`. A busy worker (reading a slow file, delivering) otherwise outlives a killed run,
    holding the store's SQLite file open; an idle pool worker waits on its queue forever.

    On Linux the kernel kills it the moment its parent ends (prctl PR_SET_PDEATHSIG; strictly, when
    the thread that forked it ends: the pool's and the delivery's forking threads outlive their
    workers). Elsewhere, and for a parent gone before the signal was asked for, a thread checks every
    `PARENT_CHECK_EVERY` s that the parent is still this process's parent (an orphan gets another)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # no prctl in this libc: the thread below still watches
            pass
    if os.getppid() != parent:
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent,), name="lumos-parent-watch", daemon=True).start()


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK_EVERY)
    os._exit(1)
