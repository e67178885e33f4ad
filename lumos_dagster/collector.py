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
"""

from __future__ import annotations

import atexit
import gc
from contextlib import contextmanager
from typing import Iterator


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
