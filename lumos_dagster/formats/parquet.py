"""Parquet: the schema and row count come from the footer alone."""

from __future__ import annotations

import json

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from lumos_dagster.formats.arrow import converted_schema
from lumos_dagster.formats.base import FileSchema, open_random

# flags Arrow adds to a logical type's description that are not part of the file's type
_INTERNAL = ("is_from_converted_type", "force_set_converted_type")


def _logical(col) -> str | None:
    desc = json.loads(col.logical_type.to_json())
    name = desc.pop("Type", "None")
    if name in ("None", "Unknown"):
        return None
    params = ", ".join(f"{k}={json.dumps(v)}" for k, v in desc.items() if k not in _INTERNAL)
    return f"{name}({params})" if params else name


def _native_types(parquet_schema: pq.ParquetSchema) -> dict[str, str]:
    """Leaf column path → Parquet's own spelling, e.g. `INT64 Timestamp(isAdjustedToUTC=true, timeUnit="micros")`."""
    out = {}
    for i in range(len(parquet_schema)):
        col = parquet_schema.column(i)
        logical = _logical(col)
        out[col.path] = f"{col.physical_type} {logical}" if logical else col.physical_type
    return out


def read_parquet(path: str, fs: pafs.FileSystem | None = None) -> FileSchema:
    with open_random(path, fs) as fh:
        pf = pq.ParquetFile(fh)
        # Parquet's schema printed holds every physical and logical type the native spellings show
        # (after a first line naming the Python object, at its address)
        spelling = str(pf.schema).partition("\n")[2]
        schema = converted_schema(pf.schema_arrow, spelling, lambda: _native_types(pf.schema).get)
        return FileSchema(schema=schema, row_count=pf.metadata.num_rows)
