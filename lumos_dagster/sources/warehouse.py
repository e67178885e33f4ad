"""Warehouses read through INFORMATION_SCHEMA: Snowflake, DuckDB, Redshift, BigQuery and Databricks.

One source; what differs per platform (how to connect, the catalog queries, the SQL dialect)
is a row of `DIALECTS`. Tables and views with their columns (types parsed by sqlglot in the
platform's dialect), nullability, defaults, comments and primary keys; row counts, sizes and
last-altered times where the platform's INFORMATION_SCHEMA has them; view lineage from the
view definitions, read by DataHub's SQL parser in the platform's dialect.

It speaks PEP 249 to each platform's own connector rather than through SQLAlchemy dialects:
snowflake-sqlalchemy has no release that imports under SQLAlchemy 2.1 (pinned) with a connector
fakesnow emulates, and INFORMATION_SCHEMA needs nothing a dialect adds. Every query is
parameterized: names that came from the warehouse are bound, never spliced into SQL.

BigQuery and Databricks were not run against a live service (none can run here): their SQL
is checked by parsing it in their dialect, their rows by mapping the connectors' own row types.
BigQuery's PyPI emulator answers none of the source's queries (docs/sources.md, Warehouses).
"""

from __future__ import annotations

import hashlib
import re
from contextlib import closing
from dataclasses import dataclass, field
from datetime import datetime
from fnmatch import fnmatchcase
from typing import Any, Callable

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from lumos_dagster.code_lineage import StoredSql
from lumos_dagster.floor.datatypes import (
    NO_DEFAULT,
    Array,
    DataType,
    Decimal,
    Field,
    Map,
    Primitive,
    Schema,
    Struct,
    Time,
    Timestamp,
)
from lumos_dagster.floor.errors import ConfigError
from lumos_dagster.floor.extras import needs
from lumos_dagster.floor.masking import mask_secrets
from lumos_dagster.floor.model import DatasetRecord, OperationalStats
from lumos_dagster.floor.naming import name_part
from lumos_dagster.floor.plugins import expand_secrets
from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.sources.base import Progress, TableDescription, TableSource
from lumos_dagster.sources.postgres import default_value, quote, unquote
from lumos_dagster.sources.warehouse_config import (
    BigQuerySourceConfig,
    DatabricksSourceConfig,
    DuckDBSourceConfig,
    RedshiftSourceConfig,
    SnowflakeSourceConfig,
    WarehouseEntry,
)

# ------------------------------------------------------------------ catalog queries
# Each returns the same columns on every platform. TABLES: schema, table, type, comment, rows,
# bytes, last altered. COLUMNS: schema, table, column, type, character length, precision, scale,
# nullable (YES/NO), default, comment. KEYS: one table's primary key columns, by name (column_name).
# VIEWS: schema, view, definition. `{info}` is where INFORMATION_SCHEMA is; `{only}` is replaced
# by a filter on one table's bound schema and name, or by nothing.

_STANDARD_KEYS = """
SELECT k.table_schema, k.table_name, k.column_name
FROM {info}.TABLE_CONSTRAINTS t
JOIN {info}.KEY_COLUMN_USAGE k
  ON k.constraint_name = t.constraint_name AND k.table_schema = t.table_schema AND k.table_name = t.table_name
WHERE t.constraint_type = 'PRIMARY KEY' AND k.table_schema = :schema AND k.table_name = :table
"""
_STANDARD_VIEWS = "SELECT v.table_schema, v.table_name, v.view_definition FROM {info}.VIEWS v WHERE {system}"

DUCKDB = dict(
    tables="""
SELECT t.table_schema, t.table_name, t.table_type, t.TABLE_COMMENT, d.estimated_size, NULL, NULL
FROM information_schema.tables t
LEFT JOIN duckdb_tables() d
  ON d.database_name = t.table_catalog AND d.schema_name = t.table_schema AND d.table_name = t.table_name
WHERE t.table_catalog = current_database() AND t.table_schema NOT IN ('information_schema', 'pg_catalog'){only}
ORDER BY 1, 2""",
    columns="""
SELECT c.table_schema, c.table_name, c.column_name, c.data_type, NULL, NULL, NULL, c.is_nullable, c.column_default,
       c.COLUMN_COMMENT
FROM information_schema.columns c
WHERE c.table_catalog = current_database() AND c.table_schema NOT IN ('information_schema', 'pg_catalog'){only}
ORDER BY c.table_schema, c.table_name, c.ordinal_position""",
    keys=_STANDARD_KEYS,
    views=_STANDARD_VIEWS.replace("{system}", "v.table_catalog = current_database()"),
    database="SELECT current_database()",
)
SNOWFLAKE = dict(
    tables="""
SELECT t.table_schema, t.table_name, t.table_type, t.comment, t.row_count, t.bytes, t.last_altered
FROM information_schema.tables t WHERE t.table_schema <> 'INFORMATION_SCHEMA'{only}
UNION ALL
SELECT t.table_schema, t.table_name, 'VIEW', t.comment, NULL, NULL, t.last_altered
FROM information_schema.views t WHERE t.table_schema <> 'INFORMATION_SCHEMA'{only} AND NOT EXISTS (
  SELECT 1 FROM information_schema.tables x WHERE x.table_schema = t.table_schema AND x.table_name = t.table_name)
ORDER BY 1, 2""",
    columns="""
SELECT c.table_schema, c.table_name, c.column_name, c.data_type, c.character_maximum_length, c.numeric_precision,
       c.numeric_scale, c.is_nullable, c.column_default, c.comment
FROM information_schema.columns c WHERE c.table_schema <> 'INFORMATION_SCHEMA'{only}
ORDER BY c.table_schema, c.table_name, c.ordinal_position""",
    # Snowflake's INFORMATION_SCHEMA has no KEY_COLUMN_USAGE, and SHOW takes no parameters: the table is
    # quoted as an identifier ("" escapes ")
    keys="SHOW PRIMARY KEYS IN TABLE {table}",
    views=_STANDARD_VIEWS.replace("{system}", "v.table_schema <> 'INFORMATION_SCHEMA'"),
    database="SELECT current_database()",
)
# Redshift's PostgreSQL-compatible catalog: format_type, obj_description and reltuples (an estimate,
# kept up by ANALYZE). SVV_TABLE_INFO's exact counts and sizes are Redshift-only: not read.
REDSHIFT = dict(
    tables="""
SELECT t.table_schema, t.table_name, t.table_type, obj_description(r.oid, 'pg_class'),
       CASE WHEN r.relkind = 'r' AND r.reltuples >= 0 THEN r.reltuples::bigint END, NULL, NULL
FROM information_schema.tables t
JOIN pg_namespace n ON n.nspname = t.table_schema
JOIN pg_class r ON r.relnamespace = n.oid AND r.relname = t.table_name
WHERE left(t.table_schema, 3) <> 'pg_' AND t.table_schema <> 'information_schema'{only}
ORDER BY 1, 2""",
    columns="""
SELECT c.table_schema, c.table_name, c.column_name, format_type(a.atttypid, a.atttypmod), NULL, NULL, NULL,
       c.is_nullable, c.column_default, col_description(r.oid, a.attnum)
FROM information_schema.columns c
JOIN pg_namespace n ON n.nspname = c.table_schema
JOIN pg_class r ON r.relnamespace = n.oid AND r.relname = c.table_name
JOIN pg_attribute a ON a.attrelid = r.oid AND a.attname = c.column_name
WHERE left(c.table_schema, 3) <> 'pg_' AND c.table_schema <> 'information_schema'{only}
ORDER BY c.table_schema, c.table_name, c.ordinal_position""",
    keys=_STANDARD_KEYS,
    views=_STANDARD_VIEWS.replace(
        "{system}", "left(v.table_schema, 3) <> 'pg_' AND v.table_schema <> 'information_schema'"
    ),
    database="SELECT current_database()",
)
# region-qualified views: every dataset of the project in that region at once
BIGQUERY = dict(
    tables="""
SELECT t.table_schema, t.table_name, t.table_type, TRIM(o.option_value, '"'), s.total_rows, s.total_logical_bytes,
       s.storage_last_modified_time
FROM {info}.TABLES t
LEFT JOIN {info}.TABLE_OPTIONS o
  ON o.table_schema = t.table_schema AND o.table_name = t.table_name AND o.option_name = 'description'
LEFT JOIN {info}.TABLE_STORAGE s ON s.table_schema = t.table_schema AND s.table_name = t.table_name
WHERE TRUE{only}
ORDER BY 1, 2""",
    columns="""
SELECT c.table_schema, c.table_name, c.column_name, c.data_type, NULL, NULL, NULL, c.is_nullable,
       NULLIF(c.column_default, 'NULL'), p.description
FROM {info}.COLUMNS c
LEFT JOIN {info}.COLUMN_FIELD_PATHS p
  ON p.table_schema = c.table_schema AND p.table_name = c.table_name AND p.field_path = c.column_name
WHERE TRUE{only}
ORDER BY c.table_schema, c.table_name, c.ordinal_position""",
    keys=_STANDARD_KEYS,
    views=_STANDARD_VIEWS.replace("{system}", "TRUE"),
    database="SELECT @@project_id",
)
# Unity Catalog's information_schema of the connection's catalog; Delta sizes need DESCRIBE DETAIL per
# table (not read)
DATABRICKS = dict(
    tables="""
SELECT t.table_schema, t.table_name, t.table_type, t.comment, NULL, NULL, t.last_altered
FROM information_schema.tables t WHERE t.table_schema <> 'information_schema'{only}
ORDER BY 1, 2""",
    columns="""
SELECT c.table_schema, c.table_name, c.column_name, c.full_data_type, NULL, NULL, NULL, c.is_nullable,
       c.column_default, c.comment
FROM information_schema.columns c WHERE c.table_schema <> 'information_schema'{only}
ORDER BY c.table_schema, c.table_name, c.ordinal_position""",
    keys=_STANDARD_KEYS,
    views=_STANDARD_VIEWS.replace("{system}", "v.table_schema <> 'information_schema'"),
    database="SELECT current_catalog()",
)


def _duckdb(config: DuckDBSourceConfig, where: str):
    import duckdb

    return duckdb.connect(config.path, read_only=True)


def _snowflake(config: SnowflakeSourceConfig, where: str):
    import snowflake.connector

    args = {k: v for k in ("account", "user", "database", "warehouse", "role", "connection_name")
            if (v := getattr(config, k)) is not None}  # fmt: skip
    if config.password is not None:
        args["password"] = expand_secrets(config.password, f"{where}.password")
    args.update({k: expand_secrets(v, f"{where}.connect_args.{k}") for k, v in config.connect_args.items()})
    return snowflake.connector.connect(**args)


def _redshift(config: RedshiftSourceConfig, where: str):
    import psycopg

    return psycopg.connect(expand_secrets(config.dsn, f"{where}.dsn"), autocommit=True, connect_timeout=30)


def _bigquery(config: BigQuerySourceConfig, where: str):
    from google.cloud import bigquery
    from google.cloud.bigquery import dbapi

    return dbapi.connect(bigquery.Client(project=config.project, location=config.region))


def _bigquery_dataset(config: BigQuerySourceConfig, schema: str) -> str:
    """Where a dataset's own INFORMATION_SCHEMA is: TABLE_CONSTRAINTS and KEY_COLUMN_USAGE take only a
    dataset qualifier, not a region's. A dataset name is letters, digits and underscores, so quoted it
    is an identifier and nothing else."""
    if not re.fullmatch(r"\w{1,1024}", schema, re.ASCII):
        raise ValueError(f"not a BigQuery dataset name: {schema!r}")
    return f"`{config.project}`.`{schema}`.INFORMATION_SCHEMA"


def _databricks(config: DatabricksSourceConfig, where: str):
    from databricks import sql

    token = expand_secrets(config.access_token, f"{where}.access_token")
    return sql.connect(server_hostname=config.server_hostname, http_path=config.http_path, access_token=token,
                       catalog=config.catalog)  # fmt: skip


def _shown_redshift(config: RedshiftSourceConfig) -> str:
    from lumos_dagster.sources.postgres import _shown

    return "redshift" + _shown(config.dsn).removeprefix("postgresql")


@dataclass(frozen=True)
class Dialect:
    """What differs per platform."""

    sqlglot: str  # the SQL dialect of its views and type names
    paramstyle: str  # its connector's PEP 249 paramstyle
    connect: Callable[[Any, str], Any]  # (config, where in lumos.yaml) → a PEP 249 connection
    shown: Callable[[Any], str]  # where it is, for reports: never credentials
    queries: dict[str, str]
    info: Callable[[Any], str] = lambda config: "information_schema"
    # where the keys query's INFORMATION_SCHEMA is, by (config, schema), when not `info`'s
    keys_info: Callable[[Any, str], str] | None = None
    fold: bool = False  # names are case-insensitive and uppercase: lowercased, as DataHub's source does
    setup: str | None = None  # run first on each connection
    live: bool = True  # False: never run against the live service (none can run where Lumos is tested)


DIALECTS: dict[str, Dialect] = {
    "duckdb": Dialect("duckdb", "qmark", _duckdb, lambda c: f"duckdb://{c.path}", DUCKDB),
    "snowflake": Dialect(
        "snowflake", "pyformat", _snowflake,
        lambda c: f"snowflake://{c.account or c.connection_name or 'default'}/{c.database}", SNOWFLAKE,
        fold=True,
    ),
    # with only pg_catalog on the search_path, view definitions qualify every table they read
    "redshift": Dialect("redshift", "format", _redshift, _shown_redshift, REDSHIFT,
                        setup="SET search_path TO pg_catalog"),
    "bigquery": Dialect(
        "bigquery", "pyformat", _bigquery, lambda c: f"bigquery://{c.project}/region-{c.region}", BIGQUERY,
        info=lambda c: f"`region-{c.region}`.INFORMATION_SCHEMA", keys_info=_bigquery_dataset, live=False,
    ),
    "databricks": Dialect(
        "databricks", "named", _databricks, lambda c: f"databricks://{c.server_hostname}/{c.catalog}", DATABRICKS,
        live=False,
    ),
}  # fmt: skip

UNTESTED = (
    "the {platform} source was not run against a live {platform} service: its SQL is tested by parsing it "
    "in that dialect, its row mapping with the connector's row type"
)
_NAMED = re.compile(r"(?<![:\w]):(schema|table)\b")


def bind(sql: str, params: dict[str, str], paramstyle: str) -> tuple[str, Any]:
    """`sql` with its `:schema`/`:table` placeholders in the connector's paramstyle, and its parameters."""
    if paramstyle == "named":
        return sql, params
    if paramstyle == "pyformat":
        return _NAMED.sub(lambda m: f"%({m.group(1)})s", sql), params
    order = [m.group(1) for m in _NAMED.finditer(sql)]
    mark = "?" if paramstyle == "qmark" else "%s"
    return _NAMED.sub(mark, sql), tuple(params[n] for n in order)


# ------------------------------------------------------------------ types

_T = exp.DataType.Type
_SIMPLE = {
    _T.BOOLEAN: "boolean", _T.TINYINT: "int8", _T.SMALLINT: "int16", _T.INT: "int32", _T.BIGINT: "int64",
    _T.UTINYINT: "uint8", _T.USMALLINT: "uint16", _T.UINT: "uint32", _T.UBIGINT: "uint64",
    _T.FLOAT: "float32", _T.DOUBLE: "float64", _T.DATE: "date", _T.UUID: "uuid", _T.JSON: "json",
    _T.JSONB: "json", _T.VARIANT: "json", _T.OBJECT: "json", _T.INTERVAL: "interval",
}  # fmt: skip
_STRINGS = {_T.VARCHAR, _T.NVARCHAR, _T.CHAR, _T.NCHAR, _T.TEXT, _T.NAME, _T.BPCHAR}
_BINARY = {_T.BINARY, _T.VARBINARY, _T.BLOB}
_ZONED = {_T.TIMESTAMPTZ, _T.TIMESTAMPLTZ}
_LOCAL = {_T.TIMESTAMP, _T.TIMESTAMPNTZ, _T.DATETIME}
# BigQuery's NUMERIC and BIGNUMERIC without parameters
_DEFAULT_DECIMAL = {_T.DECIMAL: (38, 9), _T.BIGDECIMAL: (76, 38)}


def native_type(data_type: str, length, precision, scale) -> str:
    """The column's type as the platform writes it, from INFORMATION_SCHEMA's pieces where it splits them."""
    if "(" in data_type or data_type.endswith("]"):
        return data_type
    if precision is not None and scale is not None:
        return f"{data_type}({precision},{scale})"
    if length is not None:
        return f"{data_type}({length})"
    return data_type


def to_type(native: str, dialect: str) -> DataType:
    """A type name of the platform, read by sqlglot in its dialect; unknown when sqlglot cannot read it."""
    try:
        return _convert(exp.DataType.build(native, dialect=dialect), dialect)
    except (SqlglotError, ValueError):
        return Primitive("unknown")


def _literal(node) -> int:
    return int(node.this.name if isinstance(node, exp.DataTypeParam) else node.name)


def _convert(t: exp.DataType, dialect: str) -> DataType:
    kind = t.this
    if kind in _SIMPLE:
        return Primitive(_SIMPLE[kind])
    if kind in _STRINGS:
        return Primitive("string")
    if kind in _BINARY:
        return Primitive("binary")
    if kind in (_T.DECIMAL, _T.BIGDECIMAL):
        if len(t.expressions) == 2:
            return Decimal(_literal(t.expressions[0]), _literal(t.expressions[1]))
        if len(t.expressions) == 1:
            return Decimal(_literal(t.expressions[0]), 0)
        if dialect == "bigquery":
            return Decimal(*_DEFAULT_DECIMAL[kind])
        return Primitive("unknown")
    if kind in _ZONED or kind in _LOCAL:
        return Timestamp("us", "UTC" if kind in _ZONED else None)
    if kind in (_T.TIME, _T.TIMETZ):
        return Time("us")
    if kind == _T.ARRAY and t.expressions:
        return Array(_convert(t.expressions[0], dialect))
    if kind == _T.MAP and len(t.expressions) == 2:
        return Map(_convert(t.expressions[0], dialect), _convert(t.expressions[1], dialect))
    if kind == _T.STRUCT:
        return Struct(tuple(Field(name=c.name, type=_convert(c.args["kind"], dialect)) for c in t.expressions))
    return Primitive("unknown")


# ------------------------------------------------------------------ the source


@dataclass
class _Relation:
    schema: str
    table: str
    kind: str
    comment: str | None
    rows: int | None
    size: int | None
    altered: datetime | None
    columns: list = field(default_factory=list)  # COLUMNS rows, in order


def _kind(table_type: str) -> str:
    upper = (table_type or "").upper()
    if "MATERIALIZED" in upper:
        return "materialized_view"
    return "view" if "VIEW" in upper else "table"


def _rows(cursor) -> list[dict[str, Any]]:
    """The rows as dicts by lowercased column name: SHOW commands name their columns, not order them."""
    names = [d[0].lower() for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


class WarehouseSource(TableSource[WarehouseEntry]):
    def __init__(self, config: WarehouseEntry, where: str = "source"):
        """`where` names the entry in errors, e.g. `lumos.yaml: sources[0]`."""
        super().__init__(config)
        self.where = where
        self.dialect = DIALECTS[config.type]
        self.root = self.dialect.shown(config)
        self.database = ""  # read when connecting: it names the datasets

    # --- reading

    def _connect(self):
        with needs("warehouses", f"{self.where} (type {self.config.type})"):
            conn = self.dialect.connect(self.config, self.where)
        try:
            if self.dialect.setup:
                self._fetch(conn, self.dialect.setup)
            self.database = self._fetch(conn, self.dialect.queries["database"])[0][0]
        except BaseException:
            conn.close()
            raise
        return conn

    def _fetch(self, conn, sql: str, params: dict[str, str] | None = None) -> list:
        text = sql.replace("{info}", self.dialect.info(self.config))
        cursor = conn.cursor()
        try:
            if params is None:
                cursor.execute(text)
            else:
                cursor.execute(*bind(text, params, self.dialect.paramstyle))
            return cursor.fetchall() if cursor.description else []
        finally:
            cursor.close()

    def _keys(self, conn, schema: str, table: str) -> set[str]:
        keys_info = self.dialect.keys_info
        info = keys_info(self.config, schema) if keys_info else self.dialect.info(self.config)
        sql = self.dialect.queries["keys"].replace("{info}", info)
        cursor = conn.cursor()
        try:
            if "{table}" in sql:
                cursor.execute(sql.replace("{table}", quote(schema, table)))
            else:
                cursor.execute(*bind(sql, {"schema": schema, "table": table}, self.dialect.paramstyle))
            return {r["column_name"] for r in _rows(cursor)}
        finally:
            cursor.close()

    def _relations(self, conn, only: tuple[str, str] | None = None) -> dict[tuple[str, str], _Relation]:
        params = None
        filters = {"tables": "", "columns": ""}
        if only is not None:
            params = {"schema": only[0], "table": only[1]}
            filters = {q: f" AND {a}.table_schema = :schema AND {a}.table_name = :table" for q, a in
                       (("tables", "t"), ("columns", "c"))}  # fmt: skip
        queries = self.dialect.queries
        relations = {
            (s, t): _Relation(s, t, _kind(kind), comment, rows, size, altered)
            for s, t, kind, comment, rows, size, altered in self._fetch(
                conn, queries["tables"].replace("{only}", filters["tables"]), params
            )
            if self._wanted(s, t)
        }
        for row in self._fetch(conn, queries["columns"].replace("{only}", filters["columns"]), params):
            if (rel := relations.get((row[0], row[1]))) is not None:
                rel.columns.append(row)
        return relations

    def _views(self, conn) -> dict[tuple[str, str], str]:
        """Each view's SELECT, its tables qualified with the view's schema."""
        out = {}
        for schema, table, definition in self._fetch(conn, self.dialect.queries["views"]):
            if definition and self._wanted(schema, table):
                out[schema, table] = self._select_of(definition, schema)
        return out

    def _select_of(self, definition: str, schema: str) -> str:
        try:
            tree = sqlglot.parse_one(definition, read=self.dialect.sqlglot)
        except SqlglotError:
            return definition  # the lineage parser reports why it cannot read it
        if isinstance(tree, exp.Create) and tree.expression is not None:
            tree = tree.expression
        ctes = {c.alias_or_name for c in tree.find_all(exp.CTE)}
        for t in tree.find_all(exp.Table):
            if t.name in ctes and not t.db:
                continue
            if t.catalog and self._same(t.catalog, self.database):
                t.set("catalog", None)  # the database's own tables: named as the names map names them
            if not t.db:
                t.set("db", exp.to_identifier(schema, quoted=True))
        return tree.sql(dialect=self.dialect.sqlglot)

    def _same(self, a: str, b: str) -> bool:
        return a.lower() == b.lower() if self.dialect.fold else a == b

    def _upstream(self, select: str, known) -> tuple[str, ...]:
        try:
            tree = sqlglot.parse_one(select, read=self.dialect.sqlglot)
        except SqlglotError:
            return ()
        by_key = {self._fold(f"{s}.{t}"): (s, t) for s, t in known}
        found = {by_key[k] for t in tree.find_all(exp.Table) if (k := self._fold(f"{t.db}.{t.name}")) in by_key}
        return tuple(sorted(self.name_of(s, t) for s, t in found))

    def _fold(self, text: str) -> str:
        return text.lower() if self.dialect.fold else text

    def name_of(self, schema: str, table: str) -> str:
        """`database/schema/table`, each part escaped (`naming.name_part`); lowercase where names fold."""
        return "/".join(name_part(self._fold(p)) for p in (self.database, schema, table))

    def _wanted(self, schema: str, table: str) -> bool:
        # where names fold, globs do too: `schemas: [crm]` is Snowflake's CRM, shown as `crm`
        f = self._fold
        return any(fnmatchcase(f(schema), f(p)) for p in self.config.schemas) and not any(
            fnmatchcase(f(f"{schema}.{table}"), f(p)) for p in self.config.exclude
        )

    def _failed(self, report: ScanReport, what: str, exc: Exception) -> None:
        # connectors' errors may quote the connection string they were given
        reason = mask_secrets(f"{type(exc).__name__}: {exc}".strip())
        report.fail(f"source {self.name}", f"cannot read {what} of {self.root}: {reason}")

    # --- the TableSource contract

    def discover(self, report: ScanReport, progress: Progress | None = None) -> list[DatasetRecord] | None:
        try:
            with closing(self._connect()) as conn:
                relations, views = self._relations(conn), self._views(conn)
        except ConfigError as exc:
            report.fail(f"source {self.name}", str(exc))
            return None
        except Exception as exc:  # each connector raises its own errors: any is "cannot be reached"
            self._failed(report, "the catalog", exc)
            return None
        records = [
            DatasetRecord(
                name=self.name_of(r.schema, r.table),
                platform=self.platform,
                source=self.name,
                location=quote(r.schema, r.table),
                format=r.kind,
                domain=self._fold(r.schema),
                total_bytes=r.size or 0,
                upstream=self._upstream(views[key], relations) if key in views else (),
            )
            for key, r in relations.items()
        ]
        report.datasets_found += len(records)
        if not self.dialect.live:
            report.note(f"source {self.name}", UNTESTED.format(platform=self.config.type))
        return records

    def stored_sql(self, report: ScanReport) -> StoredSql | None:
        """The views' definitions, for column lineage through DataHub's parser in the platform's dialect."""
        try:
            with closing(self._connect()) as conn:
                relations, views = self._relations(conn), self._views(conn)
        except Exception as exc:
            self._failed(report, "the view definitions", exc)
            return None
        return StoredSql(
            flow=self.name,
            dialect=self.dialect.sqlglot,
            views=tuple((f"{self._fold(s)}.{self._fold(t)}", f"{s}.{t}", body) for (s, t), body in views.items()),
            names={f"{s}.{t}": self.name_of(s, t) for s, t in relations},
        )

    def describe(self, location: str) -> TableDescription | None:
        schema, table = unquote(location)
        with closing(self._connect()) as conn:
            rel = self._relations(conn, (schema, table)).get((schema, table))
            if rel is None:
                return None
            keys = self._keys(conn, schema, table)
            views = self._views(conn) if rel.kind != "table" else {}
            known = self._relations(conn) if views else {}
        return TableDescription(
            schema=Schema(self.fields(rel.columns, keys)),
            stats=OperationalStats(
                total_bytes=rel.size or 0,
                row_count=rel.rows if rel.kind == "table" else None,
                last_modified=rel.altered,
            ),
            description=rel.comment or None,
            upstream=self._upstream(views[schema, table], known) if (schema, table) in views else (),
        )

    def fields(self, columns, keys: set[str]) -> tuple[Field, ...]:
        """COLUMNS rows (one table's, in order) as fields."""
        out = []
        for _, _, name, data_type, length, precision, scale, nullable, default, comment in columns:
            native = native_type(data_type, length, precision, scale)
            out.append(
                Field(
                    name=self._fold(name),
                    type=to_type(native, self.dialect.sqlglot),
                    nullable=str(nullable).upper() != "NO",
                    default=NO_DEFAULT if default is None else default_value(str(default)),
                    description=comment or None,
                    native_type=native,
                    is_key=name in keys,
                )
            )
        return tuple(out)

    def fingerprints(self, report: ScanReport) -> dict[str, tuple[str, str]] | None:
        """Location → (dataset name, digest of its columns, comment, rows, size and last change),
        from the two listing queries: what the change sensor compares between ticks."""
        try:
            with closing(self._connect()) as conn:
                relations = self._relations(conn)
        except Exception as exc:
            self._failed(report, "the catalog", exc)
            return None
        out = {}
        for r in relations.values():
            state = repr((r.kind, r.comment, r.rows, r.size, str(r.altered), [tuple(map(str, c)) for c in r.columns]))
            out[quote(r.schema, r.table)] = (self.name_of(r.schema, r.table), hashlib.sha1(state.encode()).hexdigest())
        return out
