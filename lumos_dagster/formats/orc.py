"""ORC: schema and row count from the file tail."""

from __future__ import annotations

import pyarrow.orc as orc

from lumos_dagster.formats.arrow import from_arrow_schema
from lumos_dagster.formats.base import FileSchema


def read_orc(path: str) -> FileSchema:
    with open(path, "rb") as fh:
        f = orc.ORCFile(fh)
        return FileSchema(schema=from_arrow_schema(f.schema), row_count=f.nrows)
