"""CSV/TSV and JSON: types are inferred by Arrow from the first block of the file
(1 MiB by default), so a large file costs one block, not a full read.

A text file is a schema only when it is whole (docs/sources.md, "Files still being written"): a
first line without its line end is a header or record cut short (a writer that died, a copy still
in flight: `id,amount,nam`), so the file is unreadable for now, not a schema; a torn last line is
left out of the sample. A column no value typed (a header-only CSV, a JSON key only ever null) is
`model.UNTYPED`, never Arrow's `null`: the merge and the versioning take its type from the
dataset's other files and its previous snapshot.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from itertools import accumulate
from operator import sub

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.fs as pafs
import pyarrow.json as pjson

from lumos_dagster.floor.datatypes import UNTYPED, Field, Primitive, Schema, map_struct_fields
from lumos_dagster.floor.errors import SchemaReadError
from lumos_dagster.formats.arrow import converted_schema
from lumos_dagster.formats.base import MAX_NESTING, FileSchema, open_stream, too_deep

BLOCK_SIZE = 1 << 20
#: a first row longer than the block (a 50 MB one-line CSV) is retried with 8x bigger blocks up to this
MAX_BLOCK = 64 << 20
#: Arrow's CSV reader takes ~30 µs a column to open (5 s at this many): a wider first row is refused
MAX_COLUMNS = 100_000
# what Arrow's CSV reader says when its block holds no whole row
_NO_WHOLE_ROW = ("Empty CSV file or block", "straddles two block boundaries")
#: the reason a text file whose first line has no line end is not read (yet)
TORN_FIRST_LINE = "its first line has no line end: cut short or still being written (read once it is whole)"
_NULL = Primitive("null")


def _typed_by_values(fields: tuple[Field, ...]) -> tuple[Field, ...]:
    """`fields` with those Arrow typed `null` (no value said what they hold) untyped, nested ones too."""
    return tuple(
        Field(f.name, UNTYPED, description=f.description)
        if f.type == _NULL
        else replace(f, type=map_struct_fields(f.type, _typed_by_values))
        for f in fields
    )


def _schema(arrow: pa.Schema) -> Schema:
    schema = converted_schema(arrow)
    if "null" not in str(arrow):  # what every file with a value in each column spares: a walk of its fields
        return schema
    return replace(schema, fields=_typed_by_values(schema.fields))


def _too_long() -> ValueError:
    return ValueError(f"the first row is longer than {MAX_BLOCK >> 20} MiB")


def _without_torn_tail(whole: bytes, lines: int, spans: bool) -> bytes:
    """A whole file's text without a last line that has no line end, when `lines` whole lines come
    before it (a CSV's header and a row, a JSON record): a file cut off while being written (`1,tr`
    of `1,true`) must not turn a column into text. A file that merely lacks its last line end loses a
    row of the sample, not a type. When values may span lines (`spans`: quoted CSV), a tail with a
    quote is kept: it may end such a value."""
    cut = whole.rfind(b"\n") + 1
    if whole.endswith(b"\n") or whole.count(b"\n", 0, cut) < lines or (spans and b'"' in whole[cut:]):
        return whole
    return whole[:cut]


def _csv_schema(source: pa.NativeFile, block: int, delimiter: str) -> pa.Schema:
    with (
        source,
        pcsv.open_csv(
            source,
            read_options=pcsv.ReadOptions(block_size=block, use_threads=False),  # one block: threads only cost
            # quoted line breaks are common (spreadsheet exports): the chunker must not split on them
            parse_options=pcsv.ParseOptions(delimiter=delimiter, newlines_in_values=True),
        ) as reader,
    ):
        return reader.schema


def read_csv(path: str, fs: pafs.FileSystem | None = None, delimiter: str = ",") -> FileSchema:
    return FileSchema(schema=_schema(_csv_first_block(path, fs, delimiter)))


def _csv_first_block(path: str, fs: pafs.FileSystem | None, delimiter: str) -> pa.Schema:
    """When Arrow finds no whole row in its block, the first row is longer than the block: a bigger
    one is tried, unless the row is too wide to read. A whole file whose first line has no line end
    is refused (`TORN_FIRST_LINE`)."""
    block = BLOCK_SIZE
    while True:
        # two blocks read here, not the stream handed to Arrow: its reader reads up to 8 blocks
        # ahead, a remote object of a few MiB whole; the schema comes from the first block alone
        with open_stream(path, fs) as stream:
            head = stream.read(2 * block)
        if len(head) < 2 * block:
            if not _has_line_end(head):
                raise SchemaReadError(path, TORN_FIRST_LINE)
            head = _without_torn_tail(head, 2, spans=True)
        try:
            return _csv_schema(pa.BufferReader(head), block, delimiter)
        except pa.ArrowInvalid as exc:
            if not any(sign in str(exc) for sign in _NO_WHOLE_ROW) or len(head) <= block:
                raise  # not a row longer than the block (the whole file was in it)
        head = head[: block + 1]
        if head.count(delimiter.encode(), 0, head.find(b"\n")) >= MAX_COLUMNS:
            raise ValueError(f"the first row has more than {MAX_COLUMNS:,} columns")
        if block >= MAX_BLOCK:
            raise _too_long()
        block *= 8


def _has_line_end(text: bytes) -> bool:
    return b"\n" in text or b"\r" in text


def read_tsv(path: str, fs: pafs.FileSystem | None = None) -> FileSchema:
    return read_csv(path, fs, delimiter="\t")


def read_json(path: str, fs: pafs.FileSystem | None = None) -> FileSchema:
    """Newline-delimited JSON through Arrow; a top-level JSON array is sampled instead. Both
    from the first block, whose nesting is checked before any parser sees it (Arrow's
    parser recurses natively, and crashes the process on very deep input)."""
    block = BLOCK_SIZE
    while True:
        with open_stream(path, fs) as stream:
            head = stream.read(block + 1)
        whole = len(head) <= block
        if head.lstrip()[:1] == b"[":
            head = head[:block]
            _check_nesting(path, head)
            return FileSchema(schema=_schema(_array_sample_schema(head.decode("utf-8", "replace"), whole)))
        # whole lines only: in NDJSON a line break always ends a record (JSON strings cannot hold one)
        end = len(_without_torn_tail(head, 1, spans=False)) if whole else head.rfind(b"\n", 0, block) + 1
        if end:
            break
        if block >= MAX_BLOCK:
            raise _too_long()
        block *= 8
    if whole and not _has_line_end(head):  # one record without its line end: whole when it parses
        try:
            return _ndjson_schema(path, head)
        except pa.ArrowInvalid:
            raise SchemaReadError(path, TORN_FIRST_LINE) from None
    if end < len(head) <= block:
        # a last line without its line end: a torn record (not JSON: left out below), or the end of a record
        # written over several lines (pretty-printed), which the records before it need
        try:
            return _ndjson_schema(path, head)
        except pa.ArrowInvalid:
            pass
    return _ndjson_schema(path, head[:end])


def _ndjson_schema(path: str, text: bytes) -> FileSchema:
    _check_nesting(path, text)
    with pjson.open_json(
        pa.BufferReader(text), read_options=pjson.ReadOptions(block_size=len(text) + 1, use_threads=False)
    ) as reader:
        return FileSchema(schema=_schema(reader.schema))


# a JSON string, closed by its quote or, in broken text, by the end of the line
_STRING = re.compile(rb'"(?:[^"\\\n]|\\.)*+"?')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def _check_nesting(path: str, text: bytes) -> None:
    """Refuse `text` whose brackets (outside strings) nest deeper than MAX_NESTING."""
    if text.count(b"[") + text.count(b"{") <= MAX_NESTING:
        return
    levels = list(accumulate(map(_STEP.__getitem__, _STRING.sub(b"", text).translate(None, _NOT_BRACKETS))))
    # a surplus of closing brackets (broken text) must not hide the depth that follows it
    floors = accumulate(levels, min, initial=0)
    if max(map(sub, levels, floors), default=0) > MAX_NESTING:
        raise too_deep(path)


def _array_sample_schema(text: str, whole: bool) -> pa.Schema:
    """Schema of the objects of a JSON array, from those complete within `text`, the first
    block of the file or (`whole`) all of it: then it must be one complete JSON array."""
    decoder = json.JSONDecoder()
    records: list[dict] = []
    pos = text.index("[") + 1
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] == "]":
            break
        try:
            record, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            if records and not whole:  # the block ended inside an object: sample what we have
                break
            raise
        if not isinstance(record, dict):
            raise ValueError("a JSON array of objects was expected")
        records.append(record)
    if whole and (pos >= len(text) or text[pos + 1 :].strip()):
        raise ValueError(
            "truncated JSON array: the file ends before its closing ]"
            if pos >= len(text)
            else f"extra data after the JSON array at character {pos + 1}"
        )
    if not records:
        raise ValueError("empty JSON array")
    # the struct type of the whole sample: keys missing from the first object still count
    return pa.schema(list(pa.array(records).type))
