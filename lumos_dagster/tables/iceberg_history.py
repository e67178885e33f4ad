"""An Iceberg table's history, schemas and layout, from its current metadata file (pyiceberg's
`TableMetadata`), never from its data files.

Everything comes from the metadata: the schemas with their field ids (so a rename by id is a
rename), the snapshots with the schema id each was written with and when each became current,
the partition spec and sort order. Data and manifest files are not opened, so a file a later
commit removed is never read. Used for tables found in storage (`tables/iceberg.py`) and through
a catalog (`sources/iceberg.py`).
"""

from __future__ import annotations

from datetime import datetime, timezone

from pyiceberg import types as it
from pyiceberg.schema import Schema as IcebergSchema
from pyiceberg.table.metadata import TableMetadata

from lumos_dagster.model import (
    Array,
    DataType,
    Decimal,
    Field,
    Fixed,
    Map,
    OperationalStats,
    Primitive,
    Schema,
    Struct,
    TableVersion,
    Time,
    Timestamp,
)
from lumos_dagster.tables.base import TableState

FORMAT = "iceberg"

_PRIMITIVES: dict[type, DataType] = {
    it.BooleanType: Primitive("boolean"),
    it.IntegerType: Primitive("int32"),
    it.LongType: Primitive("int64"),
    it.FloatType: Primitive("float32"),
    it.DoubleType: Primitive("float64"),
    it.DateType: Primitive("date"),
    it.StringType: Primitive("string"),
    it.UUIDType: Primitive("uuid"),
    it.BinaryType: Primitive("binary"),
    it.UnknownType: Primitive("null"),  # v3: a column no value has been written to yet
    it.TimeType: Time("us"),
    it.TimestampType: Timestamp("us"),
    it.TimestamptzType: Timestamp("us", "UTC"),
    it.TimestampNanoType: Timestamp("ns"),
    it.TimestamptzNanoType: Timestamp("ns", "UTC"),
}


def to_type(t: it.IcebergType) -> DataType:
    """The canonical type of an Iceberg type (geometry, geography and the like: `unknown`)."""
    found = _PRIMITIVES.get(type(t))
    if found is not None:
        return found
    if isinstance(t, it.DecimalType):
        return Decimal(t.precision, t.scale)
    if isinstance(t, it.FixedType):
        return Fixed(len(t))
    if isinstance(t, it.StructType):
        return Struct(tuple(to_field(f) for f in t.fields))
    if isinstance(t, it.ListType):
        return Array(to_type(t.element_type), not t.element_required)
    if isinstance(t, it.MapType):
        return Map(to_type(t.key_type), to_type(t.value_type), not t.value_required)
    return Primitive("unknown")


def to_field(f: it.NestedField) -> Field:
    # the field id is what makes a rename a rename (lumos_dagster.schema.diff)
    return Field(
        name=f.name,
        type=to_type(f.field_type),
        nullable=not f.required,
        description=f.doc or None,
        native_type=str(f.field_type),
        field_id=f.field_id,
    )


def to_schema(schema: IcebergSchema) -> Schema:
    return Schema(tuple(to_field(f) for f in schema.fields))


def _ms(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, timezone.utc)


def _column(schema: IcebergSchema, field_id: int) -> str:
    try:
        return schema.find_column_name(field_id) or f"#{field_id}"
    except ValueError:  # the source column was dropped since
        return f"#{field_id}"


def partition_keys(metadata: TableMetadata, schema: IcebergSchema) -> tuple[str, ...]:
    spec = metadata.spec()
    out = []
    for pf in spec.fields:
        column = _column(schema, pf.source_id)
        transform = str(pf.transform)
        out.append(column if transform == "identity" else f"{transform}({column})")
    return tuple(out)


def sort_order(metadata: TableMetadata, schema: IcebergSchema) -> tuple[str, ...]:
    order = metadata.sort_order_by_id(metadata.default_sort_order_id)
    if order is None:
        return ()
    out = []
    for sf in order.fields:
        column, transform = _column(schema, sf.source_id), str(sf.transform)
        term = column if transform == "identity" else f"{transform}({column})"
        out.append(f"{term} {sf.direction.name} {sf.null_order.value.upper().replace('-', ' ')}")
    return tuple(out)


def _stats(summary, committed_at: datetime, keys: tuple[str, ...]) -> OperationalStats:
    """Files, bytes and rows from the snapshot's summary totals: no manifest is read."""
    totals = summary.additional_properties if summary is not None else {}

    def total(key: str) -> int | None:
        value = totals.get(key)
        return int(value) if value is not None else None

    return OperationalStats(
        file_count=total("total-data-files") or 0,
        total_bytes=total("total-files-size") or 0,
        row_count=total("total-records"),
        last_modified=committed_at,
        # the values live in manifests, which are not read: the keys say how the table is laid out
        partition_values={k: [] for k in keys},
    )


def history(metadata: TableMetadata) -> list[TableState]:
    """Every state the metadata still knows, oldest first: one per snapshot-log entry (an expired
    snapshot is gone from it; a rollback is current from its entry), each with the schema its
    snapshot was written with; then, when the schema changed after the last snapshot, the current
    schema at the table's last update. `table.version` is the Iceberg snapshot id (what
    `VERSION AS OF` takes), "" before the first write.

    Partition spec and sort order are the current ones (Iceberg keeps no history of them).
    """
    schemas = {s.schema_id: s for s in metadata.schemas}
    current = metadata.schema()
    keys, order = partition_keys(metadata, current), sort_order(metadata, current)
    comment = metadata.properties.get("comment")
    converted: dict[int, Schema] = {}  # most snapshots share a schema: each is converted once

    def state(schema_id: int, snap, at_ms: int) -> TableState:
        at = _ms(at_ms)
        if schema_id not in converted:
            converted[schema_id] = to_schema(schemas[schema_id])
        table = TableVersion(FORMAT, str(snap.snapshot_id) if snap else "", at, keys, order)
        return TableState(converted[schema_id], table, _stats(snap.summary if snap else None, at, keys), comment)

    states: list[TableState] = []
    last_schema = None
    for entry in sorted(metadata.snapshot_log, key=lambda e: e.timestamp_ms):
        snap = metadata.snapshot_by_id(entry.snapshot_id)
        if snap is not None:  # v1 tables may leave a snapshot's schema id out: the current one then
            last_schema = snap.schema_id if snap.schema_id in schemas else metadata.current_schema_id
            states.append(state(last_schema, snap, entry.timestamp_ms))
    if last_schema != metadata.current_schema_id:
        states.append(state(metadata.current_schema_id, metadata.current_snapshot(), metadata.last_updated_ms))
    return states
