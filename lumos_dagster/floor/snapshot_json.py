"""A `Snapshot` as a JSON document (`SNAPSHOT_FORMAT`), described by `snapshot.schema.json` next to
this module; `snapshot_from_json(snapshot_to_json(x)) == x` exactly."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime
from typing import Any, Sequence

from lumos_dagster.floor.datatypes import schema_from_json, schema_to_json
from lumos_dagster.floor.model import (
    AssertionResult,
    CheckResult,
    ColumnMapping,
    ColumnProfile,
    Commit,
    ConflictVariant,
    Cost,
    DatasetRef,
    FileError,
    JobRef,
    LineageEdge,
    OperationalStats,
    Owner,
    PartialRead,
    Profile,
    Quality,
    SchemaChange,
    SchemaConflict,
    Snapshot,
    TableTotals,
    TableVersion,
)

SNAPSHOT_FORMAT = "lumos.snapshot/1"
CHANGE_KEYS = ("path", "kind", "old", "new", "backward", "forward", "severity", "against")


def change_to_json(c: SchemaChange, keys: Sequence[str] = CHANGE_KEYS) -> dict:
    """A change as JSON (the snapshot document, reports, the CLI), with `keys` only when a view
    shows fewer."""
    return {k: getattr(c, k) for k in keys}


def _dt_to_json(d: datetime | None) -> str | None:
    return None if d is None else d.isoformat()


def _dt_from_json(s: str | None) -> datetime | None:
    return None if s is None else datetime.fromisoformat(s)


def _ref_to_json(r: DatasetRef) -> dict:
    out = {"urn": r.urn, "platform": r.platform, "name": r.name, "location": r.location, "format": r.format}
    if r.instance is not None:  # only when set: the documents of every other dataset stay as they were
        out["instance"] = r.instance
    return out


def _ref_from_json(j: dict) -> DatasetRef:
    return DatasetRef(j["platform"], j["name"], j["location"], j["format"], j.get("instance"))


def _edge_to_json(e: LineageEdge) -> dict:
    return {
        "upstream": _ref_to_json(e.upstream),
        "columns": [{"downstream": c.downstream, "upstream": c.upstream} for c in e.columns],
        "job": None if e.job is None else {"orchestrator": e.job.orchestrator, "flow": e.job.flow, "name": e.job.name},
    }


def _edge_from_json(j: dict) -> LineageEdge:
    job = j.get("job")
    return LineageEdge(
        _ref_from_json(j["upstream"]),
        tuple(ColumnMapping(c["downstream"], c["upstream"]) for c in j.get("columns", ())),
        None if job is None else JobRef(job["orchestrator"], job["flow"], job["name"]),
    )


def _quality_to_json(q: Quality | None) -> dict | None:
    if q is None:
        return None
    return {
        "score": q.score,
        "freshness": q.freshness,
        "age_hours": q.age_hours,
        "assertions": [
            {
                "name": a.name,
                "status": a.status,
                "dimension": a.dimension,
                "column": a.column,
                "source": a.source,
                "message": a.message,
                "observed_at": a.observed_at,
            }
            for a in q.assertions
        ],  # fmt: skip
    }


def _quality_from_json(j: dict | None) -> Quality | None:
    if j is None:
        return None
    return Quality(
        j["score"],
        j["freshness"],
        j["age_hours"],
        tuple(
            AssertionResult(
                a["name"], a["status"], a["dimension"], a["column"], a["source"], a["message"], a["observed_at"]
            )
            for a in j["assertions"]
        ),  # fmt: skip
    )


def _profile_to_json(p: Profile | None) -> dict | None:
    if p is None:
        return None
    out = {
        "row_count": p.row_count,
        "sample_fraction": p.sample_fraction,
        "columns": [
            {"path": c.path, "null_fraction": c.null_fraction, "distinct": c.distinct, "min": c.min, "max": c.max}
            for c in p.columns
        ],
    }
    if p.partial is not None:  # absent when the whole partition was read: earlier documents are unchanged
        out["partial"] = asdict(p.partial)
    return out


def _profile_from_json(j: dict | None) -> Profile | None:
    if j is None:
        return None
    columns = tuple(
        ColumnProfile(c["path"], c["null_fraction"], c["distinct"], c["min"], c["max"]) for c in j["columns"]
    )
    partial = PartialRead(**j["partial"]) if j.get("partial") else None
    return Profile(j["row_count"], j["sample_fraction"], columns, partial)


def _table_to_json(t: TableVersion | None) -> dict | None:
    if t is None:
        return None
    out: dict[str, Any] = {
        "format": t.format,
        "version": t.version,
        "committed_at": _dt_to_json(t.committed_at),
        "partition_spec": list(t.partition_spec),
        "sort_order": list(t.sort_order),
    }
    if t.commits:  # only when the window held commits: documents of other tables stay as they were
        out["commits"] = [{"version": c.version, "committed_at": _dt_to_json(c.committed_at),
                           "operation": c.operation, "metrics": dict(c.metrics)} for c in t.commits]  # fmt: skip
    return out


def _table_from_json(j: dict | None) -> TableVersion | None:
    if j is None:
        return None
    commits = tuple(
        Commit(c["version"], datetime.fromisoformat(c["committed_at"]), c["operation"], tuple(c["metrics"].items()))
        for c in j.get("commits", ())
    )
    return TableVersion(j["format"], j["version"], _dt_from_json(j["committed_at"]), tuple(j["partition_spec"]),
                        tuple(j["sort_order"]), commits)  # fmt: skip


def snapshot_to_json(s: Snapshot) -> dict:
    out = {
        "format_version": SNAPSHOT_FORMAT,
        "dataset": _ref_to_json(s.dataset),
        "partition_key": s.partition_key,
        "captured_at": _dt_to_json(s.captured_at),
        "version": s.version,
        "fingerprint": s.fingerprint,
        "schema": schema_to_json(s.schema),
        "stats": {
            "file_count": s.stats.file_count,
            "total_bytes": s.stats.total_bytes,
            "row_count": s.stats.row_count,
            "last_modified": _dt_to_json(s.stats.last_modified),
            "partition_values": s.stats.partition_values,
            "usage": s.stats.usage,
        },
        "description": s.description,
        "domain": s.domain,
        "owners": [{"id": o.id, "kind": o.kind, "type": o.type} for o in s.owners],
        "tags": list(s.tags),
        "upstream": [_edge_to_json(e) for e in s.upstream],
        "errors": [{"path": e.path, "reason": e.reason} for e in s.errors],
        "conflicts": [
            {
                "path": c.path,
                "resolution": c.resolution,
                "variants": [{"type": v.type, "files": list(v.files), "file_count": v.file_count} for v in c.variants],
            }
            for c in s.conflicts
        ],
        "changes": [change_to_json(c) for c in s.changes],
        "previous_version": s.previous_version,
        "change_class": s.change_class,
        "policy": s.policy,
        "removed": s.removed,
        "cost": None
        if s.cost is None
        else {
            "period": s.cost.period,
            "currency": s.cost.currency,
            "storage": s.cost.storage,
            "compute": s.cost.compute,
            "inherited": s.cost.inherited,
            "method": s.cost.method,
            "basis": s.cost.basis,
        },
        "terms": list(s.terms),
        "sla": s.sla,
        "quality": _quality_to_json(s.quality),
        "profile": _profile_to_json(s.profile),
    }
    if s.table is not None:  # left out otherwise: documents of files and databases stay as they were
        out["table"] = _table_to_json(s.table)
    if s.checks:  # likewise: only snapshots a run judged
        out["checks"] = [
            {"name": c.name, "passed": c.passed, "severity": c.severity, "description": c.description,
             **({"affected": list(c.affected)} if c.affected else {})}
            for c in s.checks
        ]  # fmt: skip
    if s.totals is not None:  # likewise: only partitions of a larger table
        out["totals"] = {"file_count": s.totals.file_count, "total_bytes": s.totals.total_bytes,
                         "first_partition": s.totals.first_partition}  # fmt: skip
    if s.schema.name is not None:  # likewise: only Avro schemas have one
        out["schema_name"] = s.schema.name
    if s.schema.aliases:
        out["schema_aliases"] = list(s.schema.aliases)
    return out


def snapshot_from_json(j: dict) -> Snapshot:
    if j.get("format_version") != SNAPSHOT_FORMAT:
        raise ValueError(
            f"unsupported snapshot format {j.get('format_version')!r}; this Lumos reads {SNAPSHOT_FORMAT!r}"
        )
    st = j["stats"]
    return Snapshot(
        dataset=_ref_from_json(j["dataset"]),
        partition_key=j["partition_key"],
        captured_at=datetime.fromisoformat(j["captured_at"]),  # a string, never null (snapshot.schema.json)
        version=j["version"],
        schema=schema_from_json(j["schema"], j.get("schema_name"), j.get("schema_aliases", ())),
        stats=OperationalStats(
            file_count=st["file_count"],
            total_bytes=st["total_bytes"],
            row_count=st["row_count"],
            last_modified=_dt_from_json(st["last_modified"]),
            partition_values={k: list(v) for k, v in st["partition_values"].items()},
            usage=dict(st["usage"]),
        ),
        description=j["description"],
        domain=j["domain"],
        owners=tuple(Owner(o["id"], o["kind"], o["type"]) for o in j["owners"]),
        tags=tuple(j["tags"]),
        upstream=tuple(_edge_from_json(e) for e in j["upstream"]),
        errors=tuple(FileError(e["path"], e["reason"]) for e in j["errors"]),
        conflicts=tuple(
            SchemaConflict(
                path=c["path"],
                resolution=c["resolution"],
                variants=tuple(ConflictVariant(v["type"], tuple(v["files"]), v["file_count"]) for v in c["variants"]),
            )
            for c in j["conflicts"]
        ),
        changes=tuple(SchemaChange(**{k: c[k] for k in CHANGE_KEYS}) for c in j["changes"]),
        previous_version=j["previous_version"],
        change_class=j["change_class"],
        policy=j["policy"],
        removed=j["removed"],
        cost=None
        if j["cost"] is None
        else Cost(
            period=j["cost"]["period"],
            storage=j["cost"]["storage"],
            compute=j["cost"]["compute"],
            inherited=j["cost"]["inherited"],
            method=j["cost"]["method"],
            basis=j["cost"]["basis"],
            currency=j["cost"]["currency"],
        ),
        # governance fields arrived after format 1 was first written: absent means none
        terms=tuple(j.get("terms", ())),
        sla=j.get("sla"),
        quality=_quality_from_json(j.get("quality")),
        profile=_profile_from_json(j.get("profile")),
        table=_table_from_json(j.get("table")),
        checks=tuple(
            CheckResult(c["name"], c["passed"], c["severity"], c["description"], tuple(c.get("affected", ())))
            for c in j.get("checks", ())
        ),
        totals=TableTotals(**j["totals"]) if j.get("totals") else None,
    )


def snapshot_dumps(s: Snapshot) -> str:
    return json.dumps(snapshot_to_json(s), sort_keys=True, separators=(",", ":"))


def snapshot_loads(text: str) -> Snapshot:
    return snapshot_from_json(json.loads(text))
