"""ORC: schema and row count from the file tail."""

from __future__ import annotations

import pyarrow.fs as pafs
import pyarrow.orc as orc

from lumos_dagster.formats.arrow import converted_schema
from lumos_dagster.formats.base import FileSchema, open_random


def read_orc(path: str, fs: pafs.FileSystem | None = None) -> FileSchema:
    with open_random(path, fs) as fh:
        f = orc.ORCFile(fh)
        return FileSchema(schema=converted_schema(f.schema), row_count=f.nrows)
