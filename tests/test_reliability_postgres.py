"""PostgreSQL relations with hostile names (slashes, dots, quotes, spaces, unicode, SQL) on the real
server: each keeps a dataset of its own, its view lineage, and is never run as SQL."""

import uuid
from urllib.parse import unquote

import psycopg
import pytest
from psycopg import sql

from lumos_dagster.catalog.datahub import dataset_urn
from lumos_dagster.floor.config import parse_config
from lumos_dagster.floor.model import ColumnMapping, DatasetRef
from lumos_dagster.floor.naming import name_part
from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.inventory.refresh import refresh_registry
from lumos_dagster.lineage.resolve import doc_from_json
from lumos_dagster.sources import build_sources, discover
from lumos_dagster.store import SnapshotStore
from tests.test_sources import PG


@pytest.fixture
def schemas():
    """Create schemas by name (any name at all); all are dropped afterwards."""
    created = []

    def create(name: str) -> str:
        with psycopg.connect(PG, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
        created.append(name)
        return name

    yield create
    with psycopg.connect(PG, autocommit=True) as conn:
        for name in created:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))


def execute(statement: str, *identifiers: tuple[str, str]) -> None:
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(sql.SQL(statement).format(*(sql.Identifier(*i) for i in identifiers)))


def lumos_config(tmp_path, pattern: str):
    return parse_config(
        {"sources": [{"type": "postgres", "name": "db", "dsn": PG, "schemas": [pattern]}],
         "store": {"path": "store.db"}, "catalog": {"path": "lite.db"}},
        base_dir=str(tmp_path),
    )  # fmt: skip


def test_a_slash_in_a_name_does_not_merge_two_relations(schemas, tmp_path):
    tag = uuid.uuid4().hex[:8]
    c = schemas(f"lumos_c{tag}")
    c_a = schemas(f"lumos_c{tag}/a")
    config = lumos_config(tmp_path, f"lumos_c{tag}*")
    store = SnapshotStore(config.store_url)
    execute("CREATE TABLE {} (id int)", (c_a, "b"))
    first = refresh_registry(config, store, lambda _: None)
    execute("CREATE TABLE {} (id int)", (c, "a/b"))  # once named like c/a's table b
    second = refresh_registry(config, store, lambda _: None)
    assert first.report.failures == second.report.failures == []
    assert second.reconciliation.removed == [] and second.reconciliation.refused == {}
    records = {r.name: r for r in store.datasets(include_removed=True)}
    store.close()
    assert sorted(records) == [f"test/lumos_c{tag}%2Fa/b", f"test/lumos_c{tag}/a%2Fb"]
    urns = {dataset_urn(DatasetRef(r.platform, r.name, r.location), "PROD") for r in records.values()}
    assert len(urns) == 2 and len({r.urn for r in records.values()}) == 2
    for name in records:  # the escaping reverses to the relation's own parts
        assert [unquote(p) for p in name.split("/")] in (["test", c_a, "b"], ["test", c, "a/b"])


def test_plain_names_are_kept_and_escaping_reverses():
    assert name_part("orders_2026") == "orders_2026" and name_part('Big "Sales" é') == 'Big "Sales" é'
    hostile = "50%/a.b,(c)\u241f"
    assert name_part(hostile) == "50%25%2Fa%2Eb%2C%28c%29%E2%90%9F" and unquote(name_part(hostile)) == hostile


def test_column_lineage_survives_a_hostile_schema_name(schemas, tmp_path):
    tag = uuid.uuid4().hex[:8]
    hostile = schemas(f'lumos {tag} "Sales".eu/north é')
    execute('CREATE TABLE {} (id int, "Net amount" numeric)', (hostile, 'or"ders.2026'))
    execute(
        'CREATE VIEW {} AS SELECT o.id, o."Net amount" AS total FROM {} o',
        (hostile, "Order totals"),
        (hostile, 'or"ders.2026'),
    )
    execute("CREATE MATERIALIZED VIEW {} AS SELECT * FROM {}", (hostile, "top/totals"), (hostile, "Order totals"))
    config = lumos_config(tmp_path, f"lumos {tag} *")
    store = SnapshotStore(config.store_url)
    done = refresh_registry(config, store, lambda _: None)
    code = {name: doc_from_json(doc) for name, doc in store.code().items()}
    store.close()
    prefix = f"test/{name_part(hostile)}"
    orders, totals, top = f'{prefix}/or"ders%2E2026', f"{prefix}/Order totals", f"{prefix}/top%2Ftotals"
    assert sorted(r.name for r in done.found.records) == sorted([orders, totals, top])
    assert done.code.problems == [] and done.code.external == {}
    columns = {(e.upstream, c.downstream, c.upstream) for e in code[totals].edges for c in e.columns}
    assert columns == {(orders, "id", "id"), (orders, "total", "Net amount")}
    (edge,) = code[top].edges
    assert edge.upstream == totals and set(edge.columns) == {ColumnMapping("id", "id"), ColumnMapping("total", "total")}


def test_a_hostile_table_name_is_never_run_as_sql(schemas):
    schema = schemas(f"lumos_inj_{uuid.uuid4().hex[:8]}")
    execute("CREATE TABLE {} (id int)", (schema, "y"))
    execute("CREATE TABLE {} (id int)", (schema, 'x"; drop table y; --'))
    execute("CREATE VIEW {} AS SELECT id FROM {}", (schema, "v'); drop table y; --"), (schema, 'x"; drop table y; --'))
    config = parse_config({"sources": [{"type": "postgres", "name": "db", "dsn": PG, "schemas": [schema]}]})
    source = build_sources(config)["db"]
    report = ScanReport()
    records = {r.name.split("/")[-1]: r for r in discover({"db": source}, report).records}
    assert report.failures == [] and source.stored_sql(report) is not None
    assert source.describe(records['x"; drop table y; --'].location).schema.fields[0].name == "id"
    assert source.describe(records["y"].location) is not None  # still there
    assert records[name_part("v'); drop table y; --")].upstream == (records['x"; drop table y; --'].name,)
