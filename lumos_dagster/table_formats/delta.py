"""Delta Lake: a folder with a `_delta_log/` is one table, read through delta-rs (`deltalake`).

Everything comes from the log, never from data files: the schema (its `metaData`), the
partition columns, and the live files with their sizes and row counts (the `add` actions a
later `remove` has not cancelled). Under column mapping every column carries a
`delta.columnMapping.id`, which becomes the field id: a renamed column is a rename. A `variant`
column (at any depth) is `variant` as the log's schema says, not the storage layout Arrow shows.

The versions are those the log lists: a commit file, or a checkpoint whose commits were cleaned
up (a log of only a checkpoint is the table at that version). A version delta-rs cannot replay
(an old commit left behind after an earlier one was cleaned up, a Delta Live Tables version 0
without a schema) is refused alone, naming the file at fault (the run skips it while a later one reads).

A version's commit time is what Delta readers use for time travel: the commit file's
modification time (a checkpoint's, when only the checkpoint is left), made to rise with the
version as Delta does (a commit not later than the one before counts 1 ms after it); from the
version that enabled in-commit timestamps on, its `commitInfo.inCommitTimestamp` (PROTOCOL.md,
"In-Commit Timestamps").
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Sequence
from urllib.parse import urlsplit

from lumos_dagster.floor.datatypes import Array, DataType, Field, Map, Primitive, Schema, Struct
from lumos_dagster.floor.extras import needs
from lumos_dagster.floor.model import Commit, OperationalStats, TableVersion
from lumos_dagster.formats.base import FsSpec, fsspec_filesystem
from lumos_dagster.table_formats.base import ListedFile, TableState, UnreadableVersion, table_url

if TYPE_CHECKING:
    with needs("delta", "reading a Delta table"):
        with needs("delta", "reading a Delta table"):
            from deltalake import DeltaTable

LOG = "_delta_log"
_COMMIT = re.compile(rf"{LOG}/(\d{{20}})\.json")
#: classic `N.checkpoint.parquet`, multi-part `N.checkpoint.i.n.parquet`, V2 `N.checkpoint.<uuid>.parquet|json`
_CHECKPOINT = re.compile(rf"{LOG}/(\d{{20}})\.checkpoint(?:\.[^/]+)?\.(?:parquet|json)")
#: how a null partition value is spelled, as Hive and Delta spell it in paths
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
_ONE_MS = timedelta(milliseconds=1)


FORMAT = "delta"


class DeltaFormat:
    type = FORMAT
    platform = "delta-lake"  # DataHub's platform for Delta tables, wherever they are stored
    hidden: tuple[str, ...] = (LOG,)

    def root_of(self, path: str) -> str | None:
        parts = path.split("/")
        if LOG not in parts[:-1]:
            return None
        return "/".join(parts[: parts.index(LOG)])

    def open(self, uri: str, fs: FsSpec | None, listed: Sequence[ListedFile]) -> DeltaLog:
        return DeltaLog(uri, fs, listed)


DELTA = DeltaFormat()


def storage_options(fs: FsSpec | None) -> dict[str, str] | None:
    """delta-rs' options for the remote file system `fs`, with the credentials its files are read with:
    S3's from the AWS chain (delta-rs' own), Azure's and GCS's as adlfs and gcsfs found them."""
    if fs is None:
        return None
    kind, endpoint, region, scheme = fs
    if kind == "webhdfs":  # OpenDAL's WebHDFS service, which takes the NameNode from its options, not the URL
        user = {"opendal.user_name": region} if region else {}
        return {"opendal.endpoint": f"{scheme}://{endpoint}", **user}
    if kind == "abfs":
        return _azure_options(fsspec_filesystem(fs))
    if kind == "gcs":
        return _gcs_options(fsspec_filesystem(fs))
    if kind != "s3":
        raise ValueError(f"unknown file system {kind!r}")
    options = {"AWS_ALLOW_HTTP": "true"} if scheme == "http" else {}
    if endpoint:
        options["AWS_ENDPOINT_URL"] = f"{scheme or 'https'}://{endpoint}"
    if region:
        options["AWS_REGION"] = region
    return options


#: the OAuth scope of Azure Storage, for a token from the credential adlfs holds
_AZURE_STORAGE_SCOPE = "https://storage.azure.com/.default"


def _azure_options(fs) -> dict[str, str]:
    """The account adlfs reaches (`fs`), as delta-rs' object store reaches it: adlfs' endpoint (the
    connection string's, or the account's) and the credential adlfs found in its chain, a shared key, a
    SAS, a token of its Azure credential (service principal or DefaultAzureCredential), or none at all
    (a public container)."""
    client = fs.service_client
    url = urlsplit(client.url)
    options = {"azure_storage_account_name": client.account_name,
               "azure_storage_endpoint": f"{url.scheme}://{url.netloc}{url.path}".rstrip("/")}  # fmt: skip
    if url.scheme == "http":  # an emulator (Azurite) or a private endpoint without TLS
        options["allow_http"] = "true"
    key = getattr(client.credential, "account_key", None)
    if key:
        options["azure_storage_account_key"] = key
    elif url.query:
        options["azure_storage_sas_key"] = url.query
    elif fs.sync_credential is not None:
        options["azure_storage_token"] = fs.sync_credential.get_token(_AZURE_STORAGE_SCOPE).token
    else:
        options["azure_skip_signature"] = "true"
    return options


def _gcs_options(fs) -> dict[str, str]:
    """The endpoint gcsfs (`fs`) reads the bucket at (the source's `endpoint_url`, else `STORAGE_EMULATOR_HOST`,
    else Google's), and no signature where gcsfs found no credentials and reads anonymously; else delta-rs'
    object store finds the application-default credentials gcsfs found."""
    endpoint = fs._location.rstrip("/")
    options = {"google_base_url": endpoint}
    if endpoint.startswith("http://"):  # an emulator
        options["allow_http"] = "true"
    if fs.credentials.credentials is None:
        options["google_skip_signature"] = "true"
    return options


class DeltaLog:
    """One Delta table, loaded once and moved between versions (delta-rs replays the log)."""

    def __init__(self, uri: str, fs: FsSpec | None, listed: Sequence[ListedFile]):
        with needs("delta", "reading a Delta table"):
            from deltalake import DeltaTable

        self.uri, self.fs = uri, fs
        self._open = functools.partial(DeltaTable, table_url(uri, fs), storage_options=storage_options(fs))
        self.table: DeltaTable = self._open()
        self.latest = self.table.version()
        self.commit_files = {int(m.group(1)): f for f in listed if (m := _COMMIT.fullmatch(f.path))}
        self.checkpoints = {int(m.group(1)): f for f in listed if (m := _CHECKPOINT.fullmatch(f.path))}

    def versions(self) -> list[TableVersion]:
        files = {**self.checkpoints, **self.commit_files}  # a version's commit file dates it, if it is still there
        times = {v: datetime.fromtimestamp(f.mtime, timezone.utc) for v, f in files.items() if v <= self.latest}
        configuration = self.table.metadata().configuration
        if configuration.get("delta.enableInCommitTimestamps") == "true":
            times.update(self._in_commit_times(configuration.get("delta.inCommitTimestampEnablementVersion")))
        out: list[TableVersion] = []
        previous: datetime | None = None
        for v in sorted(times):
            at = times[v]
            if previous is not None and at <= previous:
                at = previous + _ONE_MS
            out.append(TableVersion(FORMAT, str(v), at))
            previous = at
        return out

    def commits(self) -> list[Commit]:
        """Each version's commit as its `commitInfo` gives it (DataHub's delta-lake source reads the same
        through delta-rs' history): its operation and, flattened as that source flattens them
        (`operationMetrics_num_added_rows`), its parameters and metrics; dated as `versions` dates it."""
        at = {int(v.version): v.committed_at for v in self.versions() if v.committed_at is not None}
        out = []
        for version, info in self.commit_infos.items():
            if version in at:
                metrics = tuple(sorted(_flat(info, skip=("timestamp", "operation", "version"))))
                out.append(Commit(str(version), at[version], str(info.get("operation") or "UNKNOWN"), metrics))
        return sorted(out, key=lambda c: int(c.version))

    def _in_commit_times(self, enabled_at: str | None) -> dict[int, datetime]:
        """The in-commit timestamps of the versions from `enabled_at` on (None: since the table was
        created); older versions have none."""
        first = int(enabled_at) if enabled_at else 0
        return {v: datetime.fromtimestamp(info["inCommitTimestamp"] / 1000, timezone.utc)
                for v, info in self.commit_infos.items()
                if v >= first and isinstance(info.get("inCommitTimestamp"), int)}  # fmt: skip

    @functools.cached_property
    def commit_infos(self) -> dict[int, dict]:
        """Each listed commit's `commitInfo`, read from its commit file: what delta-rs' history gives,
        without its own listing of the log (which stalled 180 s a table against S3, GCS and Azure
        servers, and fails where its kernel cannot replay a commit). A commit that cannot be read, or
        carries none, has none."""
        fs = fsspec_filesystem(self.fs) if self.fs is not None else None
        out = {}
        for version, listed in sorted(self.commit_files.items()):
            if version > self.latest:
                continue
            path = f"{self.uri}/{listed.path}"
            try:
                with fs.open(path, "rb") if fs is not None else open(path, "rb") as fh:
                    # the protocol puts it first where in-commit timestamps are on; writers mostly do
                    info = next((a["commitInfo"] for a in map(json.loads, fh) if "commitInfo" in a), None)
            except (OSError, ValueError):
                continue
            if isinstance(info, dict):
                out[version] = info
        return out

    def state(self, version: TableVersion) -> TableState:
        import pyarrow as pa  # here, as delta-rs is: discovery only claims a table's folder

        from lumos_dagster.formats.arrow import from_arrow_schema

        dt, number = self.table, int(version.version)
        if dt.version() != number:
            try:
                dt.load_as_version(number)
            except Exception:  # noqa: BLE001  moved from another version, delta-rs may fail where a fresh load reads
                try:
                    self.table = dt = self._open(version=number)
                except Exception as exc:  # delta-rs cannot replay this version: it alone is refused
                    raise UnreadableVersion(self._unreadable(number, exc)) from exc
        delta_schema = dt.schema()
        doc = json.loads(delta_schema.to_json())
        arrow = from_arrow_schema(pa.schema(delta_schema.to_arrow()), _native_types(doc).get)
        schema = Schema(_with_variants(arrow.fields, doc["fields"]))
        metadata = dt.metadata()
        files = pa.table(dt.get_add_actions(flatten=True))
        records = files.column("num_records").to_pylist() if "num_records" in files.column_names else [None]
        rows, unread = sum(records) if None not in records else None, None
        try:
            rows = rows - _deleted_rows(dt) if rows is not None else None
        except Exception as exc:  # noqa: BLE001  a deletion vector gone or refused leaves the rows unknown
            rows, text = None, str(exc).strip().splitlines()
            unread = f"its deletion vectors cannot be read: {text[0] if text else type(exc).__name__}"
        partitions = {}
        for col in metadata.partition_columns:
            values = files.column(f"partition.{col}").to_pylist() if files.num_rows else []
            partitions[col] = sorted({NULL_PARTITION if v is None else str(v) for v in values})
        return TableState(
            schema=schema,
            table=replace(version, partition_spec=tuple(metadata.partition_columns)),
            stats=OperationalStats(
                file_count=files.num_rows,
                total_bytes=sum(files.column("size_bytes").to_pylist()),
                row_count=rows,  # a file written without statistics leaves the count unknown, not smaller
                last_modified=version.committed_at,
                partition_values=partitions,
            ),
            description=metadata.description or None,
            unread=unread,
        )

    def _unreadable(self, version: int, exc: Exception) -> str:
        """Why delta-rs cannot read `version`, naming the file: the first commit that replaying it
        needs (from the newest checkpoint at or before it, or from version 0) and the log no longer
        holds, or else the version's own file and delta-rs' reason."""
        base = max((c for c in self.checkpoints if c <= version), default=-1)
        missing = next((v for v in range(base + 1, version + 1) if v not in self.commit_files), None)
        if missing is not None:
            return f"{LOG}/{missing:020d}.json, which it is replayed from, is missing"
        own = self.commit_files.get(version) or self.checkpoints.get(version)
        text = str(exc).strip().splitlines()
        return f"{own.path if own else LOG}: {text[0] if text else type(exc).__name__}"


def _flat(entry: dict, skip: tuple[str, ...] = (), prefix: str = "") -> list[tuple[str, str]]:
    """A history entry's values as text, nested ones as `outer_inner`; nulls left out."""
    out = []
    for key, value in entry.items():
        if key in skip or value is None:
            continue
        if isinstance(value, dict):
            out += _flat(value, prefix=f"{prefix}{key}_")
        else:
            out.append((f"{prefix}{key}", str(value)))
    return out


def _deleted_rows(dt: DeltaTable) -> int:
    """The rows the live files' deletion vectors delete, which their `numRecords` still count (PROTOCOL.md,
    "Deletion Vectors"). delta-rs gives no add action's `deletionVector.cardinality`, only each vector
    itself (inline in the log, or its small file beside the data: never a data file), as a keep-mask over
    the file's rows: the deleted rows are its `False`s."""
    if "deletionVectors" not in (dt.protocol().reader_features or ()):
        return 0
    import pyarrow as pa
    import pyarrow.compute as pc

    masks = pa.RecordBatchReader.from_stream(dt.deletion_vectors()).read_all().column("selection_vector")
    flags = pc.list_flatten(masks)  # a flag per row the masks cover, True where it is kept
    return len(flags) - (pc.sum(flags).as_py() or 0)


_VARIANT = Primitive("variant")


def _with_variants(fields: tuple[Field, ...], delta_fields: list[dict]) -> tuple[Field, ...]:
    """`fields`, converted from delta-rs' Arrow schema, with the types Delta's own schema (`delta_fields`,
    the same fields) gives as `variant`: Arrow has no variant, only its storage layout
    `struct<metadata: binary, value: binary>`, at any depth."""
    return tuple(replace(f, type=_variant(f.type, d["type"])) for f, d in zip(fields, delta_fields, strict=True))


def _variant(t: DataType, delta: Any) -> DataType:
    if delta == "variant":
        return _VARIANT
    kind = None if isinstance(delta, str) else delta["type"]
    if kind == "struct" and isinstance(t, Struct):
        return Struct(_with_variants(t.fields, delta["fields"]))
    if kind == "array" and isinstance(t, Array):
        return replace(t, element=_variant(t.element, delta["elementType"]))
    if kind == "map" and isinstance(t, Map):
        return replace(t, key=_variant(t.key, delta["keyType"]), value=_variant(t.value, delta["valueType"]))
    return t


def _native_types(schema: dict) -> dict[str, str]:
    """Field path → Delta's own spelling of its type (`long`, `decimal(10,2)`, `array<string>`), from
    Delta's schema (`schemaString` parsed), paths as the Arrow conversion walks them (list and map
    elements add no segment)."""
    out: dict[str, str] = {}

    def spell(t: Any, path: str) -> str:
        if isinstance(t, str):
            return t
        kind = t["type"]
        if kind == "struct":
            inner = []
            for f in t["fields"]:
                own = spell(f["type"], f"{path}{f['name']}.")
                out[f"{path}{f['name']}"] = own
                inner.append(f"{f['name']}:{own}")
            return f"struct<{','.join(inner)}>"
        if kind == "array":
            return f"array<{spell(t['elementType'], path)}>"
        if kind == "map":
            return f"map<{spell(t['keyType'], path)},{spell(t['valueType'], path)}>"
        return str(kind)

    spell(schema, "")
    return out
