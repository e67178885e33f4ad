"""Lineage and documentation from a dbt `manifest.json` (v11/v12 shape; older `compiled_sql` too).

Each model, seed and snapshot gives one `CodeLineage`: its relation, the relations it depends on,
its docs and meta (owner, sla), and column edges parsed from its compiled SQL. Each source gives
its documentation only (description, columns, owner; its freshness `warn_after` as the SLA): it is
usually a lake table Lumos scans, and dbt is where it got documented. Relations are
`database.schema.alias` (sources: `database.schema.identifier`), lowercase.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

from datahub.sql_parsing.sqlglot_utils import get_dialect
from pydantic import BaseModel, Field, ValidationError

from lumos_dagster.code_lineage import CodeLineage, ColumnEdge, split_values
from lumos_dagster.code_lineage.sql import parse_sql

_PRODUCERS = ("model", "seed", "snapshot")
_RELATIONS = (*_PRODUCERS, "source")

M = TypeVar("M", bound=BaseModel)


class _Column(BaseModel):
    description: str | None = None


class _Config(BaseModel):
    meta: dict[str, Any] = {}


class _DependsOn(BaseModel):
    nodes: list[str] = []


class _After(BaseModel):
    count: int | None = None
    period: str | None = None


class _Freshness(BaseModel):
    warn_after: _After = _After()


class _Node(BaseModel):
    resource_type: str
    name: str
    database: str | None = None
    schema_: str = Field(alias="schema")
    alias: str | None = None
    identifier: str | None = None  # sources
    description: str | None = None
    columns: dict[str, _Column] = {}
    meta: dict[str, Any] = {}
    config: _Config = _Config()
    tags: list[str] = []
    depends_on: _DependsOn = _DependsOn()
    compiled_code: str | None = None
    compiled_sql: str | None = None  # manifests before v7
    freshness: _Freshness | None = None  # sources

    @property
    def relation(self) -> str:
        table = self.identifier or self.alias or self.name
        return ".".join(part for part in (self.database, self.schema_, table) if part).lower()


class _Metadata(BaseModel):
    adapter_type: str | None = None


class _Manifest(BaseModel):
    metadata: _Metadata = _Metadata()
    # node bodies are checked one by one, and only for the resource types read here
    nodes: dict[str, dict[str, Any]]
    sources: dict[str, dict[str, Any]] = {}


def read_manifest(path: str | Path, dialect: str | None = None) -> list[CodeLineage]:
    """One entry per model, seed, snapshot and source, sorted by unique_id.

    The SQL dialect defaults to the manifest's adapter when sqlglot knows it. Raises ValueError
    naming the file when the manifest is not one.
    """
    path = Path(path)
    manifest = _validated(_Manifest, _load_json(path), path, "")
    relations = {
        unique_id: _validated(_Node, body, path, f"{unique_id}: ")
        for unique_id, body in {**manifest.nodes, **manifest.sources}.items()
        if body.get("resource_type") in _RELATIONS
    }
    dialect = dialect or _known_dialect(manifest.metadata.adapter_type)
    schemas = {node.relation: list(node.columns) for node in relations.values() if node.columns}
    return [_entry(unique_id, node, relations, dialect, schemas) for unique_id, node in sorted(relations.items())]


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not a JSON dbt manifest: {e}") from e


def _validated(model: type[M], data: Any, path: Path, where: str) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or 'top level'}: {err['msg']}" for err in e.errors())
        raise ValueError(f"{path}: {where}{problems}") from e


def _known_dialect(adapter: str | None) -> str | None:
    if adapter is None:
        return None
    try:
        get_dialect(adapter)
    except ValueError:  # e.g. dbt-sqlserver: leave it to the default dialect
        return None
    return adapter


def _entry(
    unique_id: str, node: _Node, relations: dict[str, _Node], dialect: str | None, schemas: dict[str, list[str]]
) -> CodeLineage:
    inputs, errors = _inputs(unique_id, node, relations)
    columns: tuple[ColumnEdge, ...] = ()
    code = node.compiled_code or node.compiled_sql
    if code:
        parsed = parse_sql(code, unique_id, dialect, schemas, output=node.relation)
        columns = tuple(edge for entry in parsed for edge in entry.columns)
        errors += tuple(error for entry in parsed for error in entry.errors)
    return CodeLineage(
        job=unique_id,
        kind="dbt",
        output=node.relation,
        inputs=inputs,
        columns=columns,
        description=node.description or None,
        owners=_owners(node),
        sla=_sla(node),
        tags=tuple(dict.fromkeys(node.tags)),
        column_descriptions={name: c.description for name, c in node.columns.items() if c.description},
        errors=errors,
    )


def _inputs(unique_id: str, node: _Node, relations: dict[str, _Node]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The relations `node` depends on, and an error for each relation missing from the manifest."""
    found, errors = set(), []
    for dependency in node.depends_on.nodes:
        if dependency in relations:
            found.add(relations[dependency].relation)
        elif dependency.partition(".")[0] in _RELATIONS:
            errors.append(f"{unique_id}: depends on {dependency}, which the manifest does not define")
    return tuple(sorted(found)), tuple(errors)


def _meta(node: _Node, key: str) -> Any:
    """`meta` at the node, else in its config: manifests carry it in either, by dbt version and project style."""
    value = node.meta.get(key)
    return value if value is not None else node.config.meta.get(key)


def _owners(node: _Node) -> tuple[str, ...]:
    owners = _meta(node, "owner")
    listed = [owners] if isinstance(owners, str) else owners if isinstance(owners, list) else []
    return split_values(str(owner) for owner in listed)


def _sla(node: _Node) -> str | None:
    sla = _meta(node, "sla")
    if sla is None and node.freshness and node.freshness.warn_after.count and node.freshness.warn_after.period:
        sla = f"{node.freshness.warn_after.count} {node.freshness.warn_after.period}"  # `12 hour`
    return None if sla is None else str(sla)
