"""An Iceberg table's history, schemas and layout, from its metadata (pyiceberg's `TableMetadata`),
never from its data files.

The states come from the current metadata file: the schemas with their field ids (so a rename by id
is a rename), the snapshots with the schema id each was written with and when each became current,
the partition spec and sort order. A schema change committed without a write gets its own state at
its own commit, read from the earlier metadata file the metadata log names. A state's partition
values come from its snapshot's manifests, read only for the states a run asks for; data files are
never opened, so a file a later commit removed is never read. Used for tables found in storage
(`tables/iceberg.py`) and through a catalog (`sources/iceberg.py`).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Callable, Iterable, Sequence

from pyiceberg import types as it
from pyiceberg.io import FileIO, InputFile, OutputFile
from pyiceberg.manifest import DataFile, DataFileContent, ManifestContent, ManifestEntry, ManifestFile
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema as IcebergSchema
from pyiceberg.serializers import FromInputFile
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot
from pyiceberg.transforms import IdentityTransform, VoidTransform

from lumos_dagster.floor.datatypes import (
    Array,
    DataType,
    Decimal,
    Field,
    Fixed,
    Map,
    Primitive,
    Schema,
    Struct,
    Time,
    Timestamp,
)
from lumos_dagster.floor.model import Commit, OperationalStats, TableVersion
from lumos_dagster.table_formats.base import TableState

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


def _column(schemas: Sequence[IcebergSchema], field_id: int) -> str:
    """The column's name in the first of `schemas` that has it."""
    for schema in schemas:
        try:
            if name := schema.find_column_name(field_id):
                return name
        except ValueError:
            pass
    return f"#{field_id}"  # the source column was dropped since


def _term(schemas: Sequence[IcebergSchema], source_id: int, transform) -> str:
    column = _column(schemas, source_id)
    return column if isinstance(transform, IdentityTransform) else f"{transform}({column})"


def partition_keys(spec: PartitionSpec, schemas: Sequence[IcebergSchema]) -> tuple[str, ...]:
    """The spec's fields, `region`, `bucket[4](id)`, its columns named as in the first of `schemas`."""
    return tuple(_term(schemas, pf.source_id, pf.transform) for pf in spec.fields)


def sort_order(metadata: TableMetadata, schemas: Sequence[IcebergSchema]) -> tuple[str, ...]:
    order = metadata.sort_order_by_id(metadata.default_sort_order_id)
    if order is None:
        return ()
    out = []
    for sf in order.fields:
        term = _term(schemas, sf.source_id, sf.transform)
        out.append(f"{term} {sf.direction.name} {sf.null_order.value.upper().replace('-', ' ')}")
    return tuple(out)


def _stats(summary, committed_at: datetime) -> OperationalStats:
    """Files, bytes and rows from the snapshot's summary totals, what a listing takes for the table at a
    glance: its bytes count its delete files too, and its rows are unknown once it has any. The states a
    run reads get them from their manifests instead, with the partition values
    (`IcebergHistory.with_partitions`)."""
    totals = summary.additional_properties if summary is not None else {}

    def total(key: str) -> int | None:
        value = totals.get(key)
        return int(value) if value is not None else None

    deletes = [total(k) for k in ("total-delete-files", "total-position-deletes", "total-equality-deletes")]
    return OperationalStats(
        file_count=total("total-data-files") or 0,
        total_bytes=total("total-files-size") or 0,
        row_count=total("total-records") if not any(deletes) else None,
        last_modified=committed_at,
    )


#: a partition field as its values are gathered: its source column's id and its transform
FieldKey = tuple[int, str]


def _value_keys(fields: Iterable[PartitionField], schemas: Sequence[IcebergSchema]) -> dict[FieldKey, str]:
    """Under which key each partition field's values go: its source column's name, so that the column
    shows as a partitioning key the way Delta's partition columns do (the transform is in the table
    version's `partition_spec`). Where several fields share a column (`bucket[4](id)` beside `id`), the
    identity one, else the first, takes the column's name and the others their own partition names."""
    out: dict[FieldKey, str] = {}
    for pf in sorted(fields, key=lambda f: (not isinstance(f.transform, IdentityTransform), f.field_id)):
        key, column = (pf.source_id, str(pf.transform)), _column(schemas, pf.source_id)
        if key not in out:
            out[key] = pf.name if column in out.values() else column
    return out


@dataclass
class _Live:
    """What one data manifest's live entries hold: their number, bytes and rows, and their partition values
    per field."""

    values: dict[FieldKey, set[str]]
    files: int = 0
    bytes: int = 0
    rows: int = 0


#: the `file_path` column of position delete files (a field id the Iceberg spec reserves)
_DELETE_FILE_PATH = 2147483546


def _deleted_from(delete: DataFile) -> str | None:
    """The one data file a position delete file is for, when its `file_path` bounds are equal; None for an
    equality delete file, or one whose rows may name several data files."""
    if delete.content != DataFileContent.POSITION_DELETES:
        return None
    low, high = (delete.lower_bounds or {}).get(_DELETE_FILE_PATH), (delete.upper_bounds or {}).get(_DELETE_FILE_PATH)
    return low.decode() if low is not None and low == high else None


def live_rows(rows: int, deletes: Sequence[ManifestEntry], data: Callable[[], Iterable[ManifestEntry]]) -> int | None:
    """`rows`, the records of a snapshot's live data files (`data()` gives their entries), less those its live
    delete files (`deletes`' entries) remove (Iceberg spec, "Scan Planning"); None where that takes reading
    files: an equality delete removes the rows whose values match, which only the data tells; two position
    delete files for one data file may name the same row, and one whose entry does not name the one data
    file it is for may name any rows. A position delete file names its data file by equal `file_path`
    bounds (as pyiceberg reads them), applies to it when written at or after it (its data sequence number),
    and removes as many rows as it has records (more than the file has: it names a row twice or past the
    end, which only reading it tells); one for a file removed since removes nothing. A v3 deletion vector
    names its file only in a manifest field pyiceberg does not read (`referenced_data_file`): its rows are
    unknown too."""
    by_file: dict[str, list[ManifestEntry]] = {}
    for entry in deletes:
        named = _deleted_from(entry.data_file)
        if named is None:
            return None
        by_file.setdefault(named, []).append(entry)
    if not by_file:
        return rows
    targets = {e.data_file.file_path: e for e in data() if e.data_file.file_path in by_file}
    for path, found in by_file.items():
        target = targets.get(path)
        if target is None:  # removed since: its deletes remove nothing
            continue
        # a v1 table has no sequence numbers (and no delete files): 0, as the spec reads them
        removed = [e.data_file.record_count for e in found if (e.sequence_number or 0) >= (target.sequence_number or 0)]
        if len(removed) > 1 or sum(removed) > target.data_file.record_count:
            return None
        rows -= sum(removed)
    return rows


class IcebergHistory:
    """A table's states, oldest first (`states`), from its current metadata and, for schema changes
    committed without a write, the earlier metadata files it logs; and any one state with the partition
    values of its snapshot's live data files (`with_partitions`), each manifest read once.

    A state is the table at a write (one per snapshot-log entry: an expired snapshot is gone from it, a
    rollback is current from its entry), with the schema its snapshot was written with, or at a commit
    that changed the current schema without a write. `table.version` is the Iceberg snapshot id current
    then (what `VERSION AS OF` takes), "" before the first write; a table never written is one state, at
    its last update. Partition spec and sort order are the current ones (Iceberg keeps no history of
    them), named as in the state's schema.
    """

    def __init__(self, metadata: TableMetadata, io: FileIO):
        self.metadata, self.io = metadata, io
        self._schemas = {s.schema_id: s for s in metadata.schemas}
        self._schema_of: dict[TableVersion, IcebergSchema] = {}
        self._converted: dict[int, Schema] = {}  # most states share a schema: each is converted once
        self._manifests: dict[str, _Live] = {}
        self.states = self._history()

    def commits(self) -> list[Commit]:
        """Each snapshot the metadata keeps: its operation (append, overwrite, delete, replace) and its
        summary's figures (`added-records`, `deleted-data-files`…)."""
        out = []
        for snap in sorted(self.metadata.snapshots, key=lambda s: s.timestamp_ms):
            summary = snap.summary
            operation = str(summary.operation.value) if summary is not None else "unknown"
            metrics = tuple(sorted((k, str(v)) for k, v in (summary.additional_properties if summary else {}).items()))
            out.append(Commit(str(snap.snapshot_id), _ms(snap.timestamp_ms), operation, metrics))
        return out

    def _history(self) -> list[TableState]:
        md = self.metadata
        writes = []  # (commit ms, schema id, snapshot)
        for entry in sorted(md.snapshot_log, key=lambda e: e.timestamp_ms):
            snap = md.snapshot_by_id(entry.snapshot_id)
            if snap is not None:  # v1 tables may leave a snapshot's schema id out: the current one then
                schema_id = snap.schema_id if snap.schema_id in self._schemas else md.current_schema_id
                writes.append((entry.timestamp_ms, schema_id, snap))
        states: list[TableState] = []
        last = None  # the schema of the newest state
        for i, (at, schema_id, snap) in enumerate(writes):
            states.append(self._state(schema_id, snap, at))
            last = schema_id
            following = writes[i + 1] if i + 1 < len(writes) else None
            if (following[1] if following else md.current_schema_id) != last:  # the schema changed in between
                for changed, current, changed_at in self._schema_commits(at, following[0] if following else None):
                    if changed != last:
                        states.append(self._state(changed, current, changed_at))
                        last = changed
        if last != md.current_schema_id:  # never written, or an earlier metadata file is gone
            states.append(self._state(md.current_schema_id, md.current_snapshot(), md.last_updated_ms))
        return states

    def _schema_commits(self, after: int, before: int | None) -> list[tuple[int, Snapshot, int]]:
        """The commits strictly between two writes (or after the last one): the schema id and snapshot
        current in each, and its time, from the earlier metadata files the log names. A file that is gone
        or unreadable is left out: its change arrives with the next state."""
        out = []
        for entry in self.metadata.metadata_log:
            if entry.timestamp_ms <= after or (before is not None and entry.timestamp_ms >= before):
                continue
            try:
                earlier = FromInputFile.table_metadata(self.io.new_input(entry.metadata_file))
            except (OSError, ValueError):
                continue
            snap = self.metadata.snapshot_by_id(earlier.current_snapshot_id) if earlier.current_snapshot_id else None
            if snap is not None and earlier.current_schema_id in self._schemas:
                out.append((earlier.current_schema_id, snap, entry.timestamp_ms))
        return sorted(out, key=lambda c: c[2])

    def _state(self, schema_id: int, snap: Snapshot | None, at_ms: int) -> TableState:
        md, at, schema = self.metadata, _ms(at_ms), self._schemas[schema_id]
        if schema_id not in self._converted:
            self._converted[schema_id] = to_schema(schema)
        names = (schema, md.schema())
        table = TableVersion(
            FORMAT, str(snap.snapshot_id) if snap else "", at, partition_keys(md.spec(), names), sort_order(md, names)
        )
        self._schema_of[table] = schema
        summary = snap.summary if snap else None
        return TableState(self._converted[schema_id], table, _stats(summary, at), md.properties.get("comment"))

    def with_partitions(self, state: TableState) -> TableState:
        """`state` (one of `states`) with what its snapshot's manifests say of its live data files: their
        number, bytes and rows (less the rows its delete files remove, where the manifests tell how many:
        `live_rows`), and their partition values, as pyiceberg spells them in paths (`2026-11-20-10` for an
        hour, `null`). The reference readers count the same files; the summary's bytes count delete files.
        A manifest list or manifest that cannot be read (gone since, or one pyiceberg refuses) leaves `state`
        as its metadata gives it, with the snapshot summary's totals, and says which file in its `unread`: the
        schema, partition spec and snapshot id come from the metadata file alone."""
        md = self.metadata
        snap = md.snapshot_by_id(int(state.table.version)) if state.table.version else None
        manifests: list[ManifestFile] = []
        if snap is not None:
            try:
                manifests = snap.manifests(self.io)
            except Exception as exc:  # noqa: BLE001  gone, or refused by pyiceberg: the metadata still stands
                what = f"the manifest list of snapshot {snap.snapshot_id}"
                return replace(state, unread=_unreadable(what, snap.manifest_list, exc))
        data = [m for m in manifests if m.content == ManifestContent.DATA]
        specs = [md.spec(), *(md.specs()[m.partition_spec_id] for m in data)]
        fields = [pf for spec in specs for pf in spec.fields if not isinstance(pf.transform, VoidTransform)]
        values: dict[FieldKey, set[str]] = {(pf.source_id, str(pf.transform)): set() for pf in fields}
        reading: list[ManifestFile] = []  # the manifest being read, to name it if it cannot be

        def entries(manifest: ManifestFile) -> list[ManifestEntry]:
            reading[:] = [manifest]
            return self._entries(manifest)

        try:
            live = [self._live(m, entries) for m in data]
            deletes = [e for m in manifests if m.content == ManifestContent.DELETES for e in entries(m)]
            rows = live_rows(sum(m.rows for m in live), deletes, lambda: (e for m in data for e in entries(m)))
        except Exception as exc:  # noqa: BLE001
            return replace(state, unread=_unreadable("a manifest", reading[0].manifest_path, exc))
        for one in live:
            for key, found in one.values.items():
                values[key] |= found
        keys = _value_keys(fields, (self._schema_of[state.table], md.schema()))
        partitions = {keys[key]: sorted(found) for key, found in values.items() if key in keys}
        if snap is None:  # never written
            return replace(state, stats=replace(state.stats, partition_values=partitions))
        stats = replace(state.stats, file_count=sum(m.files for m in live), total_bytes=sum(m.bytes for m in live),
                        row_count=rows, partition_values=partitions)  # fmt: skip
        return replace(state, stats=stats)

    def _live(self, manifest: ManifestFile, entries: Callable[[ManifestFile], list[ManifestEntry]]) -> _Live:
        """What a data manifest's live entries hold; a manifest never changes, so each is read once for all
        the states that hold it."""
        found = self._manifests.get(manifest.manifest_path)
        if found is None:
            spec = self.metadata.specs()[manifest.partition_spec_id]
            fields = [(i, pf, self._result_type(pf)) for i, pf in enumerate(spec.fields)
                      if not isinstance(pf.transform, VoidTransform)]  # fmt: skip
            found = _Live(values={(pf.source_id, str(pf.transform)): set() for _, pf, _ in fields})
            for entry in entries(manifest):
                found.files += 1
                found.bytes += entry.data_file.file_size_in_bytes
                found.rows += entry.data_file.record_count
                for i, pf, result in fields:
                    value = pf.transform.to_human_string(result, entry.data_file.partition[i])
                    found.values[pf.source_id, str(pf.transform)].add(value)
            self._manifests[manifest.manifest_path] = found
        return found

    def _entries(self, manifest: ManifestFile) -> list[ManifestEntry]:
        return manifest.fetch_manifest_entry(self.io, discard_deleted=True)

    def _result_type(self, pf: PartitionField) -> it.IcebergType:
        """The type of a partition field's values, from the newest schema that has its source column."""
        for schema in reversed(self.metadata.schemas):
            try:
                return pf.transform.result_type(schema.find_type(pf.source_id))
            except ValueError:
                continue
        raise ValueError(f"partition field {pf.name}: no schema has its source column {pf.source_id}")


def _unreadable(what: str, location: str, exc: Exception) -> str:
    """One line: which metadata file cannot be read, and why (most often: removed since it was written)."""
    if isinstance(exc, FileNotFoundError):
        return f"{what}, {location}, is missing"
    text = str(exc).strip().splitlines()
    return f"{what}, {location}, cannot be read: {type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


class FolderIO(FileIO):
    """A FileIO that reads the metadata files, manifest lists and manifests a table's metadata names (by
    absolute paths) from the table's own metadata folder, where a listing found them (`names`): a table
    found in storage may have been copied or moved since it was written."""

    def __init__(self, io: FileIO, folder: str, names: set[str]):
        super().__init__(io.properties)
        self.io, self.folder, self.names = io, folder, names

    def new_input(self, location: str) -> InputFile:
        name = posixpath.basename(location)
        return self.io.new_input(f"{self.folder}/{name}" if name in self.names else location)

    def new_output(self, location: str) -> OutputFile:
        return self.io.new_output(location)

    def delete(self, location: str | InputFile | OutputFile) -> None:
        self.io.delete(location)


class FsspecReadIO(FileIO):
    """Reads every location through one fsspec file system, whatever its scheme says: the one a source's
    files are read with (adlfs, gcsfs, WebHDFS), with its endpoint and credentials. pyiceberg's own FileIOs
    lack WebHDFS (they read hdfs:// only through pyarrow's libhdfs, a JVM client) and take Azure's and
    GCS's settings as properties of their own. A location the metadata names with another spelling of the
    same store (`hdfs://namenode:8020/path`, `abfss://container@account.dfs.core.windows.net/path`) is
    read at its path on that file system."""

    def __init__(self, fs):
        super().__init__({})
        self.fs = fs

    def new_input(self, location: str) -> InputFile:
        return _FsspecInput(location, self.fs)

    def new_output(self, location: str) -> OutputFile:
        raise NotImplementedError("Lumos only reads tables")

    def delete(self, location: str | InputFile | OutputFile) -> None:
        raise NotImplementedError("Lumos only reads tables")


class _FsspecInput(InputFile):
    def __init__(self, location: str, fs):
        super().__init__(location)
        self.fs = fs

    def __len__(self) -> int:
        return self.fs.size(self.location)

    def exists(self) -> bool:
        return self.fs.exists(self.location)

    def open(self, seekable: bool = True):
        return self.fs.open(self.location, "rb")
