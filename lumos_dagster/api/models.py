"""The API's typed results and requests: what `lumos serve` answers, what the SDK
(`lumos_dagster.client`) returns and what the in-process facade (`lumos_dagster.api.service`)
returns. The OpenAPI document (docs/openapi.json) is generated from them."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SchemaFormat = Literal["avro", "json-schema", "spark-ddl", "lumos"]
Verdict = Literal["BREAKING", "POSSIBLY BREAKING", "COMPATIBLE"]
PolicyName = Literal[
    "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE", "NONE"
]


class Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class ErrorDetail(Model):
    status: int
    code: str = Field(description="not_found | unauthorized | forbidden | invalid | too_large | timeout | …")
    message: str
    request_id: str


class ErrorBody(Model):
    error: ErrorDetail


class Health(Model):
    status: Literal["ok", "unavailable"]
    store: Literal["ok", "unavailable"]
    writes: bool
    version: str


class OwnerInfo(Model):
    id: str
    kind: str
    type: str


class FieldInfo(Model):
    path: str = Field(description="Flat path: `a.b`, `tags[]`, `attrs{}`.")
    type: str
    nullable: bool
    description: str | None = None
    native_type: str | None = None


class CostInfo(Model):
    period: str
    storage: float
    compute: float
    inherited: float
    direct: float
    total: float
    method: str
    basis: str
    currency: str


class QualityInfo(Model):
    score: float | None
    freshness: str
    age_hours: float | None
    failed: int = Field(description="Assertions that failed or errored.")


class StatsInfo(Model):
    file_count: int
    total_bytes: int
    row_count: int | None


Status = Literal["ok", "warning", "failed", "held back", "not materialized"]


class CheckInfo(Model):
    name: str = Field(description="The Dagster asset check: files_readable, schema_compatible, ….")
    passed: bool
    severity: Literal["ERROR", "WARN"]
    description: str


class DatasetSummary(Model):
    name: str
    urn: str
    platform: str
    domain: str | None = None
    format: str | None = None
    version: str | None = Field(None, description="Schema version of the latest capture; None: never materialized.")
    partition: str | None = None
    captured_at: datetime | None = None
    upstream: list[str] = Field(default_factory=list)
    status: Status | None = Field(
        None,
        description="What `lumos summary` says: the dataset's last run's checks judged again now, the store's "
        "acceptances included (Dagster's checks show an acceptance at the next run).",
    )


class DatasetPage(Model):
    total: int
    offset: int
    limit: int
    items: list[DatasetSummary]


class DatasetDetail(DatasetSummary):
    description: str | None = None
    owners: list[OwnerInfo] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    terms: list[str] = Field(default_factory=list)
    previous_version: str | None = None
    change_class: str | None = None
    policy: str
    fields: list[FieldInfo] = Field(default_factory=list)
    stats: StatsInfo | None = None
    quality: QualityInfo | None = None
    cost: CostInfo | None = None
    unreadable_files: int = 0
    checks: list[CheckInfo] = Field(default_factory=list, description="The checks behind `status`.")
    held_back: str | None = Field(None, description="When held back: which upstream failed which blocking check.")
    snapshot: dict[str, Any] | None = Field(
        None, description="The latest capture as its portable document (lumos_dagster/snapshot.schema.json)."
    )


class Change(Model):
    path: str
    kind: str
    old: str | None
    new: str | None
    backward: bool
    forward: bool
    severity: str
    against: str | None = None
    accepted: str | None = Field(None, description="Why the change is accepted, when it is.")


class Downstream(Model):
    name: str
    depth: int
    via: str
    owners: list[str]


class Compatible(Model):
    backward: bool
    forward: bool


class DatasetChanges(Model):
    name: str
    policy: str
    old_version: str | None
    new_version: str | None
    change_class: str | None
    compatible: Compatible
    changes: list[Change]
    downstream: list[Downstream]


class ChangeSet(Model):
    """What `lumos diff --format json` and `lumos gate --format json` print, and whether it passes."""

    passed: bool = Field(description="No unaccepted breaking change under the policy (the CLI's exit code 0).")
    compatible: Compatible
    breaking: int
    schemas_changed: int
    downstream_affected: list[str]
    datasets: list[DatasetChanges]
    problems: list[str] = Field(
        default_factory=list,
        description="Why a proposed schema could not be judged (it does not parse, or is past "
        "`api.limits.max_fields`): then it does not pass, and nothing else is said.",
    )


class VersionInfo(Model):
    version: str
    previous_version: str | None
    change_class: str | None
    first_partition: str | None
    first_captured: datetime
    last_partition: str | None
    captures: int
    releases: list[str]
    changes: list[Change]


class ImpactEntry(Downstream):
    reached_by: list[str] = Field(description="The breaking changes that reach it, through column lineage where known.")
    verdict: Verdict = Field(
        description="POSSIBLY BREAKING: it, or a dataset between, reads an upstream without column lineage."
    )
    reads: list[str] = Field(description="Its columns computed from changed ones: `status ← raw/orders.status`.")
    recommendation: str = Field(description="What its owners should do before the change is released.")


class Impact(Model):
    dataset: str
    version: str | None
    breaking_changes: list[Change]
    downstream: list[ImpactEntry]


class FanOut(Model):
    dataset: str
    downstream: int


class SearchHit(Model):
    dataset: str
    score: float
    matched: list[str]
    quality: float | None
    description: str | None


class CostRow(Model):
    dataset: str
    owners: list[str]
    domain: str
    platform: str
    storage: float
    compute: float
    inherited: float
    consumers: int
    basis: str
    direct: float
    total: float


class CostReport(Model):
    month: str
    currency: str
    direct_total: float
    datasets: list[CostRow]
    by_owner: dict[str, float]
    by_domain: dict[str, float]
    by_platform: dict[str, float]
    trend: dict[str, float]
    unconsumed: list[dict[str, Any]]
    savings: list[dict[str, Any]]


class CheckRequest(Model):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    format: SchemaFormat
    schema_: str | dict[str, Any] | list[Any] = Field(
        alias="schema", description="The proposed schema: DDL text, or JSON (as text or inline)."
    )
    against: str | None = Field(None, max_length=64, description="Version to compare with (default: the latest).")
    policy: PolicyName | None = Field(None, description="Default: the dataset's policy in lumos.yaml.")


class AcceptRequest(Model):
    model_config = ConfigDict(extra="forbid", frozen=True)

    version: str = Field(pattern=r"^\d+\.\d+\.\d+$", description="The version the breaking change brings.")
    path: str = Field("*", min_length=1, max_length=1024, description="Field path or glob.")
    kind: str | None = Field(None, max_length=64, description="Change kind, e.g. FIELD_REMOVED (default: any).")
    reason: str = Field(min_length=1, max_length=2000)


class Acceptance(Model):
    dataset: str
    version: str
    path: str
    kind: str | None
    reason: str
    accepted_by: str
    accepted_at: datetime


class ReleaseRequest(Model):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = Field(
        None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$", description="Default: the next after releases.prefix."
    )
    datasets: list[str] | None = Field(None, max_length=100_000, description="Default: every dataset.")


class Release(Model):
    name: str
    created_at: datetime
    versions: dict[str, str]
