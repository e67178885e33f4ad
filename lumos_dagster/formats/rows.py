"""A file's rows as Arrow record batches, local or on a remote file system (S3, Azure, GCS, HDFS): what a
profile reads where Spark has no reader of its own for them (no hadoop-aws jars for s3a://, no spark-avro).
It runs in Spark's Python workers, one file at a time, holding one batch in memory."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from lumos_dagster.formats.base import FsSpec, filesystem, open_random, open_stream

if TYPE_CHECKING:
    import pyarrow as pa

#: rows in each batch handed to Spark
BATCH_ROWS = 64 * 1024
#: CSV and JSON lines are parsed (their types inferred) a block of this many bytes at a time
TEXT_BLOCK = 8 << 20
ROW_FORMATS = ("parquet", "orc", "csv", "tsv", "json", "avro")


def record_batches(path: str, fmt: str, fs: FsSpec | None) -> Iterator[pa.RecordBatch]:
    """The rows of the `fmt` file at `path` (on `fs`; None: the local file system)."""
    import pyarrow as pa

    remote = filesystem(fs) if fs is not None else None
    if fmt == "parquet":
        import pyarrow.parquet as pq

        with open_random(path, remote) as fh:
            yield from pq.ParquetFile(fh).iter_batches(batch_size=BATCH_ROWS)
    elif fmt == "orc":
        import pyarrow.orc as orc

        with open_random(path, remote) as fh:
            stripes = orc.ORCFile(fh)
            for i in range(stripes.nstripes):
                yield from pa.Table.from_batches([stripes.read_stripe(i)]).to_batches(BATCH_ROWS)
    elif fmt in ("csv", "tsv"):
        import pyarrow.csv as pcsv

        parse = pcsv.ParseOptions(delimiter="\t" if fmt == "tsv" else ",")
        convert = pcsv.ConvertOptions(strings_can_be_null=True)  # an empty field is null, as Spark reads it
        read = pcsv.ReadOptions(block_size=TEXT_BLOCK)
        with open_stream(path, remote) as stream:
            yield from pcsv.open_csv(stream, read_options=read, parse_options=parse, convert_options=convert)
    elif fmt == "json":
        import pyarrow.json as pjson

        with open_stream(path, remote) as stream:
            yield from pjson.read_json(stream, read_options=pjson.ReadOptions(block_size=TEXT_BLOCK)).to_batches(
                BATCH_ROWS
            )
    elif fmt == "avro":
        import fastavro

        # fastavro reads a few bytes at a time: buffered, or each read would be a request of its own
        with open(path, "rb") if remote is None else remote.open_input_stream(path, buffer_size=TEXT_BLOCK) as fh:
            rows: list = []
            for record in fastavro.reader(fh):
                rows.append(record)
                if len(rows) == BATCH_ROWS:
                    yield pa.RecordBatch.from_pylist(rows)
                    rows = []
            if rows:
                yield pa.RecordBatch.from_pylist(rows)
    else:
        raise ValueError(f"{fmt} files have no row reader (read: {', '.join(ROW_FORMATS)})")


def conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """`batch` with `schema`'s columns in its order: a column the file lacks is null, one of another type
    is cast (a CSV file whose column held only integers, where the first file had decimals)."""
    import pyarrow as pa

    columns = []
    for f in schema:
        i = batch.schema.get_field_index(f.name)
        column = batch.column(i) if i >= 0 else pa.nulls(batch.num_rows, f.type)
        columns.append(column if column.type.equals(f.type) else column.cast(f.type, safe=False))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def batch_schema(path: str, fmt: str, fs: FsSpec | None) -> pa.Schema | None:
    """The columns of the file's first batch with rows (text and Avro: their inferred types); None when
    it holds no row."""
    return next((b.schema for b in record_batches(path, fmt, fs) if b.num_rows), None)
