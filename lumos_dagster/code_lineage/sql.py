"""Lineage from SQL text and folders of .sql files, through DataHub's SQL parser.

Each statement that writes a table (INSERT, INSERT OVERWRITE, CREATE TABLE/VIEW ... AS, MERGE, UPDATE)
gives one `CodeLineage`; a SELECT does too when the file names its output in a `-- dataset:` header
(a dbt-like model file). Comments at the very top of a file document its outputs:

    -- description: Revenue per day
    -- owner: alice@example.com, bob@example.com
    -- sla: 6h
    -- tags: finance, daily
    -- dataset: analytics.daily_revenue

(`/* ... */` blocks with the same `key: value` lines work too; owners and tags may repeat.)
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import sqlglot
from datahub.metadata.urns import DatasetUrn
from datahub.sql_parsing.schema_resolver import SchemaResolver
from datahub.sql_parsing.split_statements import split_statements
from datahub.sql_parsing.sql_parsing_common import DIALECTS_WITH_CASE_INSENSITIVE_COLS, QueryType
from datahub.sql_parsing.sqlglot_lineage import SqlParsingResult, _TableName, sqlglot_lineage
from datahub.sql_parsing.sqlglot_utils import get_dialect, is_dialect_instance, parse_statement
from sqlglot import exp
from sqlglot.errors import ErrorLevel, ParseError, SqlglotError

from lumos_dagster.code_lineage import CodeLineage, ColumnEdge, normalize_table_name, split_values

DEFAULT_DIALECT = "hive"  # the lake's jobs are Hive / Spark SQL
# The parser's URNs only carry names back to us: a fixed platform keeps its platform-specific
# name rewrites (BigQuery shard suffixes) out of the way, whatever the dialect
_PLATFORM = "hive"
_WRITES = {QueryType.INSERT, QueryType.CREATE_TABLE_AS_SELECT, QueryType.CREATE_VIEW, QueryType.MERGE, QueryType.UPDATE}
# sqlglot keeps statements it has no grammar for as a Command: only these may hide a lost write
_WRITE_VERBS = {"INSERT", "CREATE", "REPLACE", "MERGE", "UPDATE"}


@dataclass(frozen=True)
class _Header:
    description: str | None = None
    owners: tuple[str, ...] = ()
    sla: str | None = None
    tags: tuple[str, ...] = ()
    dataset: str | None = None


def parse_sql(
    text: str,
    job: str,
    dialect: str | None = None,
    schemas: dict[str, list[str]] | None = None,
    *,
    output: str | None = None,
) -> list[CodeLineage]:
    """Lineage of each writing statement in `text`, in order.

    `schemas` (normalized table name -> column names) lets `SELECT *` expand into column edges;
    `output` names what a SELECT produces, as a `-- dataset:` header does. A statement the parser
    cannot read still gives its table-level lineage from sqlglot where possible, with the problem in
    `errors`; when not even its target is known, the entry's output is "".
    """
    dialect = dialect or DEFAULT_DIALECT
    header = _parse_header(text)
    target = normalize_table_name(output) if output else header.dataset
    entries: list[CodeLineage] = []
    with _resolver(schemas) as resolver:
        for line, statement in _statements(text, dialect):
            result = sqlglot_lineage(statement, resolver, override_dialect=dialect)
            if result.debug_info.table_error is None:
                entries += _from_parser(result, statement, job, dialect, target)
            else:
                error = f"{job}: {_describe(result.debug_info.table_error, line)}"
                entries += _from_sqlglot(statement, job, dialect, target, error)
    return [_documented(entry, header) for entry in entries]


def parse_sql_folder(
    folder: str | Path, dialect: str | None = None, schemas: dict[str, list[str]] | None = None
) -> list[CodeLineage]:
    """`parse_sql` over every *.sql file under `folder` (sorted); job = the path relative to it."""
    root = Path(folder)
    entries: list[CodeLineage] = []
    for path in sorted(root.rglob("*.sql")):
        job = path.relative_to(root).as_posix()
        try:
            entries += parse_sql(path.read_text(encoding="utf-8"), job, dialect, schemas)
        except Exception as e:  # one unreadable file, or a parser bug on it, must not hide the others
            entries.append(CodeLineage(job, "sql", "", (), errors=(f"{job}: {type(e).__name__}: {e}",)))
    return entries


def rename_tables(statement: str, dialect: str, names: dict[tuple[str, ...], str]) -> str:
    """`statement` reading each table of `names` (its parts → a plain one-part name) under the new name,
    aliased to its old one so that column references still resolve. The parser joins a table's parts
    with dots and drops quotes, so `"a.b"."c"` or `"x""y"` would come back as some other table.
    Unchanged when sqlglot cannot read it (the parser then reports why)."""
    try:
        trees = sqlglot.parse(statement, read=get_dialect(dialect))
    except SqlglotError:
        return statement
    renamed = False
    for table in (t for tree in trees if tree for t in tree.find_all(exp.Table)):
        new = names.get(tuple(part.name for part in table.parts))
        if new is None:
            continue
        if not table.alias:
            table.set("alias", exp.TableAlias(this=exp.to_identifier(table.name, quoted=True)))
        for key in ("catalog", "db"):
            table.set(key, None)
        table.set("this", exp.to_identifier(new))
        renamed = True
    return ";\n".join(tree.sql(dialect=get_dialect(dialect)) for tree in trees if tree) if renamed else statement


# --- header ------------------------------------------------------------------------------------------

_LEADING_COMMENT = re.compile(r"\s*(--[^\n]*|/\*.*?\*/)", re.DOTALL)
_KEY_VALUE = re.compile(r"(\w+)\s*:\s*(.*)")
_KEY_ALIASES = {"owners": "owner", "tag": "tags"}


def _header_lines(text: str) -> Iterator[str]:
    """The lines of the comments before the first SQL token, comment markers removed."""
    pos = 0
    while match := _LEADING_COMMENT.match(text, pos):
        comment = match.group(1)
        body = comment[2:-2] if comment.startswith("/*") else comment[2:]
        for line in body.splitlines():
            yield line.strip().lstrip("-*").strip()
        pos = match.end()


def _parse_header(text: str) -> _Header:
    values: dict[str, list[str]] = {}
    for line in _header_lines(text):
        if match := _KEY_VALUE.fullmatch(line):
            key = match[1].lower()
            values.setdefault(_KEY_ALIASES.get(key, key), []).append(match[2].strip())
    description = " ".join(v for v in values.get("description", []) if v)
    sla = next((v for v in values.get("sla", []) if v), None)
    dataset = next((v for v in values.get("dataset", []) if v), None)
    return _Header(
        description=description or None,
        owners=split_values(values.get("owner", [])),
        sla=sla,
        tags=split_values(values.get("tags", [])),
        dataset=normalize_table_name(dataset) if dataset else None,
    )


def _documented(entry: CodeLineage, header: _Header) -> CodeLineage:
    return replace(entry, description=header.description, owners=header.owners, sla=header.sla, tags=header.tags)


# --- statements through DataHub's parser ---------------------------------------------------------------


def _resolver(schemas: dict[str, list[str]] | None) -> SchemaResolver:
    resolver = SchemaResolver(platform=_PLATFORM)
    for name, columns in (schemas or {}).items():
        *qualifiers, table = normalize_table_name(name).split(".")
        database, db_schema = ([None, None] + qualifiers)[-2:]
        urn = resolver.get_urn_for_table(_TableName(database=database, db_schema=db_schema, table=table))
        # types are unknown here and the parser needs only the names
        resolver.add_raw_schema_info(urn, {column: "string" for column in columns})
    return resolver


def _statements(text: str, dialect: str) -> Iterator[tuple[int, str]]:
    """Each statement with the file line its text starts on, so errors can point into the file."""
    offset = 0
    for statement in split_statements(text, dialect):
        offset = text.find(statement, offset)  # statements are verbatim slices of the text
        yield text.count("\n", 0, offset) + 1, statement
        offset += len(statement)


def _from_parser(
    result: SqlParsingResult, statement: str, job: str, dialect: str, target: str | None
) -> list[CodeLineage]:
    if result.query_type in _WRITES:
        outputs = [_urn_table(urn) for urn in result.out_tables]
    elif result.query_type is QueryType.SELECT and target:
        outputs = [target]
    else:
        return []
    inputs = tuple(sorted({_urn_table(urn) for urn in result.in_tables}))
    edges = _column_edges(result, statement, dialect, target)
    column_error = result.debug_info.column_error
    errors = (f"{job}: no column lineage: {_first_line(column_error)}",) if column_error else ()
    return [
        CodeLineage(job, "sql", out, inputs, tuple(e for table, e in edges if table == out), errors=errors)
        for out in outputs
    ]


def _column_edges(
    result: SqlParsingResult, statement: str, dialect: str, target: str | None
) -> list[tuple[str | None, ColumnEdge]]:
    """(output table, edge) pairs; a SELECT's columns belong to `target`."""
    lineage = result.column_lineage or []
    names = [info.downstream.column for info in lineage]
    listed = _insert_column_list(statement, dialect)
    # The parser names an INSERT's columns after the SELECT's; an explicit column list says where they land
    if len(listed) == len(names):
        names = listed
    return [
        (
            _urn_table(info.downstream.table) if info.downstream.table else target,
            ColumnEdge(name, _urn_table(u.table), u.column),
        )
        for name, info in zip(names, lineage, strict=True)
        for u in info.upstreams
    ]


def _insert_column_list(statement: str, dialect: str) -> list[str]:
    parsed_dialect = get_dialect(dialect)
    tree = parse_statement(statement, parsed_dialect)  # cached: the parser has just parsed it
    if not (isinstance(tree, exp.Insert) and isinstance(tree.this, exp.Schema)):
        return []
    return [_column_name(ident, parsed_dialect) for ident in tree.this.expressions]


def _column_name(ident: exp.Expression, dialect: sqlglot.Dialect) -> str:
    """Spelled as the parser spells its own output columns."""
    if is_dialect_instance(dialect, DIALECTS_WITH_CASE_INSENSITIVE_COLS):
        return ident.name.lower()
    return dialect.normalize_identifier(ident.copy()).name


def _urn_table(urn: str) -> str:
    return normalize_table_name(DatasetUrn.from_string(urn).name)


# --- fallback: table-level lineage from sqlglot alone ----------------------------------------------------


def _from_sqlglot(statement: str, job: str, dialect: str, target: str | None, error: str) -> list[CodeLineage]:
    """Table-level lineage of a statement the parser rejected, each entry carrying `error`."""
    try:
        # sqlglot splits on every ';', also those an unbalanced '(' kept in one statement
        trees = [t for t in sqlglot.parse(statement, read=get_dialect(dialect), error_level=ErrorLevel.IGNORE) if t]
    except SqlglotError:  # not even tokenizable
        trees = []
    recovered = [found for tree in trees if (found := _tables_of(tree, target))]
    if recovered:
        return [CodeLineage(job, "sql", output, inputs, errors=(error,)) for output, inputs in recovered]
    if trees and all(_is_maintenance(tree) for tree in trees):
        return []
    return [CodeLineage(job, "sql", target or "", (), errors=(error,))]


def _tables_of(tree: exp.Expr, target: str | None) -> tuple[str, tuple[str, ...]] | None:
    """(output, inputs) of a statement that writes, or of a SELECT when the file names its output."""
    written = _written_table(tree)
    if written is not None:
        return _table_name(written), _read_tables(tree, written)
    if isinstance(tree, exp.Query) and target:
        return target, _read_tables(tree, None)
    return None


def _is_maintenance(tree: exp.Expr) -> bool:
    """A statement sqlglot does not model (MSCK REPAIR, ADD JAR, VACUUM...) that writes no data."""
    return isinstance(tree, exp.Command) and tree.name.upper().partition(" ")[0] not in _WRITE_VERBS


def _written_table(tree: exp.Expr) -> exp.Table | None:
    if isinstance(tree, exp.Create) and tree.expression is None:
        return None  # plain DDL: nothing flows in
    if not isinstance(tree, (exp.Insert, exp.Create, exp.Merge, exp.Update)) or tree.this is None:
        return None
    # with a column list the table sits inside an exp.Schema
    return tree.this if isinstance(tree.this, exp.Table) else tree.this.find(exp.Table)


def _read_tables(tree: exp.Expr, written: exp.Table | None) -> tuple[str, ...]:
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    names = {
        _table_name(table)
        for table in tree.find_all(exp.Table)
        if table is not written and table.name and not (len(table.parts) == 1 and table.name.lower() in ctes)
    }
    return tuple(sorted(names))


def _table_name(table: exp.Table) -> str:
    return ".".join(part.name for part in table.parts).lower()


def _describe(error: Exception, line: int) -> str:
    """The first problem, with the file line it is on."""
    if isinstance(error, ParseError) and error.errors:
        first = error.errors[0]
        return f"line {line + first['line'] - 1}: {first['description']} near {first['highlight']!r}"
    return f"line {line}: {_first_line(error)}"


def _first_line(error: Exception) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__
