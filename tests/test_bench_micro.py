"""benchmarks/micro.py at tiny sizes: every benchmark runs and gives sane rows; the cost DAG it
generates is acyclic and its rollup conserves cost under every method."""

import math

import pytest

from benchmarks import micro
from lumos_dagster.cost.attribution import METHODS, attribute
from lumos_dagster.schema.diff import diff_schemas

pytestmark = pytest.mark.slow

KEYS = {"benchmark", "size", "value", "unit", "target", "met"}


def check_rows(rows, names, size):
    assert [r["benchmark"] for r in rows] == names
    for r in rows:
        assert KEYS <= set(r) <= KEYS | {"note", "detail"}, r
        assert r["size"] == size
        assert isinstance(r["value"], float) and math.isfinite(r["value"]) and r["value"] > 0, r
        assert r["met"] is None  # tiny sizes are not the targets' sizes
    assert micro.render(rows).count("\n") == len(rows) + 1  # header, rule, one line a row


def test_diff_throughput():
    rows = micro.diff_throughput(pairs=40, fields=30, repeat=1)
    check_rows(rows, ["diff_throughput"], {"pairs": 40, "fields": 30})
    assert rows[0]["target"] == "≤ 1 s for 10,000 × 100"
    pairs = micro.diff_pairs(40, 30)
    assert all(len(old.fields) == 30 for old, _ in pairs)
    assert all(old != new for old, new in pairs)  # every new schema carries edits
    assert sum(map(len, (diff_schemas(old, new) for old, new in pairs))) > 40


def test_cost_rollup_and_conservation():
    rows = micro.cost_rollup(nodes=300, edges=900)
    check_rows(rows, [f"cost_rollup/{m}" for m in METHODS], {"nodes": 300, "edges": 900})

    dag = micro.random_dag(300, 900)
    index = {name: int(name[1:]) for name in dag}
    assert sum(len(n.upstream) for n in dag.values()) == 900
    assert all(index[u] < index[n.name] for n in dag.values() for u in n.upstream)  # acyclic by construction
    consumed = {u for n in dag.values() for u in n.upstream}
    direct = sum(n.direct for n in dag.values())
    for method in METHODS:
        rollup = attribute(dag, method)
        # cost.py: every direct cost ends up, once, in the datasets nobody consumes
        sinks = sum(rollup[name].total for name in dag if name not in consumed)
        assert math.isclose(sinks, direct, rel_tol=1e-9), method
        assert all(r.inherited >= -1e-9 for r in rollup.values())
        assert micro.conservation_error(dag, rollup) < 1e-9
    with pytest.raises(ValueError, match="at most"):
        micro.random_dag(3, 4)


def test_catalog_write_rate():
    rows = micro.catalog_write_rate(datasets=6)
    names = ["catalog_write_rate/lumos", "catalog_write_rate/raw", "catalog_write_rate/ratio"]
    check_rows(rows, names, {"datasets": 6})
    detail = rows[0]["detail"]
    assert detail["mcps"] >= 6 * 8  # status, properties, lineage, schema, owners, tags, profile, operation…
    assert rows[2]["value"] == pytest.approx(detail["raw_seconds"] / detail["lumos_seconds"])


def test_catalog_snapshots_are_realistic():
    snaps = micro.catalog_snapshots(12)
    assert len({s.dataset.name for s in snaps}) == 12
    assert all(len(s.schema.fields) == 20 and len(s.owners) == 2 and s.tags for s in snaps)
    assert not snaps[0].upstream and all(
        s.upstream[0].upstream == p.dataset for p, s in zip(snaps[:-1], snaps[1:], strict=True)
    )


def test_backfill_overhead(spark):
    # best of 2: one slow fsync in the 1 × 1 run must not make the difference negative
    rows = micro.backfill_overhead(datasets=4, partitions=3, spark=spark, repeat=2)
    check_rows(rows, ["backfill_overhead"], {"datasets": 4, "partitions": 3})
    detail = rows[0]["detail"]
    assert 0 < detail["a_seconds"] < detail["b_seconds"] and detail["cells"] == 12
    assert "warm" in rows[0]["note"]


def test_backfill_lake(tmp_path):
    assert micro.backfill_lake(tmp_path, 2, 3) == 6
    assert len(list(tmp_path.glob("bench/ds_*/dt=*/part-0.parquet"))) == 6
