"""CSV/TSV and JSON: types are inferred by Arrow from the first block of the file
(1 MiB by default), so a large file costs one block, not a full read."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.fs as pafs
import pyarrow.json as pjson

from lumos_dagster.formats.arrow import from_arrow_schema
from lumos_dagster.formats.base import FileSchema, open_stream

BLOCK_SIZE = 1 << 20


def read_csv(path: str, fs: pafs.FileSystem | None = None, delimiter: str = ",") -> FileSchema:
    reader = pcsv.open_csv(
        open_stream(path, fs),
        read_options=pcsv.ReadOptions(block_size=BLOCK_SIZE),
        parse_options=pcsv.ParseOptions(delimiter=delimiter),
    )
    try:
        return FileSchema(schema=from_arrow_schema(reader.schema))
    finally:
        reader.close()


def read_tsv(path: str, fs: pafs.FileSystem | None = None) -> FileSchema:
    return read_csv(path, fs, delimiter="\t")


def read_json(path: str, fs: pafs.FileSystem | None = None) -> FileSchema:
    """Newline-delimited JSON through Arrow; a top-level JSON array is sampled instead."""
    with open_stream(path, fs) as stream:
        head = stream.read(BLOCK_SIZE)
    if head.lstrip()[:1] == b"[":
        return FileSchema(schema=from_arrow_schema(_array_sample_schema(head.decode("utf-8", "replace"))))
    reader = pjson.open_json(open_stream(path, fs), read_options=pjson.ReadOptions(block_size=BLOCK_SIZE))
    try:
        return FileSchema(schema=from_arrow_schema(reader.schema))
    finally:
        reader.close()


def _array_sample_schema(text: str) -> pa.Schema:
    """Schema of the objects of a JSON array, from those complete within `text`."""
    decoder = json.JSONDecoder()
    records, pos = [], text.index("[") + 1
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] == "]":
            break
        try:
            record, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            if records:  # the block ended inside an object: sample what we have
                break
            raise
        if not isinstance(record, dict):
            raise ValueError("a JSON array of objects was expected")
        records.append(record)
    if not records:
        raise ValueError("empty JSON array")
    # the struct type of the whole sample: keys missing from the first object still count
    return pa.schema(list(pa.array(records).type))
