"""The canonical, portable metadata model: what Lumos knows of a dataset (`Snapshot` and its parts).

Every source maps into these types and every catalog adapter maps out of them, so metadata can leave
any catalog. The schema's own types are in `datatypes`, the JSON document in `snapshot_json`. Pure
Python: no Dagster, no Spark, no DataHub.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from fnmatch import fnmatchcase
from typing import Any

from lumos_dagster.floor.datatypes import Schema

# ------------------------------------------------------------ dataset level

OWNER_KINDS = ("user", "group")
OWNERSHIP_TYPES = ("DATAOWNER", "TECHNICAL_OWNER", "BUSINESS_OWNER", "DATA_STEWARD", "NONE")


def dataset_urn(platform: str, name: str) -> str:
    """Lumos' own stable identity of a dataset: platform + name."""
    return f"urn:lumos:dataset:{platform}:{name}"


@dataclass(frozen=True)
class DatasetRef:
    platform: str
    name: str
    location: str
    format: str | None = None
    instance: str | None = None  # the platform instance its source names (DataHub's `platform_instance`)

    @property
    def urn(self) -> str:
        return dataset_urn(self.platform, self.name)


@dataclass(frozen=True)
class DatasetRecord:
    """A dataset in the registry: what discovery found, enough to rebuild its asset."""

    name: str
    platform: str
    source: str
    location: str
    format: str | None
    domain: str | None = None
    partition_keys: tuple[str, ...] = ()
    time_partition_key: str | None = None
    time_format: str | None = None
    file_count: int = 0
    total_bytes: int = 0
    upstream: tuple[str, ...] = ()  # lineage the source itself knows (a view's tables)
    first_partition: str | None = None  # the earliest time partition's date (ISO): where partitions start

    @property
    def urn(self) -> str:
        return dataset_urn(self.platform, self.name)

    def info(self) -> dict:
        keys = ("partition_keys", "time_partition_key", "time_format", "file_count", "total_bytes", "upstream",
                "first_partition")  # fmt: skip
        out = {k: v for k, v in asdict(self).items() if k in keys}
        out["partition_keys"] = list(self.partition_keys)
        out["upstream"] = list(self.upstream)
        return out


@dataclass(frozen=True)
class Owner:
    id: str
    kind: str = "user"
    type: str = "DATAOWNER"


@dataclass(frozen=True)
class ColumnMapping:
    """A column of the snapshot's dataset computed from a column of the edge's upstream."""

    downstream: str
    upstream: str


@dataclass(frozen=True)
class JobRef:
    """The code behind a lineage edge: a SQL file, a dbt model."""

    orchestrator: str  # sql | dbt
    flow: str  # the folder or dbt project it belongs to
    name: str  # the file path or the dbt unique_id


@dataclass(frozen=True)
class LineageEdge:
    """`upstream` feeds the snapshot's dataset, column by column when `columns` says how."""

    upstream: DatasetRef
    columns: tuple[ColumnMapping, ...] = ()
    job: JobRef | None = None


@dataclass(frozen=True)
class AssertionResult:
    """A data-quality check on the dataset, as a test tool (dbt, Great Expectations) reported it."""

    name: str
    status: str  # pass | fail | warn | error | skipped
    dimension: str  # completeness | uniqueness | validity | accuracy | consistency | freshness
    column: str | None = None
    source: str = ""
    message: str | None = None
    observed_at: str | None = None


@dataclass(frozen=True)
class Quality:
    score: float | None  # 0..1 (see lumos_dagster.governance.quality.quality_score)
    freshness: str  # fresh | stale | unknown (against the dataset's SLA)
    age_hours: float | None
    assertions: tuple[AssertionResult, ...] = ()


@dataclass(frozen=True)
class ColumnProfile:
    path: str
    null_fraction: float | None
    distinct: int | None  # an estimate (HyperLogLog)
    min: str | None = None
    max: str | None = None


@dataclass(frozen=True)
class PartialRead:
    """What a profile read of its partition when `profile.max_bytes` stopped it short: the files (in path
    order) that fit within the cap, of all the partition's readable files."""

    files_read: int
    files: int
    bytes_read: int
    bytes: int

    def __str__(self) -> str:
        return f"{self.files_read} of {self.files} files ({self.bytes_read:,} of {self.bytes:,} bytes)"


@dataclass(frozen=True)
class Profile:
    """Measured on a partition's data (Spark, or the database's own SQL), from a sample when
    `sample_fraction` < 1, from its first files only when `partial` says so: then `row_count` counts
    what was read, not the partition."""

    row_count: int
    sample_fraction: float
    columns: tuple[ColumnProfile, ...] = ()
    partial: PartialRead | None = None

    @property
    def whole(self) -> bool:
        """Whether `row_count` is the partition's: all of its rows were read."""
        return self.sample_fraction >= 1 and self.partial is None

    @property
    def completeness(self) -> float | None:
        known = [c.null_fraction for c in self.columns if c.null_fraction is not None]
        return 1 - sum(known) / len(known) if known else None


@dataclass
class OperationalStats:
    file_count: int = 0
    total_bytes: int = 0
    row_count: int | None = None
    last_modified: datetime | None = None
    partition_values: dict[str, list[str]] = field(default_factory=dict)
    # usage counters a database keeps (scans, rows inserted…), for staleness: "not modified and not queried"
    usage: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FileError:
    path: str
    reason: str


@dataclass(frozen=True)
class ConflictVariant:
    type: str
    files: tuple[str, ...]  # a sample, at most MAX_CONFLICT_FILES
    file_count: int


@dataclass(frozen=True)
class SchemaConflict:
    path: str
    variants: tuple[ConflictVariant, ...]
    resolution: str


BREAKING, NON_BREAKING, INFORMATIONAL = "BREAKING", "NON_BREAKING", "INFORMATIONAL"
#: a dataset's first version, and the compatibility policies its later ones are judged under
#: (lumos_dagster.schema.versioning applies them)
FIRST_VERSION = "1.0.0"
DEFAULT_POLICY = "FULL"
BASE_POLICIES = ("NONE", "BACKWARD", "FORWARD", "FULL")
POLICIES = BASE_POLICIES + tuple(f"{p}_TRANSITIVE" for p in BASE_POLICIES[1:])


class DirectCost:
    """What a dataset costs of itself a month: storage + compute (of every type with those fields)."""

    storage: float
    compute: float

    @property
    def direct(self) -> float:
        return self.storage + self.compute


class RolledUpCost(DirectCost):
    """…and in all, with what it inherits from its upstreams."""

    inherited: float

    @property
    def total(self) -> float:
        return self.direct + self.inherited


@dataclass(frozen=True)
class Cost(RolledUpCost):
    """Monthly cost of a dataset, as its snapshot records it."""

    period: str  # the month, YYYY-MM
    storage: float
    compute: float
    inherited: float
    method: str  # how upstream cost was attributed (lumos_dagster.cost.attribution.METHODS)
    basis: str = "list"  # list prices | bill (FOCUS export) | mixed
    currency: str = "USD"


@dataclass(frozen=True)
class SchemaChange:
    """One difference between two snapshots of a dataset.

    `backward`: a reader with the new schema can read data written with the old one.
    `forward`: a reader with the old schema can read data written with the new one.
    `severity` is what the dataset's compatibility policy makes of the two.
    """

    path: str  # flat field path (`a.b`, `tags[]`, `attrs{}`); '' for the dataset itself
    kind: str
    old: str | None
    new: str | None
    backward: bool
    forward: bool
    severity: str = NON_BREAKING
    against: str | None = None  # the earlier version compared with, when not the previous one


@dataclass(frozen=True)
class Commit:
    """One commit of a table format's history: a Delta version, an Iceberg snapshot."""

    version: str
    committed_at: datetime
    operation: str  # the format's own word: WRITE, MERGE, DELETE (Delta); append, overwrite (Iceberg)
    metrics: tuple[tuple[str, str], ...] = ()  # what the format records of it (rows added, files removed…)


@dataclass(frozen=True)
class TableVersion:
    """The commit of a table format (Iceberg, Delta) that a snapshot saw, and the table's layout then."""

    format: str  # iceberg | delta
    version: str  # the format's own: an Iceberg snapshot id, a Delta version number
    committed_at: datetime | None
    partition_spec: tuple[str, ...] = ()  # `region`, `day(ts)`: transform(column), identity bare
    sort_order: tuple[str, ...] = ()  # `ts DESC NULLS LAST`
    commits: tuple[Commit, ...] = ()  # the table's commits in the snapshot's window, oldest first


#: Lumos' checks, by name (lumos_dagster.governance.checks judges them)
READABLE_CHECK = "files_readable"
COMPATIBLE_CHECK = "schema_compatible"
COMPLETE_CHECK = "metadata_complete"
QUALITY_CHECK = "data_quality"


@dataclass(frozen=True)
class CheckResult:
    """One of Lumos' checks (files readable, schema compatible, metadata complete, data quality) as
    judged when the store kept the snapshot: what catalogs show as the check's result."""

    name: str
    passed: bool
    severity: str  # ERROR | WARN
    description: str
    affected: tuple[str, ...] = ()  # the datasets downstream of a breaking change (impact)


@dataclass(frozen=True)
class TableTotals:
    """The whole table's figures, for a snapshot of one of its partitions: its files and bytes as the
    run listed them, and where its partitions start."""

    file_count: int
    total_bytes: int
    first_partition: str | None = None  # the earliest partition's key (`2026-11-01`)


@dataclass
class Snapshot:
    """Everything Lumos knows about one dataset at one partition, captured at one time."""

    dataset: DatasetRef
    partition_key: str | None
    captured_at: datetime
    schema: Schema = field(default_factory=Schema)
    stats: OperationalStats = field(default_factory=OperationalStats)
    description: str | None = None
    domain: str | None = None
    owners: tuple[Owner, ...] = ()
    tags: tuple[str, ...] = ()
    upstream: tuple[LineageEdge, ...] = ()
    version: str | None = None
    errors: tuple[FileError, ...] = ()
    conflicts: tuple[SchemaConflict, ...] = ()
    # how `version` came to be: the changes from `previous_version`, judged under `policy`
    previous_version: str | None = None
    changes: tuple[SchemaChange, ...] = ()
    change_class: str | None = None  # new | major | minor | patch
    policy: str | None = None
    # a tombstone: the dataset vanished from its source and is soft-deleted in catalogs
    removed: bool = False
    cost: Cost | None = None
    # governance
    terms: tuple[str, ...] = ()  # glossary terms of the dataset
    sla: str | None = None  # how fresh it must be, e.g. "6h"
    quality: Quality | None = None
    profile: Profile | None = None
    table: TableVersion | None = None  # a table format's commit; None for plain files and databases
    checks: tuple[CheckResult, ...] = ()  # Lumos' checks, as judged when the store kept it
    totals: TableTotals | None = None  # the whole table's, for a partition of it; None: the partition is the table

    @property
    def fingerprint(self) -> str:
        return self.schema.fingerprint()

    @property
    def readable(self) -> bool:
        """At least one file gave a schema (a dataset can be partly unreadable)."""
        return bool(self.schema.fields)


#: dataset name → partition key → snapshot: what the steps of a snapshot run pass on
Snapshots = dict[str, dict["str | None", Snapshot]]


@dataclass(frozen=True)
class Acceptance:
    """A breaking change accepted for one version of a dataset (the API records them in the store)."""

    dataset: str
    version: str
    path: str  # field path or glob; "*" for any
    kind: str | None  # change kind, e.g. FIELD_REMOVED; None for any
    reason: str
    accepted_by: str
    accepted_at: datetime

    def matches(self, dataset: str, version: str | None, change: SchemaChange) -> bool:
        return (
            dataset == self.dataset
            and version == self.version
            and fnmatchcase(change.path, self.path)
            and self.kind in (None, change.kind)
        )
