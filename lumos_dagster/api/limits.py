"""A request's deadline, and CPU-bound work on its input done where it can be stopped at it.

`Guard` (app.py) sets `deadline` for each request; the store's reads stop at it (reading.pinned),
and `call` runs a function of the request's input in a worker process that is killed at it. A
thread cannot be stopped: a proposed schema that took a parser minutes used to keep a core busy
long after its request was answered 504, and the server's threads with it.

The workers are started from a small server process that has the code imported (`start`), at most
one per core, and kept for the next call while they finish in time. They run at a lower priority
than the server, within MEMORY_BYTES, and before each call lower their own CPU limit to what the
call may use, so the kernel ends one that overruns even if this process is gone.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import resource
import threading
import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

#: the longest URL (path and query) a request may have, answered 414 beyond. The longest the documented
#: parameters make, percent-encoded, stays below (4,000 characters of 4-byte UTF-8 in `/v1/gate?datasets=`
#: are 48,000 bytes); uvicorn refuses a request line of 64 KiB itself, in a text of its own
MAX_URL_BYTES = 60 * 1024
#: when the current request is answered 504 (time.monotonic()); None outside a request
deadline: ContextVar[float | None] = ContextVar("lumos_deadline", default=None)
MEMORY_BYTES = 1 << 30
#: worker processes at most, one per core
WORKERS = os.cpu_count() or 1

_slots = threading.BoundedSemaphore(WORKERS)
_lock = threading.Lock()
_context: Any = None
_idle: list[_Worker] = []


class Expired(Exception):
    """The deadline passed before the work was done; its process is gone."""


def until(timeout: float | None) -> float | None:
    """The current request's deadline, or `timeout` seconds from now (None: no limit)."""
    at = deadline.get()
    if at is not None:
        return at
    return None if timeout is None else time.monotonic() + timeout


def start(*modules: str) -> None:
    """Launch the server the workers start from, with `modules` imported once there, and the workers."""
    global _context
    with _lock:
        if _context is None:
            _context = multiprocessing.get_context("forkserver")
            _context.set_forkserver_preload(["__main__", *modules])  # workers then import neither again
            _idle.extend(_Worker() for _ in range(WORKERS))


def _serve(conn) -> None:
    """A worker: calls from `conn`, each within the CPU seconds it comes with, until the server is gone."""
    os.nice(10)  # the server answers /health first
    resource.setrlimit(resource.RLIMIT_DATA, (MEMORY_BYTES, MEMORY_BYTES))
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    while True:
        try:
            fn, args, seconds = conn.recv()
        except EOFError:
            return
        soft = math.ceil(sum(os.times()[:2]) + seconds)  # SIGXCPU past it: the limit counts the process' life
        resource.setrlimit(resource.RLIMIT_CPU, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))
        try:
            result = (True, fn(*args))
        except BaseException as exc:  # noqa: BLE001 - the caller raises it
            result = (False, exc)
        try:
            conn.send(result)
        except Exception as exc:  # an exception that does not pickle
            conn.send((False, RuntimeError(f"{type(exc).__name__} in a worker process")))


class _Worker:
    def __init__(self) -> None:
        self.conn, theirs = _context.Pipe()
        self.process = _context.Process(target=_serve, args=(theirs,), daemon=True)
        self.process.start()
        theirs.close()

    def stop(self) -> None:
        self.process.kill()
        self.process.join()
        self.conn.close()


def _take() -> _Worker:
    with _lock:
        while _idle:
            worker = _idle.pop()
            if worker.process.is_alive():
                return worker
            worker.stop()
    return _Worker()


def call(fn: Callable, *args, at: float) -> Any:
    """fn(*args) in a worker process (fn importable by name); Expired, with the worker killed, if it is
    not done by `at` (time.monotonic()). Its exceptions are raised here."""
    start(fn.__module__)
    if not _slots.acquire(timeout=max(0.0, at - time.monotonic())):
        raise Expired()
    try:
        worker = _take()
        try:
            worker.conn.send((fn, args, max(1.0, at - time.monotonic())))
            if not worker.conn.poll(max(0.0, at - time.monotonic())):
                raise Expired()
            ok, value = worker.conn.recv()
        except (Expired, EOFError, OSError):  # late, or it died: its CPU time or memory ran out
            worker.stop()
            raise Expired() from None
        if ok or not isinstance(value, MemoryError):
            with _lock:
                _idle.append(worker)
        else:  # what is left of its heap is no use to the next call
            worker.stop()
    finally:
        _slots.release()
    if not ok:
        raise value
    return value
