"""Forking worker processes (schema readers, the delivery worker) without copying the parent.

A forked child shares the parent's memory until it writes to it, and Python's garbage collector
writes to every object it visits: a collection in the child would copy every page of the parent
it touches. Frozen objects are left out of collections, in the child as in the parent, so they
are frozen while children are forked and thawed in the parent afterwards.
"""

from __future__ import annotations

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
