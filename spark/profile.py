"""Profiling a dataset partition on Spark: row count and, per top-level column, null fraction,
distinct estimate (HyperLogLog), min and max — one aggregation pass over (a sample of) the data.

Local Parquet, ORC, CSV/TSV and JSON lines are read by Spark itself, skipping corrupt files (the
schema pass has reported them already), on a master or a Spark Connect server alike. Avro has no reader
in this Spark (spark-avro cannot be fetched here): fastavro reads it on the executors, one task per file
(not over Spark Connect, which has no RDDs). Remote files (s3://) and
database tables are not profiled yet.
"""

from __future__ import annotations

from typing import Sequence

from lumos_dagster.errors import NotProfiled
from lumos_dagster.model import ColumnProfile, Profile
from lumos_dagster.spark.session import is_connect

_NATIVE = {
    "parquet": ("parquet", {}),
    "orc": ("orc", {}),
    "csv": ("csv", {"header": "true", "inferSchema": "true"}),
    "tsv": ("csv", {"header": "true", "inferSchema": "true", "sep": "\t"}),
    "json": ("json", {}),
}
PROFILED_FORMATS = (*_NATIVE, "avro")


def _avro_rows(path: str):
    import fastavro

    with open(path, "rb") as fh:
        yield from fastavro.reader(fh)


def load_frame(spark, paths: Sequence[str], fmt: str | None):
    if not paths:
        raise NotProfiled("no readable file in the partition")
    remote = [p for p in paths if "://" in p and not p.startswith("file://")]
    if remote:
        raise NotProfiled(f"remote files ({remote[0].split('://')[0]}://) are not profiled yet")
    if fmt in _NATIVE:
        kind, options = _NATIVE[fmt]
        return spark.read.options(ignoreCorruptFiles="true", **options).format(kind).load(list(paths))
    if fmt == "avro":
        if is_connect(spark):
            raise NotProfiled("Avro files are not profiled over Spark Connect: fastavro reads them in tasks of "
                              "an RDD, which Spark Connect does not have")  # fmt: skip
        rows = spark.sparkContext.parallelize(list(paths), len(paths)).flatMap(_avro_rows)
        if rows.isEmpty():
            raise NotProfiled("the Avro files hold no records")
        return spark.createDataFrame(rows, samplingRatio=1.0)
    raise NotProfiled(f"{fmt or 'unknown'} files are not profiled (profiled: {', '.join(PROFILED_FORMATS)})")


def profile_frame(df, sample: float, seed: int = 0) -> Profile:
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, BinaryType, MapType, StructType

    if sample < 1:
        df = df.sample(fraction=sample, seed=seed)
    fields = df.schema.fields
    exprs = [F.count(F.lit(1)).alias("rows")]
    ordered = {}
    for i, f in enumerate(fields):
        column = F.col(f"`{f.name}`")
        exprs.append(F.sum(F.when(column.isNull(), 1).otherwise(0)).alias(f"nulls{i}"))
        # nested values have no order or cheap distinct count: nulls only
        ordered[i] = not isinstance(f.dataType, (StructType, ArrayType, MapType, BinaryType))
        if ordered[i]:
            exprs += [
                F.approx_count_distinct(column).alias(f"distinct{i}"),
                F.min(column).alias(f"min{i}"),
                F.max(column).alias(f"max{i}"),
            ]
    row = df.agg(*exprs).first().asDict()
    rows = row["rows"]

    def text(value) -> str | None:
        return None if value is None else str(value)

    columns = tuple(
        ColumnProfile(
            f.name,
            row[f"nulls{i}"] / rows if rows else None,
            row[f"distinct{i}"] if ordered[i] else None,
            text(row[f"min{i}"]) if ordered[i] else None,
            text(row[f"max{i}"]) if ordered[i] else None,
        )
        for i, f in enumerate(fields)
    )
    return Profile(rows, sample, columns)


def profile_files(spark, paths: Sequence[str], fmt: str | None, sample: float) -> Profile:
    return profile_frame(load_frame(spark, paths, fmt), sample)
