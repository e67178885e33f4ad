"""ORC: schema and row count from the file tail."""

from __future__ import annotations

import os

import pyarrow.fs as pafs
import pyarrow.orc as orc

from lumos_dagster.formats.arrow import converted_schema
from lumos_dagster.formats.base import FileSchema, open_random

#: a whole ORC file ends in its postscript: the magic `ORC` (since Hive 0.12), then the postscript's length
NO_POSTSCRIPT = "not a whole ORC file: no postscript at its end (truncated, or still being written)"


def read_orc(path: str, fs: pafs.FileSystem | None = None) -> FileSchema:
    with open_random(path, fs) as fh:
        try:
            f = orc.ORCFile(fh)
            return FileSchema(schema=converted_schema(f.schema), row_count=f.nrows)
        except Exception:
            # a file cut short, where Arrow says "Unknown compression type"; asked only of a file Arrow
            # refuses, since the oldest writers (Hive 0.11) put no magic in the postscript
            fh.seek(-4, os.SEEK_END)
            if fh.read(3) != b"ORC":
                raise ValueError(NO_POSTSCRIPT) from None
            raise
