from __future__ import annotations

from dataclasses import dataclass

from lumos_dagster.model import Schema


@dataclass(frozen=True)
class FileSchema:
    """What one file says about itself."""

    schema: Schema
    row_count: int | None = None


@dataclass(frozen=True)
class FileResult:
    """The outcome of reading one file's schema: a schema, or an error saying why not."""

    path: str
    schema: Schema | None = None
    row_count: int | None = None
    error: str | None = None
