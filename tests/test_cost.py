"""Cost attribution: the worked example under each method, conservation on random DAGs,
savings, and the price arithmetic."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lumos_dagster.cost.attribution import GIB, METHODS, Node, attribute, contributions, storage_cost, switch_off
from lumos_dagster.floor.errors import UnknownDataset
from tests.conftest import examples

# The design's graph: raw_events (storage $500/mo) feeds cleaned_events (compute $3,000,
# reads 60% of raw_events) and event_metrics (compute $1,000, 40%); cleaned_events feeds
# feature_store (compute $2,000, storage $200), which feeds ml_predictions (compute $1,500).
EXAMPLE = {
    "raw_events": Node("raw_events", storage=500, bytes=10 * GIB, last_modified=1),
    "cleaned_events": Node("cleaned_events", compute=3000, upstream=("raw_events",), bytes=6 * GIB,
                           last_modified=2, weights={"raw_events": 0.6}),
    "event_metrics": Node("event_metrics", compute=1000, upstream=("raw_events",), bytes=4 * GIB,
                          last_modified=3, weights={"raw_events": 0.4}),
    "feature_store": Node("feature_store", compute=2000, storage=200, upstream=("cleaned_events",)),
    "ml_predictions": Node("ml_predictions", compute=1500, upstream=("feature_store",)),
}  # fmt: skip


@pytest.mark.parametrize(
    "method,ml_predictions,event_metrics",
    [
        ("lineage_weighted", 7000, 1200),  # 1,500 + 2,200 + 3,000 + 60% of 500
        ("equal_split", 6950, 1250),  # raw_events splits 250 / 250
        ("last_touch", 6700, 1500),  # event_metrics was modified last: it takes all of raw_events
    ],
)
def test_the_worked_example_under_each_method(method, ml_predictions, event_metrics):
    rollup = attribute(EXAMPLE, method)
    assert rollup["ml_predictions"].total == pytest.approx(ml_predictions)
    assert rollup["event_metrics"].total == pytest.approx(event_metrics)
    assert rollup["ml_predictions"].total + rollup["event_metrics"].total == pytest.approx(8200)  # all of it


def test_where_ml_predictions_cost_comes_from():
    parts = contributions(EXAMPLE, "ml_predictions", "lineage_weighted")
    assert {k: round(v, 6) for k, v in parts.items()} == {
        "ml_predictions": 1500, "feature_store": 2200, "cleaned_events": 3000, "raw_events": 300}  # fmt: skip
    # the design's sketch ($5,800) also took 60% of cleaned_events' own compute: 1,800 instead of 3,000
    assert sum(parts.values()) - 0.4 * 3000 == pytest.approx(5800)


def test_weights_fall_back_to_bytes_when_not_declared():
    nodes = {**EXAMPLE, "event_metrics": Node("event_metrics", compute=1000, upstream=("raw_events",),
                                              bytes=4 * GIB)}  # fmt: skip
    rollup = attribute(nodes, "lineage_weighted")
    assert rollup["event_metrics"].inherited == pytest.approx(500 * 4 / 10)  # bytes 6 : 4


@st.composite
def dags(draw):
    n = draw(st.integers(1, 40))
    nodes = {}
    for i in range(n):
        ups = draw(st.lists(st.integers(0, i - 1), unique=True, max_size=4)) if i else []
        nodes[f"d{i}"] = Node(
            f"d{i}",
            storage=draw(st.floats(0, 1e6, allow_nan=False)),
            compute=draw(st.floats(0, 1e6, allow_nan=False)),
            upstream=tuple(f"d{u}" for u in ups),
            bytes=draw(st.integers(0, 10**12)),
            last_modified=draw(st.floats(0, 1e9, allow_nan=False)),
            weights={f"d{u}": draw(st.floats(0.01, 1)) for u in ups} if draw(st.booleans()) else None,
        )
    return nodes


@settings(max_examples=examples(300), deadline=None)
@given(dags(), st.sampled_from(METHODS))
def test_cost_is_conserved_on_random_dags(nodes, method):
    rollup = attribute(nodes, method)
    has_consumer = {u for node in nodes.values() for u in node.upstream}
    leaves = [n for n in nodes if n not in has_consumer]
    direct = sum(node.direct for node in nodes.values())
    assert math.isclose(sum(rollup[n].total for n in leaves), direct, rel_tol=1e-9, abs_tol=1e-6)
    assert all(r.inherited >= -1e-9 for r in rollup.values())
    for leaf in leaves:  # and each product's total is exactly what flows into it
        assert math.isclose(sum(contributions(nodes, leaf, method).values()), rollup[leaf].total,
                            rel_tol=1e-9, abs_tol=1e-6)  # fmt: skip


OWNERS = {"raw_events": ["data-platform"], "cleaned_events": ["data-platform"], "event_metrics": ["bi"],
          "feature_store": ["ml"], "ml_predictions": ["ml"]}  # fmt: skip


@pytest.mark.parametrize(
    "requested,removed,monthly,risk",
    [
        (["event_metrics"], ["event_metrics"], 1000, "low"),  # raw_events is still read by cleaned_events
        # nothing else reads feature_store or cleaned_events: they go with ml_predictions
        (["ml_predictions"], ["cleaned_events", "feature_store", "ml_predictions"], 6700, "medium"),
        # feature_store goes with its consumer; cleaned_events has no other consumer: it goes too;
        # raw_events is still read by event_metrics: kept, not saved
        (["feature_store"], ["cleaned_events", "feature_store", "ml_predictions"], 6700, "medium"),
        (
            ["cleaned_events", "event_metrics"],
            ["raw_events", "cleaned_events", "event_metrics", "feature_store", "ml_predictions"],
            8200,
            "high",
        ),  # fmt: skip
    ],
)
def test_switching_datasets_off(requested, removed, monthly, risk):
    savings = switch_off(EXAMPLE, requested, OWNERS)
    assert sorted(savings.removed) == sorted(removed)
    assert savings.monthly == pytest.approx(monthly) and savings.annual == pytest.approx(12 * monthly)
    assert savings.risk == risk


def test_savings_split_storage_and_compute():
    savings = switch_off(EXAMPLE, ["feature_store"], OWNERS)
    assert (savings.storage, savings.compute) == (200, 6500)
    with pytest.raises(UnknownDataset, match="unknown dataset feature_stor \\(did you mean feature_store\\?\\)"):
        switch_off(EXAMPLE, ["feature_stor"], OWNERS)


def test_storage_cost_is_per_gib_month():
    assert storage_cost(10 * GIB, 0.023) == pytest.approx(0.23)
    assert storage_cost(0, 0.023) == 0


def _row(name: str, platform: str, storage: float):
    from lumos_dagster.reports.cost import Row

    return Row(dataset=name, owners=(), domain="d", platform=platform, storage=storage, compute=1.0, inherited=0.0,
               consumers=0, basis="-")  # fmt: skip


@pytest.mark.parametrize(
    ("rows", "unpriced"),
    [
        ([("a", "file", 0.0), ("b", "file", 0.0)], ["file"]),  # a local disk without a storage class
        ([("a", "s3", 2.5), ("b", "file", 0.0)], ["file"]),
        ([("a", "s3", 2.5), ("b", "s3", 0.0)], []),  # an empty s3 dataset is priced, just small
        ([], []),
    ],
)
def test_the_cost_report_says_which_platforms_have_no_storage_price(rows, unpriced):
    """All costs 0.00 read as free; the report says local disk has no price until it is given one."""
    from lumos_dagster.reports.cost import CostReport, to_json, to_markdown, to_text

    report = CostReport("2026-11", "USD", [_row(*r) for r in rows])
    assert report.unpriced == unpriced and to_json(report)["unpriced_platforms"] == unpriced
    hint = "has no price: set cost.platform_storage_class (e.g. `file: s3:standard`)"
    assert (hint in to_text(report)) == bool(unpriced) and (hint in to_markdown(report)) == bool(unpriced)


def test_a_month_without_costs_totals_a_float_zero():
    """Dagster's float metadata refuses the int 0 a plain sum of no rows gives (the cost report asset)."""
    from lumos_dagster.reports.cost import CostReport

    total = CostReport("2026-11", "USD", []).direct
    assert total == 0 and isinstance(total, float)
