"""lumos.yaml: a documented, validated configuration file.

Strings may use `${VAR}` or `${VAR:-default}` (environment interpolation; `$$` is a
literal `$`), filled in when the file loads — except in credentials (`store.url`, a
source's `dsn` or `uri`: fields typed `Secret`), which keep their text until they are used
(`lumos_dagster.floor.plugins.expand_secrets`). Relative paths are relative to the directory of
the file. Every error names the file and the key, e.g. `lumos.yaml: sources[0].root: Field
required`. The kinds of `sources` and `catalog` entries come from their registries, plug-ins
included.
"""

from __future__ import annotations

import difflib
import os
import zoneinfo
from collections import Counter
from datetime import date
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Iterator, Literal, Union

import yaml
from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError, field_validator, model_validator
from pydantic_core import ErrorDetails

from lumos_dagster.floor.api_config import ApiConfig
from lumos_dagster.floor.errors import ConfigError
from lumos_dagster.floor.graphs import first_cycle
from lumos_dagster.floor.masking import AMBIGUOUS_PASSWORD, ambiguous_password
from lumos_dagster.floor.model import DEFAULT_POLICY, OWNERSHIP_TYPES, POLICIES
from lumos_dagster.floor.plugins import (
    CATALOGS,
    SOURCES,
    ConfigModel,
    Plugin,
    PluginRegistry,
    Secret,
    expand_secrets,
    resolve_path,
    secret_fields,
)

DEFAULT_CONFIG = "lumos.yaml"
CONFIG_ENV = "LUMOS_CONFIG"

Policy = Literal[POLICIES]  # type: ignore[valid-type]
Cadence = Literal["hourly", "daily", "weekly", "monthly"]
OwnershipType = Literal[OWNERSHIP_TYPES]  # type: ignore[valid-type]


def _known_zone(value: str) -> str:
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {value!r} (use an IANA name such as Europe/Paris)") from None
    return value


class OwnerConfig(ConfigModel):
    id: str = Field(min_length=1, description="User or group id, e.g. `alice@acme.com` or `data-eng`.")
    kind: Literal["user", "group"] = Field("user", description="Whether `id` is a user or a group.")
    type: OwnershipType = Field("DATAOWNER", description="DataHub ownership type.")

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, value: Any) -> Any:
        # shorthand: "alice@acme.com" or "group:data-eng"
        if isinstance(value, str):
            kind, sep, rest = value.partition(":")
            return {"id": rest, "kind": kind} if sep and kind in ("user", "group") else {"id": value}
        return value


def _tagged(default: str) -> Discriminator:
    """Discriminate on `type:`, which may be left out for the default kind."""
    return Discriminator(lambda v: v.get("type", default) if isinstance(v, dict) else getattr(v, "type", None))


def _union(registry: PluginRegistry[Plugin], default: str) -> Any:
    """The entries of every registered type, told apart by `type:`."""
    kinds = tuple(Annotated[p.config, Tag(p.type)] for p in registry)
    return Annotated[Union[kinds], _tagged(default)]  # type: ignore[valid-type]


DEFAULT_SOURCE = "local"
DEFAULT_CATALOG = "datahub-lite"
if TYPE_CHECKING:  # the union is of the types registered when this module loads, plug-ins included
    Source = Any
    Catalog = Any
else:
    Source = _union(SOURCES, DEFAULT_SOURCE)
    Catalog = _union(CATALOGS, DEFAULT_CATALOG)


def _cron(value: str) -> str:
    from croniter import croniter

    if not croniter.is_valid(value):
        raise ValueError(f"not a cron expression: {value!r}")
    return value


class ScheduleDecl(ConfigModel):
    """When a dataset's data lands: the producing job's cron, in its time zone, plus how long
    until the data can be read."""

    cron: str = Field(description="Cron expression of the producing job, e.g. `0 6 * * *`.")
    timezone: str = Field("UTC", description="IANA time zone the cron runs in.")
    lag: str = Field("0", description="Availability lag after each tick, e.g. `+6h`, `90m`.")

    @field_validator("cron")
    @classmethod
    def _cron(cls, value: str) -> str:
        return _cron(value)

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        return _known_zone(value)

    @field_validator("lag")
    @classmethod
    def _lag(cls, value: str) -> str:
        from lumos_dagster.floor.windows import parse_lag

        parse_lag(value)
        return value


class ComputeDecl(ConfigModel):
    """What producing the dataset costs: a quantity of a priced unit per month."""

    unit: Literal["usd", "core_hour", "dbu", "credit"] = Field("usd", description="Priced by cost.compute_rates.")
    per_month: float | None = Field(None, ge=0, description="Units per month.")
    per_run: float | None = Field(None, ge=0, description="Units per run (with runs_per_month).")
    runs_per_month: float | None = Field(None, ge=0)
    dagster_asset: str | None = Field(
        None, description="Asset key (a/b) of the job that produces it: its run times in Dagster measure the hours."
    )
    cores: float = Field(1, gt=0, description="Cores (or DBUs per hour) the producing job uses, with dagster_asset.")


class DatasetCostDecl(ConfigModel):
    storage_class: str | None = Field(None, description="Key of cost.storage_prices (default: by platform).")
    compute: ComputeDecl | None = None
    weights: dict[str, float] = Field(
        default_factory=dict, description="Upstream name → share of it this dataset reads (lineage_weighted)."
    )


#: what a profile reads of a partition at most unless `profile.max_bytes` says otherwise
PROFILE_MAX_BYTES = 1 << 30


class ProfileDecl(ConfigModel):
    """Profiling: row count and per-column nulls, distinct estimate, min/max — files on Spark, database
    tables with the database's own SQL."""

    enabled: bool = True
    sample: float = Field(1.0, gt=0, le=1, description="Fraction of rows profiled (1: all).")
    max_bytes: int | None = Field(
        PROFILE_MAX_BYTES,
        ge=1,
        description="Bytes of a partition read at most (files beyond it are not read: the profile is partial; a "
        "table is sampled down to it); null: no cap.",
    )

    @model_validator(mode="before")
    @classmethod
    def _from_bool(cls, value: Any) -> Any:
        return {"enabled": value} if isinstance(value, bool) else value


class DatasetDecl(ConfigModel):
    """Declarations enrich or override what discovery found (matched by name)."""

    name: str = Field(min_length=1, description="Dataset name as discovered, e.g. `sales/orders`.")
    description: str | None = None
    domain: str | None = None
    owners: list[OwnerConfig] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    upstream: list[str] = Field(default_factory=list, description="Names of the datasets this one is built from.")
    cadence: Cadence | None = Field(None, description="Partition cadence (default: partitions.cadence).")
    policy: Policy | None = Field(None, description="Compatibility policy (default: compatibility.policy).")
    accept_major: int | None = Field(
        None, ge=1, description="Breaking changes are accepted while they bring the version up to this major."
    )
    schedule: ScheduleDecl | None = Field(None, description="When the data lands: refresh then (and after releases).")
    cost: DatasetCostDecl | None = None
    sla: str | None = Field(None, description="How fresh the data must be, e.g. `6h`, `2d` (drives freshness).")
    profile: ProfileDecl | None = Field(
        None, description="Profile the data: `true` or {sample: 0.1, max_bytes: 1073741824}."
    )
    keys: list[str] = Field(
        default_factory=list, description="The primary key's columns (flat paths) where the files cannot say."
    )

    @field_validator("sla")
    @classmethod
    def _sla(cls, value: str | None) -> str | None:
        from lumos_dagster.floor.windows import canonical_duration

        return None if value is None else canonical_duration(value)


class AllowRule(ConfigModel):
    """A breaking change that is accepted: it still bumps the major version, but does not fail the gate."""

    dataset: str = Field(description="Dataset name or glob, e.g. `sales/*`.")
    path: str = Field("*", description="Field path or glob.")
    kind: str | None = Field(None, description="Change kind, e.g. FIELD_REMOVED (default: any).")
    reason: str = Field(description="Why it is accepted: shown next to the change in reports.")


class CompatibilityConfig(ConfigModel):
    policy: Policy = Field(DEFAULT_POLICY, description="Policy of datasets that declare none.")
    allow: list[AllowRule] = Field(default_factory=list, description="Accepted breaking changes.")


class BillingRule(ConfigModel):
    """How a FOCUS charge maps to datasets: by a tag naming the dataset, or by resource id."""

    tag: str | None = Field(None, description="A charge whose tag KEY holds a dataset name belongs to it.")
    resource: str | None = Field(None, description="Glob on ResourceId, e.g. arn:aws:s3:::acme-lake*.")
    datasets: str = Field("*", description="With `resource`: glob of the datasets sharing the charge, by bytes.")

    @model_validator(mode="after")
    def _one_kind(self) -> "BillingRule":
        if (self.tag is None) == (self.resource is None):
            raise ValueError("give exactly one of tag or resource")
        return self


class CostConfig(ConfigModel):
    currency: str = "USD"
    method: Literal["equal_split", "lineage_weighted", "last_touch"] = Field(
        "lineage_weighted", description="How an upstream's cost is attributed to its consumers."
    )
    storage_prices: dict[str, float] = Field(
        default_factory=dict, description="Price per GB-month by class, over the shipped defaults."
    )
    platform_storage_class: dict[str, str] = Field(
        default_factory=lambda: {"s3": "s3:standard"}, description="Storage class of a platform's datasets."
    )
    compute_rates: dict[str, float] = Field(
        default_factory=lambda: {"usd": 1.0, "core_hour": 0.05, "dbu": 0.55, "credit": 3.0},
        description="Price of one unit of compute.",
    )
    billing: list[str] = Field(default_factory=list, description="FOCUS billing exports (CSV or Parquet).")
    billing_rules: list[BillingRule] = Field(default_factory=lambda: [BillingRule(tag="lumos_dataset")])


class SqlLineageConfig(ConfigModel):
    path: str = Field(description="Folder of .sql files (searched recursively), or one file.")
    dialect: str | None = Field(None, description="sqlglot dialect of the files (default: hive, i.e. Spark SQL).")
    default_schema: str | None = Field(None, description="Schema of unqualified table names.")


class DbtConfig(ConfigModel):
    manifest: str = Field(description="dbt's target/manifest.json.")
    run_results: str | None = Field(None, description="dbt's target/run_results.json (test results).")


class LineageConfig(ConfigModel):
    """Lineage read from code. Declared `upstream` in `datasets` stays the override."""

    sql: list[SqlLineageConfig] = Field(default_factory=list)
    dbt: DbtConfig | None = None
    names: dict[str, str] = Field(
        default_factory=dict,
        description="Table name in code (e.g. `analytics.orders`) → dataset name, where they differ.",
    )


class GlossaryRule(ConfigModel):
    column: str = Field(description="Column-name glob (case-insensitive), e.g. `cust_id` or `*_email`.")
    term: str = Field(description="Business term, e.g. `Customer Identifier`.")
    definition: str | None = Field(None, description="What the term means (the portable snapshot's glossary).")
    pii: bool = Field(False, description="Columns carrying the term hold personal data (PII in exports).")


class PathDescription(ConfigModel):
    path: str = Field(description="Dataset-name glob, e.g. `raw/events/*`.")
    description: str


RequiredField = Literal["description", "owner", "domain", "tags", "sla", "column_descriptions"]


class RequiredConfig(ConfigModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    fields: list[RequiredField] = Field(default_factory=list, description="What every dataset must have.")
    mode: Literal["warn", "block"] = Field("warn", description="block: downstream assets wait until it is filled.")
    except_: list[str] = Field(default_factory=list, alias="except", description="Dataset-name globs exempted.")


class AlertsConfig(ConfigModel):
    """Breaking-change alerts (lumos_dagster/governance/alerts.py)."""

    webhook: str | None = Field(None, description="URL each breaking change is POSTed to, once (Slack or Teams).")
    format: Literal["slack", "teams"] = Field(
        "slack", description="slack: text + blocks (incoming webhooks); teams: a MessageCard (connectors)."
    )


#: the missing-context report's section of one owner (`governance.rules.todo_markdown`)
NUDGE_TEMPLATE = "## {owner} ({count})\n\n{datasets}"
NUDGE_PLACEHOLDERS = {"owner": "", "count": 0, "datasets": ""}


class EscalationRule(ConfigModel):
    after_days: int = Field(ge=1, description="Days a dataset has lacked context (since first nudged).")
    action: Literal["notify_domain_owner", "deprecate"] = Field(
        description="notify_domain_owner: nudge the domain's owner too; deprecate: mark it deprecated in DataHub."
    )


class NudgeConfig(ConfigModel):
    """Reminders to owners of datasets lacking required context (lumos_dagster/governance/nudges.py)."""

    schedule: str | None = Field(None, description="Cron of the nudge schedule (UTC), e.g. `0 8 * * 1`; none: off.")
    template: str = Field(
        NUDGE_TEMPLATE,
        description="Message to each owner; placeholders {owner}, {count}, {datasets} (a line each: what it "
        "lacks, links; escalated ones say so).",
    )
    escalate: list[EscalationRule] = Field(default_factory=list)
    domain_owners: dict[str, str] = Field(
        default_factory=dict, description="Domain → who is nudged when `notify_domain_owner` applies."
    )

    @field_validator("template")
    @classmethod
    def _known_placeholders(cls, value: str) -> str:
        try:
            value.format(**NUDGE_PLACEHOLDERS)
        except (KeyError, IndexError, ValueError) as e:
            raise ValueError(f"unknown placeholder or bad brace {e}; use {{owner}}, {{count}}, {{datasets}}") from None
        return value


class GovernanceConfig(ConfigModel):
    glossary: list[GlossaryRule] = Field(default_factory=list)
    descriptions: list[PathDescription] = Field(default_factory=list)
    required: RequiredConfig = Field(default_factory=RequiredConfig)
    stale_days: int = Field(
        30, ge=1, description="A dataset not modified (a table: nor queried) for this many days is stale."
    )
    webhook: str | None = Field(None, description="URL the missing-context report is POSTed to (JSON).")
    alerts: AlertsConfig = Field(default_factory=AlertsConfig)
    nudge: NudgeConfig = Field(default_factory=NudgeConfig)
    catalog_url: str | None = Field(
        None, description="DataHub UI base URL, for links in reports (e.g. http://datahub:9002)."
    )
    dagster_url: str | None = Field(None, description="Dagster UI base URL, for links in reports.")


class QualityConfig(ConfigModel):
    great_expectations: list[str] = Field(
        default_factory=list, description="Great Expectations validation result files (JSON) or folders of them."
    )
    min_score: float = Field(0.0, ge=0, le=1, description="The quality check fails below this score.")


class ReportsConfig(ConfigModel):
    dir: str = Field(".lumos/reports", description="Where report assets and commands write their files.")


class ReleasesConfig(ConfigModel):
    prefix: str = Field("S-", description="Release names are the prefix and a number: S-311, S-312…")
    watch: str | None = Field(
        None, description="Folder (or s3://bucket/prefix) where release manifests land; the release sensor watches it."
    )
    endpoint_url: str | None = Field(None, description="S3-compatible endpoint (MinIO…) of an s3:// `watch`.")


class RemovalConfig(ConfigModel):
    max_share: float = Field(
        0.75, ge=0, le=1, description="If more than this share of a source's datasets vanish at once, remove none."
    )


class StoreRetention(ConfigModel):
    outbox_days: float = Field(
        7, gt=0, description="Delivered outbox entries are deleted after this many days (by `lumos_retention`)."
    )


class StoreConfig(ConfigModel):
    path: str = Field(".lumos/store.db", description="SQLite file of the snapshot store.")
    url: Secret | None = Field(
        None,
        description="SQLAlchemy URL; overrides `path` (e.g. postgresql+psycopg://…); its ${ENV}s are read on opening.",
    )
    retention: StoreRetention = Field(default_factory=StoreRetention)

    @field_validator("url")
    @classmethod
    def _unambiguous(cls, value: str | None) -> str | None:
        if value is not None and ambiguous_password(value):
            raise ValueError(AMBIGUOUS_PASSWORD)
        return value


class RetentionConfig(ConfigModel):
    """What Dagster keeps of the past (it keeps everything by itself): the `lumos_retention` job."""

    dagster_runs_days: float | None = Field(
        30,
        description="Lumos' own ended Dagster runs older than this many days are deleted, with their events "
        "(never another code location's); `null` (or `false`): every run is kept.",
    )
    schedule: str = Field("30 4 * * *", description="When `lumos_retention` runs (cron, UTC).")

    @field_validator("dagster_runs_days", mode="before")
    @classmethod
    def _days_or_off(cls, value: object) -> object:
        # one way to say "off": null (`false` too, as YAML's own "no"); 0, a negative number or a word is a
        # mistake to name, never a silent "delete everything" or "keep everything"
        if value is None or value is False:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise ValueError(
                f"{value!r} is not a number of days above 0; to keep every run, write `dagster_runs_days: null`"
            )
        return value

    @field_validator("schedule")
    @classmethod
    def _cron(cls, value: str) -> str:
        return _cron(value)


def _default_start() -> date:
    return date(date.today().year, 1, 1)


class PartitionsConfig(ConfigModel):
    start: date = Field(
        default_factory=_default_start,
        description="First partition (default: the earliest time partition discovery found, else 1 January this year).",
    )
    cadence: Cadence = "daily"
    timezone: str = "UTC"
    datasets_per_run: int = Field(
        5000,
        ge=1,
        description="A cadence's schedule splits its datasets into runs of at most this many (whole ops of "
        "lineage-linked datasets), which a deployment's run workers take at once (`lumos docs deploy`).",
    )
    snapshot_lag: str = Field(
        "0",
        description="How long after a partition ends its schedule snapshots it, e.g. `+2h` when a day's files "
        "land by 02:00 (below the cadence's length).",
    )

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        return _known_zone(value)

    @model_validator(mode="after")
    def _lag_fits(self) -> "PartitionsConfig":
        from lumos_dagster.floor.windows import parse_lag, snapshot_cron

        snapshot_cron(self.cadence, parse_lag(self.snapshot_lag))  # raises ValueError naming what is wrong
        return self


class SparkConfig(ConfigModel):
    master: str = Field("local[*]", description="Spark master URL (`local[*]`, `spark://host:7077`, `yarn`…).")
    remote: str | None = Field(
        None,
        description="A Spark Connect server to read through instead of a master: `sc://host:15002` (Databricks "
        "and recent Spark deployments). Set, it is used and `master` is not.",
    )
    conf: dict[str, str] = Field(default_factory=dict, description="Extra Spark configuration.")
    read_from_files: int | None = Field(
        None,
        ge=1,
        description="A run reads file schemas on Spark from this many files on (default: never on a local master, "
        "whose cores the process pool uses as well; on a cluster 500,000 local files, 5,000 on an object store or "
        "HDFS). Below it, a process pool reads them.",
    )

    @field_validator("master")
    @classmethod
    def _not_connect(cls, value: str) -> str:
        if value.strip().startswith("sc://"):
            raise ValueError(f"{value} is a Spark Connect address: set it as spark.remote, not spark.master")
        return value

    @field_validator("remote")
    @classmethod
    def _connect_url(cls, value: str | None) -> str | None:
        if value is not None and not value.strip().startswith("sc://"):
            raise ValueError(f"{value} is not a Spark Connect address: spark.remote takes sc://host:port")
        return value


class LumosConfig(ConfigModel):
    sources: list[Source] = Field(default_factory=list)
    datasets: list[DatasetDecl] = Field(default_factory=list)
    catalog: list[Catalog] = Field(
        default_factory=lambda: [CATALOGS[DEFAULT_CATALOG].config()],
        description="One catalog, or a list: each gets every snapshot.",
    )
    removal: RemovalConfig = Field(default_factory=RemovalConfig)
    retention: RetentionConfig = Field(default_factory=RetentionConfig)
    store: StoreConfig = Field(default_factory=StoreConfig)
    partitions: PartitionsConfig = Field(default_factory=PartitionsConfig)
    spark: SparkConfig = Field(default_factory=SparkConfig)
    compatibility: CompatibilityConfig = Field(default_factory=CompatibilityConfig)
    releases: ReleasesConfig = Field(default_factory=ReleasesConfig)
    cost: CostConfig = Field(default_factory=CostConfig)
    reports: ReportsConfig = Field(default_factory=ReportsConfig)
    lineage: LineageConfig = Field(default_factory=LineageConfig)
    governance: GovernanceConfig = Field(default_factory=GovernanceConfig)
    quality: QualityConfig = Field(default_factory=QualityConfig)
    api: ApiConfig = Field(default_factory=ApiConfig, description="`lumos serve`: the HTTP API (`lumos docs api`).")
    # directory relative paths are resolved against, and the file it came from
    base_dir: str = Field(".", exclude=True)
    source_file: str = Field("<memory>", exclude=True)

    @model_validator(mode="after")
    def _unique_names(self) -> "LumosConfig":
        for what, names in (("sources", [s.name for s in self.sources]), ("datasets", [d.name for d in self.datasets])):
            dupes = sorted(n for n, count in Counter(names).items() if count > 1)  # names.count: O(n²)
            if dupes:
                raise ValueError(f"{what}: names must be unique, repeated: {', '.join(dupes)}")
        return self

    @model_validator(mode="after")
    def _acyclic_upstream(self) -> "LumosConfig":
        # here rather than when the code location loads: `lumos discover` and CI see it first
        order = [d.name for d in self.datasets]
        ring = first_cycle({d.name: d.upstream for d in self.datasets}, order)
        if ring is not None:
            raise ValueError(f"datasets[{order.index(ring[0])}].upstream: lineage has a cycle: {' → '.join(ring)}")
        return self

    def resolve(self, path: str) -> str:
        return resolve_path(self.base_dir, path)

    def resolve_location(self, location: str) -> str:
        """A folder or an s3:// URL; folders are relative to lumos.yaml."""
        return location if "://" in location else self.resolve(location)

    @property
    def store_url(self) -> str:
        """As written: its `${VAR}`s are expanded by the store when it opens (`expand_secrets`)."""
        return self.store.url or f"sqlite:///{self.resolve(self.store.path)}"

    @field_validator("catalog", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, dict) else value

    @property
    def catalogs(self) -> list:
        return self.catalog

    @property
    def lite_path(self) -> str | None:
        """The first DataHub Lite catalog's file, if any (for `lumos lite`, summaries)."""
        lite = next((c for c in self.catalogs if c.type == "datahub-lite"), None)
        return self.resolve(lite.path) if lite else None

    def policy(self, name: str) -> str:
        decl = self.declaration(name)
        return decl.policy if decl and decl.policy else self.compatibility.policy

    def declaration(self, name: str) -> DatasetDecl | None:
        return self.declarations.get(name)

    @cached_property
    def declarations(self) -> dict[str, DatasetDecl]:
        return {d.name: d for d in self.datasets}


# ------------------------------------------------------------------ loading

# pydantic puts a discriminated union's tag in error locations: `sources.0.local.root`
_TAGS = frozenset(SOURCES.names() + CATALOGS.names())


def _loc(parts: tuple) -> str:
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        elif p not in _TAGS:
            out += f".{p}" if out else str(p)
    return out or "(top level)"


def _secrets(data: dict, file: str, env: dict[str, str]) -> set[tuple]:
    """Where the file's credentials are (e.g. `("sources", 0, "dsn")`): kept as written until used."""
    found: set[tuple] = {("store", key) for key in secret_fields(StoreConfig)}
    for section, registry, default in (("sources", SOURCES, DEFAULT_SOURCE), ("catalog", CATALOGS, DEFAULT_CATALOG)):
        entries = data.get(section)
        if isinstance(entries, list):
            placed: list[tuple[tuple, Any]] = [((section, i), e) for i, e in enumerate(entries)]
        else:  # `catalog:` may be one entry instead of a list
            placed = [((section,), entries)]
        for where, entry in placed:
            kind = entry.get("type", default) if isinstance(entry, dict) else None
            kind = _interpolate(kind, where + ("type",), file, env, set()) if isinstance(kind, str) else None
            if kind is not None and (plugin := registry.get(kind)):
                found |= {where + (key,) for key in secret_fields(plugin.config)}
    return found


def _interpolate(value: Any, where: tuple, file: str, env: dict[str, str], secrets: set[tuple]) -> Any:
    if where in secrets:
        return value
    if isinstance(value, dict):
        return {k: _interpolate(v, where + (k,), file, env, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolate(v, where + (i,), file, env, secrets) for i, v in enumerate(value)]
    return expand_secrets(value, f"{file}: {_loc(where)}", env) if isinstance(value, str) else value


def _explain(err: ErrorDetails, model: type[BaseModel]) -> str:
    loc = _loc(err["loc"])
    if err["type"] == "extra_forbidden":
        known = _known_keys(model, err["loc"][:-1])
        hint = difflib.get_close_matches(str(err["loc"][-1]), known, n=1)
        suggestion = f" (did you mean {hint[0]!r}?)" if hint else f" (known keys: {', '.join(sorted(known))})"
        return f"{loc}: unknown key{suggestion}"
    if not err["loc"]:  # a check of the whole file: its message names the keys
        return err["msg"].removeprefix("Value error, ")
    if err["type"] == "union_tag_invalid":
        return f"{loc}.type: unknown type {err['ctx']['tag']!r} (known: {err['ctx']['expected_tags']})"
    return f"{loc}: {err['msg'].removeprefix('Value error, ')}"


def _known_keys(model: type[BaseModel], loc: tuple) -> list[str]:
    """Field names of the model found at `loc` (best effort, for suggestions)."""
    current: Any = model
    for part in loc:
        if isinstance(part, int) or not (isinstance(current, type) and issubclass(current, BaseModel)):
            continue
        if part not in current.model_fields:
            continue
        annotation = current.model_fields[part].annotation
        current = _model_in(annotation)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return [k for k, f in current.model_fields.items() if not f.exclude]
    return []


def _model_in(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_in(arg)
        if found is not None:
            return found
    for meta in getattr(annotation, "__metadata__", ()):
        found = _model_in(meta)
        if found is not None:
            return found
    return None


def parse_config(
    data: Any, file: str = "<memory>", base_dir: str = ".", env: dict[str, str] | None = None
) -> LumosConfig:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{file}: the top level must be a mapping of keys (sources, datasets, …)")
    env = dict(os.environ) if env is None else env
    data = _interpolate(data, (), file, env, _secrets(data, file, env))
    try:
        return LumosConfig.model_validate({**data, "base_dir": base_dir, "source_file": file})
    except ValidationError as exc:
        problems = [_explain(e, LumosConfig) for e in exc.errors()]
        raise ConfigError(f"{file}: invalid configuration:\n  " + "\n  ".join(problems)) from None


def config_path(path: str | None = None) -> str:
    return path or os.environ.get(CONFIG_ENV) or DEFAULT_CONFIG


#: values that aliases (`*name`) may add to a file beyond what it writes out: a few thousand
#: nested aliases ("billion laughs") would otherwise expand to more values than memory holds
ALIAS_ALLOWANCE = 100_000


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """libyaml's safe loader when present (thousands of declarations load several times faster),
    which rejects a key written twice in a mapping and aliases that expand the file too far."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self._aliased = "&" in stream  # no anchor, no alias: nothing to count

    def construct_document(self, node: yaml.Node) -> Any:
        blown = _overexpanded(node) if self._aliased else None
        if blown is not None:
            where, limit = blown
            raise yaml.constructor.ConstructorError(
                None, None, f"the aliases here expand the file to over {limit:,} values", where.start_mark
            )
        return super().construct_document(node)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        first: dict[tuple[str, str], int] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key, line = (key_node.tag, key_node.value), key_node.start_mark.line + 1
            if key in first:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key[1]!r} (lines {first[key]} and {line})", key_node.start_mark
                )
            first[key] = line
        return super().construct_mapping(node, deep)


def _overexpanded(root: yaml.Node) -> tuple[yaml.Node, int] | None:
    """The first node (innermost) whose expansion by aliases exceeds the document's distinct nodes by
    more than ALIAS_ALLOWANCE, and that limit; None when the document stays within it. Each distinct
    node is counted once: linear in the size of the file. The composed document keeps no alias's
    position, so the node is the one whose aliases, written inside it, blew the budget."""
    nodes = list(_post_order(root))
    limit = len(nodes) + ALIAS_ALLOWANCE
    expanded: dict[int, int] = {}
    for node in nodes:
        children = [c for pair in node.value for c in pair] if isinstance(node, yaml.MappingNode) else node.value
        expanded[id(node)] = 1 + (sum(expanded[id(c)] for c in children) if isinstance(children, list) else 0)
        if expanded[id(node)] > limit:
            return node, limit
    return None


def _post_order(root: yaml.Node) -> Iterator[yaml.Node]:
    """Each distinct node once, children first (iterative: a file can nest deeper than Python recurses)."""
    seen, stack = set(), [(root, False)]
    while stack:
        node, done = stack.pop()
        if done:
            yield node
        elif id(node) not in seen:
            seen.add(id(node))
            stack.append((node, True))
            if isinstance(node, yaml.MappingNode):
                stack.extend((c, False) for pair in node.value for c in pair)
            elif isinstance(node, yaml.SequenceNode):
                stack.extend((c, False) for c in node.value)


def load_config(path: str | None = None) -> LumosConfig:
    path = config_path(path)
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
        text = raw.decode("utf-8")
        data = yaml.load(text, Loader=_Loader)
    except FileNotFoundError:
        raise ConfigError(f"{path}: configuration file not found (create it, or point {CONFIG_ENV} at one)") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a folder, not a configuration file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the configuration file: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        byte = raw[exc.start]
        raise ConfigError(f"{path}: line {line}: not UTF-8 text (byte 0x{byte:02x}): save it as UTF-8") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = " ".join(str(getattr(exc, "problem", None) or exc).split())  # a reader error spans lines
        raise ConfigError(f"{path}:{where}: not valid YAML: {problem}") from None
    return parse_config(data, file=path, base_dir=str(Path(path).resolve().parent))
