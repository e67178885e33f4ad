"""From code to datasets: what the SQL files and dbt models of `lineage:` say about each dataset.

Code names tables the way its warehouse does (`analytics.orders`); Lumos names datasets after
their location (`warehouse/analytics/orders`). A table is matched to a dataset by `lineage.names`
first, then by the dotted parts of the table being the trailing parts of exactly one dataset name
(or the other way round). Ambiguous or unknown names are reported, never guessed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from lumos_dagster.code_lineage import CodeLineage, StoredSql, normalize_table_name
from lumos_dagster.floor.model import ColumnMapping, JobRef
from lumos_dagster.floor.windows import canonical_duration

if TYPE_CHECKING:  # for the annotations only: the store and lumos.yaml's models import slowly
    from lumos_dagster.floor.config import LumosConfig
    from lumos_dagster.store.roles import RegistryAndHistory


@dataclass(frozen=True)
class CodeEdge:
    upstream: str  # dataset name
    job: JobRef
    columns: tuple[ColumnMapping, ...] = ()


@dataclass(frozen=True)
class CodeDoc:
    """What code says about one dataset."""

    edges: tuple[CodeEdge, ...] = ()
    description: str | None = None
    owners: tuple[str, ...] = ()
    sla: str | None = None
    tags: tuple[str, ...] = ()
    column_descriptions: dict[str, str] = field(default_factory=dict)
    built_by: tuple[JobRef, ...] = ()  # the jobs that write it, whether or not they read a dataset

    @property
    def upstream(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(e.upstream for e in self.edges))


@dataclass
class CodeContext:
    docs: dict[str, CodeDoc] = field(default_factory=dict)  # dataset name → what code says
    problems: list[str] = field(default_factory=list)  # parse errors, ambiguous names
    external: dict[str, list[str]] = field(default_factory=dict)  # table Lumos does not manage → jobs


class TableNames:
    def __init__(self, datasets: Iterable[str], names: dict[str, str]):
        self.explicit = {normalize_table_name(k): v for k, v in names.items()}
        self.by_parts = {tuple(d.lower().split("/")): d for d in datasets}

    def resolve(self, table: str) -> tuple[str | None, str | None]:
        """(dataset, problem): the dataset a code table name means, or why there is none."""
        if table in self.explicit:
            return self.explicit[table], None
        parts = tuple(table.split("."))
        if parts in self.by_parts:
            return self.by_parts[parts], None
        n = len(parts)
        # one name's parts end the other's: `sales.orders` is `warehouse/sales/orders`, `orders` is `raw.orders`
        candidates = sorted(d for p, d in self.by_parts.items() if p[-n:] == parts or parts[-len(p) :] == p)
        if len(candidates) == 1:
            return candidates[0], None
        if candidates:
            return None, f"table {table} could be any of {', '.join(candidates)}: map it in lineage.names"
        return None, None


def refresh_code(
    store: RegistryAndHistory, config: LumosConfig, stored: Sequence[StoredSql] = ()
) -> CodeContext | None:
    """Read what code (and the databases' view definitions, `stored`) says and keep it in the store
    for the code location; None when there is nothing to read."""
    if not (config.lineage.sql or config.lineage.dbt or any(s.views for s in stored)):
        store.save_code({})
        return None
    code = current_code(store, config, stored)
    store.save_code({name: doc_to_json(doc) for name, doc in code.docs.items()})
    return code


def current_code(store: RegistryAndHistory, config: LumosConfig, stored: Sequence[StoredSql] = ()) -> CodeContext:
    """What the code says now, against the datasets (and their columns) the store knows; nothing written."""
    columns = {}
    for rec in store.datasets():
        latest = store.latest(rec.urn)
        columns[rec.name] = [f.name for f in latest.schema.fields] if latest else []
    for decl in config.datasets:
        columns.setdefault(decl.name, [])
    return read_code(config, columns, stored)


def read_code(config: LumosConfig, schemas: dict[str, list[str]], stored: Sequence[StoredSql] = ()) -> CodeContext:
    """What `config.lineage` and the views in `stored` say about the datasets named in `schemas`
    (dataset → column names, empty when not read yet). Columns let `SELECT *` expand into column
    lineage."""
    from lumos_dagster.code_lineage.dbt import read_manifest  # the SQL parser loads slowly: only when reading code

    names = TableNames(schemas, config.lineage.names)
    context = CodeContext()
    jobs: list[tuple[str, list[CodeLineage]]] = []  # (flow, entries)
    if config.lineage.dbt is not None:
        manifest = config.resolve(config.lineage.dbt.manifest)
        try:
            jobs.append((Path(manifest).parent.parent.name or "dbt", read_manifest(manifest)))
        except (OSError, ValueError) as e:
            context.problems.append(f"lineage.dbt.manifest: {e}")
    for i, sql in enumerate(config.lineage.sql):
        path = Path(config.resolve(sql.path))
        if not path.exists():
            context.problems.append(f"lineage.sql[{i}].path: {path} does not exist")
            continue
        jobs.append((sql.path, _two_passes(partial(_read_sql, path, sql.dialect), names, schemas)))
    for flow, entries in jobs:
        _attach(context, flow, entries, names)
    for source in stored:  # a database names its own tables exactly (for its views only); lineage.names wins
        own = TableNames(schemas, {**source.names, **config.lineage.names})
        _attach(context, source.flow, _two_passes(partial(_read_views, source), own, schemas), own)
    return context


def _read_sql(path: Path, dialect: str | None, schemas: dict[str, list[str]]) -> list[CodeLineage]:
    from lumos_dagster.code_lineage.sql import parse_sql, parse_sql_folder

    if path.is_dir():
        return parse_sql_folder(path, dialect, schemas)
    return parse_sql(path.read_text(encoding="utf-8"), path.name, dialect, schemas)


def _read_views(source: StoredSql, schemas: dict[str, list[str]]) -> list[CodeLineage]:
    from lumos_dagster.code_lineage.sql import parse_sql

    return [e for job, view, body in source.views for e in parse_sql(body, job, source.dialect, schemas, output=view)]


def _two_passes(
    read: Callable[[dict[str, list[str]]], list[CodeLineage]], names: TableNames, schemas: dict[str, list[str]]
) -> list[CodeLineage]:
    """`read(known columns)` once, then again once the tables it reads have known columns."""
    entries = read({})
    known = _code_schemas(entries, names, schemas)
    return read(known) if known else entries


def _code_schemas(entries: list[CodeLineage], names: TableNames, schemas: dict[str, list[str]]) -> dict:
    out = {}
    for table in {t for e in entries for t in e.inputs}:
        dataset, _ = names.resolve(table)
        if dataset and schemas.get(dataset):
            out[table] = schemas[dataset]
    return out


def _attach(context: CodeContext, flow: str, entries: list[CodeLineage], names: TableNames) -> None:
    outputs_of: dict[str, set[str]] = {}
    resolved: dict[str, str | None] = {}

    def dataset(table: str, job: str) -> str | None:
        if table not in resolved:
            resolved[table], problem = names.resolve(table)
            if problem:
                context.problems.append(problem)
        if resolved[table] is None:
            context.external.setdefault(table, [])
            if job not in context.external[table]:
                context.external[table].append(job)
        return resolved[table]

    for entry in entries:
        context.problems += entry.errors
        if entry.output:
            out = dataset(entry.output, entry.job)
            if out:
                outputs_of.setdefault(entry.job, set()).add(out)
    for entry in entries:
        out = resolved.get(entry.output) if entry.output else None
        if out is None:
            continue
        # a file writing several datasets is one job per output: a job's outputs are replaced whole in catalogs
        name = entry.job if len(outputs_of[entry.job]) == 1 else f"{entry.job}#{out}"
        job = JobRef(entry.kind, flow, name)
        edges = []
        for table in entry.inputs:
            upstream = dataset(table, entry.job)
            if upstream is None or upstream == out:
                continue
            columns = [
                ColumnMapping(c.downstream, c.upstream)
                for c in entry.columns
                if resolved.get(c.upstream_table) == upstream
            ]
            edges.append(CodeEdge(upstream, job, tuple(dict.fromkeys(columns))))
        if entry.sla is not None:
            try:
                entry = replace(entry, sla=canonical_duration(entry.sla))
            except ValueError as e:
                context.problems.append(f"{entry.job}: sla: {e}")
                entry = replace(entry, sla=None)
        context.docs[out] = _merged(context.docs.get(out), entry, edges, job)


def _merged(doc: CodeDoc | None, entry: CodeLineage, edges: list[CodeEdge], job: JobRef) -> CodeDoc:
    """Several statements may write one dataset: edges add up, the first documentation found wins."""
    doc = doc or CodeDoc()
    producer = not (entry.kind == "dbt" and entry.job.startswith("source."))  # a dbt source only documents
    return CodeDoc(
        edges=doc.edges + tuple(edges),
        built_by=tuple(dict.fromkeys(doc.built_by + ((job,) if producer else ()))),
        description=doc.description or entry.description,
        owners=tuple(dict.fromkeys(doc.owners + entry.owners)),
        sla=doc.sla or entry.sla,
        tags=tuple(dict.fromkeys(doc.tags + entry.tags)),
        column_descriptions={**entry.column_descriptions, **doc.column_descriptions},
    )


# ------------------------------------------------------------------ JSON, for the store


def doc_to_json(doc: CodeDoc) -> dict:
    return {
        "edges": [
            {
                "upstream": e.upstream,
                "job": [e.job.orchestrator, e.job.flow, e.job.name],
                "columns": [[c.downstream, c.upstream] for c in e.columns],
            }
            for e in doc.edges
        ],
        "description": doc.description,
        "owners": list(doc.owners),
        "sla": doc.sla,
        "tags": list(doc.tags),
        "column_descriptions": doc.column_descriptions,
        "built_by": [[j.orchestrator, j.flow, j.name] for j in doc.built_by],
    }


def doc_from_json(j: dict) -> CodeDoc:
    return CodeDoc(
        edges=tuple(_edge_from_json(e) for e in j["edges"]),
        description=j["description"],
        owners=tuple(j["owners"]),
        sla=j["sla"],
        tags=tuple(j["tags"]),
        column_descriptions=j["column_descriptions"],
        built_by=tuple(JobRef(*b) for b in j.get("built_by", ())),  # stores written before it had them: none
    )


def _edge_from_json(j: dict) -> CodeEdge:
    return CodeEdge(j["upstream"], JobRef(*j["job"]), tuple(ColumnMapping(*c) for c in j["columns"]))
