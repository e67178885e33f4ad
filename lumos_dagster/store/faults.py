"""The snapshot store's faults in one line: a query stopped at its statement timeout, a connection
lost (a restarted server, `pg_terminate_backend`), a full disk. Each is said as what it is, and that
nothing was lost: the store writes in transactions, so the one a fault interrupts is rolled back and
what it held is written by the next run or command, never half. The driver's message is not
repeated whole: SQLAlchemy's quotes the statement and every parameter (400 URNs, 18 KB)."""

from __future__ import annotations

import errno
import os
from typing import Any

from lumos_dagster.floor.masking import mask_secrets, shown_url

TIMEOUT, LOST, FULL = "timeout", "lost", "full"
#: PostgreSQL's SQLSTATE of each fault (psycopg's `sqlstate`): query_canceled; admin_shutdown,
#: crash_shutdown, cannot_connect_now and class 08, connection exceptions; disk_full
_STATES = {"57014": TIMEOUT, "57P01": LOST, "57P02": LOST, "57P03": LOST, "53100": FULL}
_SQLITE_FULL = 13
_WORDS = (  # a driver that gives no code says it in words
    ("statement timeout", TIMEOUT),
    ("database or disk is full", FULL),
    ("no space left on device", FULL),
    ("server closed the connection", LOST),
    ("connection is closed", LOST),
    ("terminating connection", LOST),
)
_SAID = {
    TIMEOUT: "a query reached the store's statement timeout and was stopped",
    LOST: "the connection to the store was lost",
    FULL: "the disk holding the store is full",
}
_NEXT = {
    TIMEOUT: "run the command again, or give the store's queries more time",
    LOST: "run the command again once the store answers",
    FULL: "free some space, then run the command again",
}


def _short_of_space(url: str | None) -> bool:
    """Whether a SQLite store's disk has (next to) nothing left: SQLite says "disk I/O error" when it
    cannot grow its shared-memory file there, as it opens."""
    if not url or not url.startswith("sqlite:///"):
        return False
    try:
        found = os.statvfs(os.path.dirname(os.path.abspath(url[len("sqlite:///") :])))
    except OSError:
        return False
    return found.f_bavail * found.f_frsize < 1 << 20


def fault_kind(exc: BaseException, url: str | None = None) -> str | None:
    """TIMEOUT, LOST or FULL for a fault of the store at `url` (SQLAlchemy's error, or the driver's
    under it); None for any other error."""
    orig: Any = getattr(exc, "orig", None) or exc
    kind = _STATES.get(getattr(orig, "sqlstate", None) or "")
    if kind is None and (getattr(orig, "sqlstate", None) or "").startswith("08"):
        kind = LOST
    if kind is None and getattr(orig, "sqlite_errorcode", None) == _SQLITE_FULL:
        kind = FULL
    if kind is None and isinstance(orig, OSError) and orig.errno == errno.ENOSPC:
        kind = FULL
    if kind is None and getattr(exc, "connection_invalidated", False):
        kind = LOST
    text = str(orig).lower()
    if kind is None:
        kind = next((k for words, k in _WORDS if words in text), None)
    if kind is None and "disk i/o error" in text and _short_of_space(url):
        kind = FULL
    return kind


def fault_message(exc: BaseException, url: str | None = None) -> str | None:
    """The one line a store fault is said in (which fault, that nothing was lost, what to do), with the
    driver's own first line, masked; None for an error that is no store fault."""
    kind = fault_kind(exc, url)
    if kind is None:
        return None
    orig = getattr(exc, "orig", None) or exc
    said = next((line.strip() for line in str(orig).splitlines() if line.strip()), type(orig).__name__)
    where = f" at {shown_url(url)}" if url else ""
    lost = "nothing was lost (the store writes in transactions)"
    return f"{_SAID[kind]}{where} ({mask_secrets(said)}): {lost}; {_NEXT[kind]}"
