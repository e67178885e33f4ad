"""Helpers the store's jobs share: the time of a write, batches of values, a snapshot's row, and
retrying a check-then-insert write that lost a race."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timezone
from typing import TypeVar

import sqlalchemy as sa

from lumos_dagster.model import Snapshot, snapshot_to_json


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _aware(d: datetime) -> datetime:
    # SQLite hands datetimes back without their zone; everything stored is UTC
    return d if d.tzinfo else d.replace(tzinfo=timezone.utc)


_CHUNK = 500  # values per IN (...) list: far below any database's bound-parameter limit


def _chunks(values: Sequence, size: int = _CHUNK) -> Iterator[Sequence]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


def _snapshot_row(s: Snapshot) -> dict:
    doc = snapshot_to_json(s)  # model.snapshot_dumps, keeping the schema fingerprint it hashes
    return dict(
        urn=s.dataset.urn,
        partition_key=s.partition_key or "",
        captured_at=s.captured_at,
        version=s.version,
        fingerprint=doc["fingerprint"],
        readable=s.readable,
        document=json.dumps(doc, sort_keys=True, separators=(",", ":")),
    )


T = TypeVar("T")


def _on_conflict_retry(write: Callable[[], T], attempts: int = 3) -> T:
    """Run a check-then-insert write again when another run inserted the same key first: the
    next attempt finds the row and updates it."""
    for _ in range(attempts - 1):
        try:
            return write()
        except sa.exc.IntegrityError:
            continue
    return write()
