"""A capture's document kept in two parts: its body, kept once however many captures share it, and
the capture's own fields, kept in its row.

The body is the document (`snapshot_json.snapshot_to_json`) without what differs between captures of the
same content: the partition (`partition_key`), the capture time (`captured_at`) and the data's age
then (`quality.age_hours`). A daily re-snapshot of an undated dataset, or a sensor re-running a
partition, captures the same body again: its row holds only its partition and capture time (in
columns) and the data's age (in `capture`, JSON, with anything its columns would not give back as
it was: a capture time not in UTC, an empty partition key; the age alone as its bare number).

Reads select a row's parts joined into one text, `packed` (in SQL, with the body from its table),
and `assemble` puts the document together again: the same JSON document, key for key, as the
store kept whole before (rows written then are still whole: `assemble` reads them as they are).
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta, timezone
from typing import Any

import sqlalchemy as sa

#: what `assemble` gives back: the document's JSON text, its dict, or ("raw") what was selected, to
#: assemble later
DOCUMENT_MODES = ("text", "dict", "raw")
#: a packed row starts with MARK (a whole document starts with "{") and its parts are split by SEP;
#: neither occurs in JSON text (control characters are escaped there) nor in a partition key
MARK, SEP = "\x1e", "\x1f"
_OWN = ("partition_key", "captured_at")  # the document's own fields of a capture, at its top level
_UTC = timezone.utc


def dumps(doc: dict) -> str:
    """A document as the store keeps it: `model.snapshot_dumps`'s text."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def _column_time(captured_at: datetime) -> str | None:
    """The capture time as `assemble` reads it back from the `captured_at` column (the time in UTC,
    without its zone; SQLite keeps the wall-clock time as given): None unless that is exactly the
    document's (an aware time of offset 0)."""
    if captured_at.tzinfo is None or captured_at.utcoffset() != timedelta(0):
        return None
    return captured_at.replace(tzinfo=_UTC).isoformat()


def split(doc: dict, captured_at: datetime) -> tuple[str, str, str | None]:
    """(body text, its sha256, the capture's own fields its columns do not give back, as JSON or
    None) of a capture's document; `captured_at`: the capture time its row's column holds."""
    body = {k: v for k, v in doc.items() if k not in _OWN}
    own: dict[str, Any] = {}
    quality = body.get("quality")
    if isinstance(quality, dict) and "age_hours" in quality:
        body["quality"] = {k: v for k, v in quality.items() if k != "age_hours"}
        if quality["age_hours"] is not None:
            own["age_hours"] = quality["age_hours"]
    if doc["captured_at"] != _column_time(captured_at):
        own["captured_at"] = doc["captured_at"]
    if doc["partition_key"] == "":  # the column keeps None as '': an empty key is said
        own["partition_key"] = ""
    text = dumps(body)
    if not own:
        return text, hashlib.sha256(text.encode()).hexdigest(), None
    # the data's age alone (the usual case) as its bare number: a few bytes a capture, not twenty
    kept = dumps(own["age_hours"]) if own.keys() == {"age_hours"} else dumps(own)
    return text, hashlib.sha256(text.encode()).hexdigest(), kept


def packed(
    partition_key: sa.ColumnElement[str],
    captured_text: sa.ColumnElement[str],
    capture: sa.ColumnElement[str | None],
    body: sa.ColumnElement[str],
) -> sa.ColumnElement[str]:
    """A row's parts as one text (SQL): MARK, then partition key, capture time (UTC text), own
    fields, body, split by SEP."""
    sep = sa.literal(SEP, sa.Text)
    return (
        sa.literal(MARK, sa.Text)
        + partition_key
        + sep
        + captured_text
        + sep
        + sa.func.coalesce(capture, sa.literal("", sa.Text))
        + sep
        + body
    )


def _join(doc: dict, partition_key: str, captured: str, own: dict) -> dict:
    doc["partition_key"] = own["partition_key"] if "partition_key" in own else (partition_key or None)
    doc["captured_at"] = own.get("captured_at") or datetime.fromisoformat(captured).replace(tzinfo=_UTC).isoformat()
    quality = doc.get("quality")
    if isinstance(quality, dict):
        quality["age_hours"] = own.get("age_hours")
    return doc


def assemble(value: str, mode: str = "dict") -> Any:
    """The document of a `packed` row, or of a row kept whole (see DOCUMENT_MODES for `mode`)."""
    if mode == "raw":
        return value
    if not value.startswith(MARK):  # kept whole, before schema version 3
        return value if mode == "text" else json.loads(value)
    partition_key, captured, own_text, body_text = value[1:].split(SEP, 3)
    own = json.loads(own_text) if own_text else {}
    if not isinstance(own, dict):  # the data's age alone, as its bare number
        own = {"age_hours": own}
    doc = _join(json.loads(body_text), partition_key, captured, own)
    return dumps(doc) if mode == "text" else doc
