"""PostgreSQL: tables, partitioned tables, views, materialized views and foreign tables,
read from the system catalogs.

Columns with their types (arrays, enums, domains and composite types resolved), nullability,
defaults, primary keys and comments; row estimates and sizes from the catalog; usage
counters from `pg_stat_user_tables` (scans and row changes: staleness means "not modified
and not queried"); view lineage from the dependencies PostgreSQL records for each view.

Every query is parameterized: no SQL is built from names that came from outside, except the
profile's, where column and table names can only be identifiers: psycopg quotes them as such
(`psycopg.sql.Identifier`), its fraction is bound.
"""

from __future__ import annotations

import json
import re
from fnmatch import fnmatchcase
from typing import cast

import psycopg
from psycopg import sql

from lumos_dagster.code_lineage import StoredSql
from lumos_dagster.floor.datatypes import (
    NO_DEFAULT,
    Array,
    DataType,
    Decimal,
    Enum,
    Field,
    Primitive,
    Schema,
    Struct,
    Time,
    Timestamp,
)
from lumos_dagster.floor.errors import ConfigError, NotProfiled
from lumos_dagster.floor.masking import AMBIGUOUS_PASSWORD
from lumos_dagster.floor.model import ColumnProfile, DatasetRecord, OperationalStats, Profile
from lumos_dagster.floor.naming import name_part
from lumos_dagster.floor.plugins import expand_secrets
from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.sources.base import Progress, TableDescription, TableSource

KINDS = {"r": "table", "p": "table", "v": "view", "m": "materialized_view", "f": "foreign_table"}
_SIMPLE = {
    "bool": "boolean", "int2": "int16", "int4": "int32", "int8": "int64", "float4": "float32", "float8": "float64",
    "text": "string", "varchar": "string", "bpchar": "string", "name": "string", "citext": "string",
    "char": "string", "inet": "string", "cidr": "string", "macaddr": "string", "xml": "string",
    "bytea": "binary", "date": "date", "uuid": "uuid", "json": "json", "jsonb": "json", "interval": "interval",
    "oid": "uint32",
}  # fmt: skip
_LITERAL = re.compile(r"^'((?:[^']|'')*)'(?:::[\w .\"\[\]]+)?$")
_QUOTED = re.compile(r'^"((?:[^"]|"")*)"\."((?:[^"]|"")*)"$')
_PLAIN = re.compile(r"[a-z_][a-z0-9_]*")  # an identifier PostgreSQL never needs to quote

RELATIONS = """
SELECT c.oid, n.nspname, c.relname, c.relkind, obj_description(c.oid, 'pg_class'),
       c.reltuples::bigint, pg_total_relation_size(c.oid)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND NOT c.relispartition
  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_toast%%'
  AND n.nspname NOT LIKE 'pg\\_temp%%'
ORDER BY n.nspname, c.relname
"""
RELATION = RELATIONS.replace("ORDER BY n.nspname, c.relname", "AND n.nspname = %s AND c.relname = %s")
VIEW_SQL = "SELECT pg_get_viewdef(%s, true)"
COLUMNS = """
SELECT a.attname, a.atttypid, format_type(a.atttypid, a.atttypmod), a.atttypmod, a.attnotnull,
       pg_get_expr(d.adbin, d.adrelid), col_description(a.attrelid, a.attnum)
FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum
"""
PRIMARY_KEY = """
SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
WHERE i.indrelid = %s AND i.indisprimary
"""
TYPE = "SELECT typname, typtype, typcategory, typelem, typbasetype, typtypmod, typrelid FROM pg_type WHERE oid = %s"
ENUM = "SELECT enumlabel FROM pg_enum WHERE enumtypid = %s ORDER BY enumsortorder"
USAGE = """
SELECT seq_scan, idx_scan, n_tup_ins, n_tup_upd, n_tup_del, n_live_tup, last_analyze, last_autoanalyze
FROM pg_stat_user_tables WHERE relid = %s
"""
DEPENDS_ON = """
SELECT DISTINCT n.nspname, c.relname
FROM pg_rewrite r
JOIN pg_depend d ON d.objid = r.oid AND d.classid = 'pg_rewrite'::regclass
JOIN pg_class c ON c.oid = d.refobjid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE r.ev_class = %s AND d.refobjid <> %s AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
ORDER BY 1, 2
"""


# a profile's columns, and the table's own bytes (no indexes, no TOAST indexes) that the cap is held against
PROFILE_RELATION = """
SELECT c.oid, c.relkind, pg_table_size(c.oid)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s
"""
PROFILE_COLUMNS = """
SELECT a.attname, t.typcategory FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum
"""
#: type categories (pg_type.typcategory) with an order: min, max and distincts; booleans and UUIDs: distincts
_ORDERED = frozenset("NSDTE")
_COUNTED = _ORDERED | {"B"}
#: what TABLESAMPLE samples: tables, partitioned tables, materialized views (views are not stored)
_SAMPLED_KINDS = frozenset("rpm")


def quote(schema: str, table: str) -> str:
    """The relation's location, quoted as PostgreSQL quotes identifiers."""
    return '"' + schema.replace('"', '""') + '"."' + table.replace('"', '""') + '"'


def unquote(location: str) -> tuple[str, str]:
    m = _QUOTED.match(location)
    if not m:
        raise ValueError(f"not a quoted relation name: {location}")
    return m.group(1).replace('""', '"'), m.group(2).replace('""', '"')


def default_value(expression: str | None):
    """A literal default as a JSON value; any other expression as {"expression": sql}."""
    if expression is None:
        return NO_DEFAULT
    text = expression.strip()
    if text.upper().startswith("NULL"):
        return None
    if text in ("true", "false"):
        return text == "true"
    m = _LITERAL.match(text)
    if m:
        return m.group(1).replace("''", "'")
    try:
        return json.loads(text.split("::")[0].strip("()"))
    except ValueError:
        return {"expression": text}


def _database(info: dict) -> str:
    return info.get("dbname") or info.get("user") or "postgres"


def _shown(dsn: str) -> str:
    """Where the database is, for reports: the DSN as written (its ${VAR}s are expanded only when
    connecting), host, port and database, never credentials."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        if "${" not in dsn:
            raise
        return "postgresql://" + dsn.split("@")[-1]  # a DSN kept in a variable, e.g. ${PG_DSN}
    return f"postgresql://{info.get('host', 'localhost')}:{info.get('port', 5432)}/{_database(info)}"


class PostgresSource(TableSource):
    def __init__(self, config, where: str = "dsn"):
        """`where` names the DSN in errors, e.g. `lumos.yaml: sources[0].dsn`."""
        super().__init__(config)
        self.where = where
        self._types: dict[int, DataType] = {}
        self.root = _shown(config.dsn)

    def _connect(self) -> psycopg.Connection:
        dsn = expand_secrets(self.config.dsn, self.where)
        info = psycopg.conninfo.conninfo_to_dict(dsn)
        if "@" in str(info.get("host", "")):  # libpq's errors would quote the password's end as the host
            raise ConfigError(f"{self.where}: {AMBIGUOUS_PASSWORD}")
        self.database = _database(info)  # names the datasets
        return psycopg.connect(dsn, autocommit=True, connect_timeout=30)

    def name_of(self, schema: str, table: str) -> str:
        """`database/schema/table`, each part escaped (`naming.name_part`) so that no two relations share it."""
        return "/".join(name_part(p) for p in (self.database, schema, table))

    def _wanted(self, schema: str, table: str) -> bool:
        return any(fnmatchcase(schema, p) for p in self.config.schemas) and not any(
            fnmatchcase(f"{schema}.{table}", p) for p in self.config.exclude
        )

    def discover(self, report: ScanReport, progress: Progress | None = None) -> list[DatasetRecord] | None:
        try:
            with self._connect() as conn:
                rows = conn.execute(RELATIONS).fetchall()
                records = []
                for oid, schema, table, kind, _, _, size in rows:
                    if not self._wanted(schema, table):
                        report.skip(f"{schema}.{table}", "excluded by the source's schemas/exclude")
                        continue
                    upstream = tuple(
                        self.name_of(s, t) for s, t in conn.execute(DEPENDS_ON, (oid, oid)) if self._wanted(s, t)
                    )
                    records.append(
                        DatasetRecord(
                            name=self.name_of(schema, table),
                            platform=self.platform,
                            source=self.name,
                            location=quote(schema, table),
                            format=KINDS[kind],
                            domain=schema,
                            total_bytes=size or 0,
                            upstream=upstream,
                        )  # fmt: skip
                    )
        except (psycopg.Error, ConfigError) as exc:
            report.fail(f"source {self.name}", f"cannot read the catalog of {self.root}: {exc}".strip())
            return None
        report.datasets_found += len(records)
        return records

    def stored_sql(self, report: ScanReport) -> StoredSql | None:
        """The views' definitions, for column lineage (the catalog's dependencies give tables only)."""
        try:
            with self._connect() as conn:
                # with an empty search_path PostgreSQL qualifies every table a view reads with its schema
                conn.execute("SELECT set_config('search_path', '', false)")  # this connection only
                wanted = [(oid, s, t, kind) for oid, s, t, kind, *_ in conn.execute(RELATIONS) if self._wanted(s, t)]
                views = [
                    # a SELECT of one function call returns one row
                    (oid, s, t, cast(tuple, conn.execute(VIEW_SQL, (oid,)).fetchone())[0])
                    for oid, s, t, kind in wanted
                    if KINDS[kind] in ("view", "materialized_view")
                ]
        except (psycopg.Error, ConfigError) as exc:
            report.fail(f"source {self.name}", f"cannot read the view definitions of {self.root}: {exc}".strip())
            return None
        # the SQL parser would lose the parts, quotes or case of other names: those relations get plain ones
        plain = {(s, t): quote(s, t) for _, s, t, _ in wanted if _PLAIN.fullmatch(s) and _PLAIN.fullmatch(t)}
        opaque: dict[tuple[str, ...], str] = {
            (s, t): f"lumos_relation_{oid}" for oid, s, t, _ in wanted if (s, t) not in plain
        }
        if opaque:  # the SQL parser loads slowly: only when a name needs it
            from lumos_dagster.code_lineage.sql import rename_tables

            views = [(oid, s, t, rename_tables(body, "postgres", opaque)) for oid, s, t, body in views]
        sql_names = {**plain, **opaque}
        return StoredSql(
            flow=self.name,
            dialect="postgres",
            views=tuple((f"{name_part(s)}.{name_part(t)}", sql_names[s, t], body) for _, s, t, body in views),
            names={sql_names[s, t]: self.name_of(s, t) for _, s, t, _ in wanted},
        )

    def _type(self, conn, oid: int, typmod: int) -> DataType:
        row = conn.execute(TYPE, (oid,)).fetchone()
        if row is None:
            return Primitive("unknown")
        name, typtype, category, elem, base, base_typmod, relid = row
        if typtype == "d":  # a domain: its base type
            return self._type(conn, base, base_typmod)
        if typtype == "e":
            return Enum(tuple(r[0] for r in conn.execute(ENUM, (oid,))), name)
        if typtype == "c":  # a composite type: a struct of its attributes
            return Struct(self._fields(conn, relid, ()))
        if category == "A" and elem:
            return Array(self._type(conn, elem, typmod))
        if name == "numeric":
            if typmod < 4:
                return Primitive("unknown")  # numeric without a declared precision
            return Decimal(((typmod - 4) >> 16) & 0xFFFF, (typmod - 4) & 0xFFFF)
        if name == "money":
            return Decimal(19, 2)
        if name in ("timestamp", "timestamptz"):
            return Timestamp("us", "UTC" if name == "timestamptz" else None)
        if name in ("time", "timetz"):
            return Time("us")
        return Primitive(_SIMPLE.get(name, "unknown"))

    def _fields(self, conn, relid: int, keys: tuple[str, ...]) -> tuple[Field, ...]:
        return tuple(
            Field(
                name=name,
                type=self._type(conn, type_oid, typmod),
                nullable=not not_null,
                default=default_value(default),
                description=comment,
                native_type=native,
                is_key=name in keys,
            )
            for name, type_oid, native, typmod, not_null, default, comment in conn.execute(COLUMNS, (relid,))
        )

    def profile(self, location: str, sample: float, max_bytes: int | None) -> Profile:
        """Row count and, per column, nulls, distincts (exact: PostgreSQL has no approximate count of its
        own), min and max in one query, over `TABLESAMPLE SYSTEM` pages when `sample` or the cap (the
        table's own bytes against `max_bytes`) asks for less than the whole table. A view has no
        size: it is read whole, or its rows filtered by `random()` when `sample` < 1."""
        schema, table = unquote(location)
        try:
            with self._connect() as conn:
                found = conn.execute(PROFILE_RELATION, (schema, table)).fetchone()
                if found is None:
                    raise NotProfiled(f"{location} is gone from {self.root}")
                oid, kind, size = found
                columns = conn.execute(PROFILE_COLUMNS, (oid,)).fetchall()
                fraction, where = _fraction(kind, size or 0, sample, max_bytes)
                query = _profile_query(schema, table, columns, kind, fraction)
                row = cast(tuple, conn.execute(query, where).fetchone())
        except (psycopg.Error, ConfigError) as exc:
            raise NotProfiled(f"{location} on {self.root}: {str(exc).strip().splitlines()[0]}") from exc
        return _profile(row, columns, fraction)

    def describe(self, location: str) -> TableDescription | None:
        schema, table = unquote(location)
        with self._connect() as conn:
            row = conn.execute(RELATION, (schema, table)).fetchone()
            if row is None:
                return None
            oid, _, _, kind, comment, estimate, size = row
            keys = tuple(r[0] for r in conn.execute(PRIMARY_KEY, (oid,)))
            fields = self._fields(conn, oid, keys)
            usage_row = conn.execute(USAGE, (oid,)).fetchone()
            upstream = tuple(self.name_of(s, t) for s, t in conn.execute(DEPENDS_ON, (oid, oid)) if self._wanted(s, t))
        usage = {}
        if usage_row is not None:
            names = ("seq_scan", "idx_scan", "n_tup_ins", "n_tup_upd", "n_tup_del", "n_live_tup", "last_analyze",
                     "last_autoanalyze")  # fmt: skip
            pairs = zip(names, usage_row, strict=True)
            usage = {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in pairs}
        return TableDescription(
            schema=Schema(fields),
            stats=OperationalStats(
                total_bytes=size or 0,
                # reltuples is -1 until the table is first analyzed: unknown, not empty
                row_count=estimate if estimate is not None and estimate >= 0 and KINDS[kind] != "view" else None,
                usage=usage,
            ),
            description=comment,
            upstream=upstream,
        )


def _fraction(kind: str, size: int, sample: float, max_bytes: int | None) -> tuple[float, tuple]:
    """The fraction of rows profiled, and the parameters its query binds."""
    if kind not in _SAMPLED_KINDS:
        return sample, ((sample,) if sample < 1 else ())
    if max_bytes is not None and size > max_bytes:
        sample = min(sample, max_bytes / size)
    return sample, ((sample * 100,) if sample < 1 else ())


def _profile_query(schema: str, table: str, columns: list, kind: str, fraction: float) -> sql.Composed:
    measures: list[sql.Composable] = [sql.SQL("count(*)")]
    for name, category in columns:
        column = sql.Identifier(name)
        measures.append(sql.SQL("count(*) - count({})").format(column))
        if category in _COUNTED:
            measures.append(sql.SQL("count(DISTINCT {})").format(column))
        if category in _ORDERED:
            measures += [sql.SQL("min({})::text").format(column), sql.SQL("max({})::text").format(column)]
    source = sql.SQL("{}.{}").format(sql.Identifier(schema), sql.Identifier(table))
    if fraction < 1:
        # SYSTEM samples whole pages: it reads only those; REPEATABLE: the same pages while the table stays
        sampled = " TABLESAMPLE SYSTEM (%s) REPEATABLE (0)" if kind in _SAMPLED_KINDS else " WHERE random() < %s"
        source = sql.Composed([source, sql.SQL(sampled)])
    return sql.SQL("SELECT {} FROM {}").format(sql.SQL(", ").join(measures), source)


def _profile(row: tuple, columns: list, fraction: float) -> Profile:
    values = iter(row)
    rows = next(values)
    out = []
    for name, category in columns:
        nulls = next(values)
        distinct = next(values) if category in _COUNTED else None
        low, high = (next(values), next(values)) if category in _ORDERED else (None, None)
        out.append(ColumnProfile(name, nulls / rows if rows else None, distinct, low, high))
    return Profile(rows, fraction, tuple(out))
