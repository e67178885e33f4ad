"""Data-quality model: dbt and Great Expectations results read from real-shaped artifacts,
the quality score and the freshness verdict."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from lumos_dagster.floor.windows import canonical_duration, parse_duration
from lumos_dagster.governance.quality import (
    Assertion,
    _dbt_dimension,
    _expectation_dimension,
    freshness,
    quality_score,
    read_dbt,
    read_great_expectations,
)

DATA = Path(__file__).parent / "data" / "quality"
MANIFEST, RUN_RESULTS = DATA / "manifest.json", DATA / "run_results.json"
GE_CLASSIC, GX1 = DATA / "ge_classic_customers.json", DATA / "gx1_orders.json"


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def write(path: Path, doc: dict | list) -> Path:
    path.write_text(json.dumps(doc))
    return path


# --- dbt -----------------------------------------------------------------------------------------

STG_ORDERS, FCT_ORDERS = "warehouse.analytics_staging.stg_orders", "warehouse.analytics.fct_orders"
DBT_EXPECTED = [
    # a source test: attached_node is null, the relation comes from depends_on and uses the identifier
    Assertion("raw.shop_db.orders_export", "source_not_null_shop_db_orders_id", "pass", "completeness", "id",
              "dbt", None, "2025-03-04T06:10:05.233918+00:00"),
    # skipped (its model was skipped after the seed's test errored): no timing, so the run's time
    Assertion("warehouse.analytics.customers", "unique_customers_customer_id", "skipped", "uniqueness",
              "customer_id", "dbt", None, "2025-03-04T06:10:31.918254+00:00"),
    # a singular test: no test_metadata, no column; the model's alias names the table
    Assertion(FCT_ORDERS, "assert_order_amount_is_positive", "fail", "validity", None, "dbt",
              "Got 2 results, configured to fail if != 0", "2025-03-04T06:10:08.254661+00:00"),
    Assertion(FCT_ORDERS, "not_null_orders_customer_id", "pass", "completeness", "customer_id", "dbt", None,
              "2025-03-04T06:10:08.117203+00:00"),
    # depends_on lists stg_orders first: attached_node decides
    Assertion(FCT_ORDERS, "relationships_orders_order_id__order_id__ref_stg_orders_", "pass", "consistency",
              "order_id", "dbt", None, "2025-03-04T06:10:08.309577+00:00"),
    # dbt's multi-line database error, on one line and cut at 200 characters
    Assertion("warehouse.analytics_seeds.country_codes", "unique_country_codes_country_code", "error", "uniqueness",
              "country_code", "dbt",
              'Database Error in test unique_country_codes_country_code (seeds/schema.yml) column "country_code" '
              "does not exist LINE 12: country_code as unique_field, ^ HINT: Perhaps you meant to reference the "
              "colu…",
              "2025-03-04T06:10:05.801329+00:00"),
    Assertion(STG_ORDERS, "accepted_values_stg_orders_status__placed__shipped__completed__return_pending__returned",
              "warn", "validity", "status", "dbt", "Got 2 results, configured to warn if != 0",
              "2025-03-04T06:10:05.702234+00:00"),
    # dbt_utils.recency: model-level, no column
    Assertion(STG_ORDERS, "dbt_utils_recency_stg_orders_day__ordered_at__1", "pass", "freshness", None, "dbt", None,
              "2025-03-04T06:10:05.598712+00:00"),
    Assertion(STG_ORDERS, "not_null_stg_orders_order_id", "pass", "completeness", "order_id", "dbt", None,
              "2025-03-04T06:10:05.611420+00:00"),
]  # fmt: skip


def test_dbt_fixture_maps_every_field():
    assert read_dbt(MANIFEST, RUN_RESULTS) == DBT_EXPECTED


def test_dbt_leaves_out_tests_that_did_not_run_and_non_test_results():
    # unique_stg_orders_order_id was excluded from the build; seeds and models have results too
    names = {a.name for a in read_dbt(MANIFEST, RUN_RESULTS)}
    assert "unique_stg_orders_order_id" not in names
    assert len(names) == 9 and not any(n in names for n in ("country_codes", "stg_orders", "customers"))


@pytest.mark.parametrize("version", [9, 10, 11])
def test_dbt_reads_manifest_schemas_v9_to_v11_alike(tmp_path, version):
    # the keys read are the same from dbt 1.5 on
    manifest = load(MANIFEST)
    manifest["metadata"]["dbt_schema_version"] = f"https://schemas.getdbt.com/dbt/manifest/v{version}.json"
    assert read_dbt(write(tmp_path / "manifest.json", manifest), RUN_RESULTS) == DBT_EXPECTED


def test_dbt_resolves_through_depends_on_without_attached_node(tmp_path):
    manifest = load(MANIFEST)
    del manifest["nodes"]["test.shop.not_null_orders_customer_id.2f8e6d4c0a"]["attached_node"]
    read = {a.name: a for a in read_dbt(write(tmp_path / "manifest.json", manifest), RUN_RESULTS)}
    assert read["not_null_orders_customer_id"].relation == FCT_ORDERS


def test_dbt_takes_the_column_from_kwargs_when_column_name_is_null(tmp_path):
    manifest = load(MANIFEST)
    manifest["nodes"]["test.shop.not_null_orders_customer_id.2f8e6d4c0a"]["column_name"] = None
    read = {a.name: a for a in read_dbt(write(tmp_path / "manifest.json", manifest), RUN_RESULTS)}
    assert read["not_null_orders_customer_id"].column == "customer_id"


def test_dbt_relation_without_database(tmp_path):
    # dbt-spark has no databases: the relation is schema.table
    manifest = load(MANIFEST)
    manifest["nodes"]["model.shop.orders"]["database"] = None
    read = {a.name: a for a in read_dbt(write(tmp_path / "manifest.json", manifest), RUN_RESULTS)}
    assert read["not_null_orders_customer_id"].relation == "analytics.fct_orders"


@pytest.mark.parametrize(
    ("status", "message", "failures", "expected"),
    [
        ("runtime error", "Runtime Error\n  no relation", None, ("error", "Runtime Error no relation")),
        ("error", None, None, ("error", None)),
        ("fail", None, 3, ("fail", "3 failing rows")),
        ("fail", None, 1, ("fail", "1 failing row")),
        ("warn", "Got 1 result, configured to warn if != 0", 1, ("warn", "Got 1 result, configured to warn if != 0")),
        # a pass says nothing worth keeping
        ("pass", "PASS", 0, ("pass", None)),
    ],
)
def test_dbt_statuses_and_messages(tmp_path, status, message, failures, expected):
    run_results = load(RUN_RESULTS)
    result = next(r for r in run_results["results"] if r["unique_id"].startswith("test.shop.not_null_orders_"))
    result.update(status=status, message=message, failures=failures)
    read = {a.name: a for a in read_dbt(MANIFEST, write(tmp_path / "run_results.json", run_results))}
    assertion = read["not_null_orders_customer_id"]
    assert (assertion.status, assertion.message) == expected


@pytest.mark.parametrize(
    ("test_name", "dimension"),
    [
        ("not_null", "completeness"),
        ("not_null_proportion", "completeness"),
        ("unique", "uniqueness"),
        ("unique_combination_of_columns", "uniqueness"),
        ("accepted_values", "validity"),
        ("accepted_range", "validity"),
        ("expression_is_true", "validity"),
        ("relationships", "consistency"),
        ("equal_rowcount", "consistency"),
        ("recency", "freshness"),
        ("freshness_anomalies", "freshness"),
        ("my_custom_check", "validity"),
        # dbt_expectations follows the Great Expectations rules
        ("expect_column_values_to_not_be_null", "completeness"),
        ("expect_row_values_to_have_recent_data", "freshness"),
        ("expect_table_row_count_to_equal_other_table", "consistency"),
    ],
)
def test_dbt_dimensions(test_name, dimension):
    assert _dbt_dimension(test_name) == dimension


# --- Great Expectations ------------------------------------------------------------------------

CLASSIC_AT, GX1_AT = "2025-03-04T06:30:02.140937+00:00", "2025-03-04T06:45:10.552013+00:00"
CLASSIC_EXPECTED = [
    Assertion("customers", "expect_table_row_count_to_be_between", "pass", "consistency", None,
              "great_expectations", None, CLASSIC_AT),
    Assertion("customers", "expect_column_values_to_not_be_null", "pass", "completeness", "customer_id",
              "great_expectations", None, CLASSIC_AT),
    Assertion("customers", "expect_column_values_to_be_unique", "fail", "uniqueness", "email",
              "great_expectations", "12 unexpected values (0.0996%)", CLASSIC_AT),
    # passes thanks to mostly=0.99, yet the unexpected values are worth showing
    Assertion("customers", "expect_column_values_to_match_regex", "pass", "validity", "email",
              "great_expectations", "31 unexpected values (0.257%)", CLASSIC_AT),
    # a metric that could not be computed: exception_info keyed by metric id
    Assertion("customers", "expect_column_values_to_be_in_set", "error", "validity", "country_code",
              "great_expectations",
              '(psycopg2.errors.UndefinedColumn) column "country_code" does not exist LINE 1: SELECT sum(CASE WHEN '
              "(country_code IS NOT NULL AND (country_... ^",
              CLASSIC_AT),
    Assertion("customers", "expect_column_values_to_be_between", "fail", "validity", "lifetime_value",
              "great_expectations", "3 unexpected values (0.0252%)", CLASSIC_AT),
    Assertion("customers", "expect_column_values_to_be_dateutil_parseable", "pass", "validity", "signup_date",
              "great_expectations", None, CLASSIC_AT),
]  # fmt: skip
GX1_EXPECTED = [
    Assertion("orders", "expect_column_values_to_not_be_null", "pass", "completeness", "order_id",
              "great_expectations", None, GX1_AT),
    Assertion("orders", "expect_column_values_to_be_unique", "pass", "uniqueness", "order_id",
              "great_expectations", None, GX1_AT),
    Assertion("orders", "expect_column_values_to_be_in_set", "fail", "validity", "status",
              "great_expectations", "1 unexpected value (0.0238%)", GX1_AT),
    Assertion("orders", "expect_column_mean_to_be_between", "pass", "accuracy", "amount",
              "great_expectations", None, GX1_AT),
    # no unexpected values to count: the observed value says what failed
    Assertion("orders", "expect_table_row_count_to_equal_other_table", "fail", "consistency", None,
              "great_expectations", 'observed {"self": 4210, "other": 4214}', GX1_AT),
]  # fmt: skip


def test_great_expectations_classic_maps_every_field():
    assert read_great_expectations(GE_CLASSIC) == CLASSIC_EXPECTED


def test_gx1_maps_every_field():
    assert read_great_expectations(GX1) == GX1_EXPECTED


def test_great_expectations_v2_batch_kwargs_and_run_time(tmp_path):
    # the V2 API names the asset in batch_kwargs; without validation_time, the run's time stands in
    doc = load(GE_CLASSIC)
    doc["meta"] = {
        "great_expectations_version": "0.13.49",
        "expectation_suite_name": "customers.warning",
        "run_id": {"run_name": None, "run_time": "2021-11-02T08:00:00+00:00"},
        "batch_kwargs": {"data_asset_name": "analytics.customers", "table": "customers", "schema": "analytics"},
    }
    read = read_great_expectations(write(tmp_path / "v2.json", doc))
    assert {(a.relation, a.observed_at) for a in read} == {("analytics.customers", "2021-11-02T08:00:00+00:00")}


def test_great_expectations_single_exception_record(tmp_path):
    doc = load(GX1)
    doc["results"][0]["exception_info"] = {
        "raised_exception": True,
        "exception_traceback": "Traceback (most recent call last): ...",
        "exception_message": 'Error: The column "order_id" in BatchData does not exist.',
    }
    doc["results"][1]["exception_info"] = {"raised_exception": True, "exception_message": None}
    first, second, *_ = read_great_expectations(write(tmp_path / "gx.json", doc))
    assert (first.status, first.message) == ("error", 'Error: The column "order_id" in BatchData does not exist.')
    assert (second.status, second.message) == ("error", "the expectation raised an exception")


def test_great_expectations_percent_never_rounds_up_to_100(tmp_path):
    doc = load(GX1)
    doc["results"][2]["result"].update(unexpected_count=4209, unexpected_percent=99.97624703087886)
    assert read_great_expectations(write(tmp_path / "gx.json", doc))[2].message == "4209 unexpected values (99.9%)"


@pytest.mark.parametrize(
    ("expectation_type", "dimension"),
    [
        ("expect_column_values_to_not_be_null", "completeness"),
        ("expect_column_values_to_be_null", "validity"),
        ("expect_column_values_to_be_unique", "uniqueness"),
        ("expect_compound_columns_to_be_unique", "uniqueness"),
        ("expect_column_proportion_of_unique_values_to_be_between", "uniqueness"),
        ("expect_column_values_to_be_between", "validity"),
        ("expect_column_values_to_be_in_set", "validity"),
        ("expect_column_values_to_match_regex", "validity"),
        ("expect_column_values_to_be_of_type", "validity"),
        ("expect_column_value_lengths_to_be_between", "validity"),
        ("expect_column_values_to_be_dateutil_parseable", "validity"),
        ("expect_column_max_to_be_between", "validity"),
        ("expect_table_row_count_to_be_between", "consistency"),
        ("expect_table_row_count_to_equal_other_table", "consistency"),
        ("expect_column_pair_values_to_be_equal", "consistency"),
        ("expect_multicolumn_sum_to_equal", "consistency"),
        ("expect_column_mean_to_be_between", "accuracy"),
        ("expect_column_sum_to_be_between", "accuracy"),
        ("expect_column_kl_divergence_to_be_less_than", "accuracy"),
        ("expect_row_values_to_have_recent_data", "freshness"),
        ("expect_table_freshness_to_be_within", "freshness"),
    ],
)
def test_expectation_dimensions(expectation_type, dimension):
    assert _expectation_dimension(expectation_type) == dimension


# --- malformed input -----------------------------------------------------------------------------


def _unknown_parent(manifest: dict) -> None:
    manifest["nodes"]["test.shop.not_null_stg_orders_order_id.81cfe2fe64"]["attached_node"] = "model.shop.gone"


def _schema(version: str):
    def mutate(manifest: dict) -> None:
        manifest["metadata"]["dbt_schema_version"] = f"https://schemas.getdbt.com/dbt/{version}.json"

    return mutate


@pytest.mark.parametrize(
    ("mutate", "problem"),
    [
        (_schema("manifest/v8"), "manifest schema v8 is not supported (v9 to v12, from dbt 1.5 on)"),
        (_schema("manifest/v13"), "manifest schema v13 is not supported"),
        (_schema("run-results/v6"), "not a dbt manifest file: its dbt_schema_version is"),
        (lambda m: m.pop("nodes"), "the top level has no 'nodes'"),
        (lambda m: m.update(sources=[]), "the top level: 'sources' should be a JSON object, not array"),
        (_unknown_parent, "is about model.shop.gone, which the manifest does not define"),
        (
            lambda m: m["nodes"]["test.shop.assert_order_amount_is_positive"]["depends_on"].update(nodes=[]),
            "test test.shop.assert_order_amount_is_positive depends on no model, seed, snapshot or source",
        ),
        (lambda m: m["nodes"]["model.shop.orders"].pop("schema"), "node model.shop.orders has no 'schema'"),
    ],
)
def test_dbt_malformed_manifest(tmp_path, mutate, problem):
    manifest = load(MANIFEST)
    mutate(manifest)
    path = write(tmp_path / "manifest.json", manifest)
    with pytest.raises(ValueError, match=f"^dbt manifest {path}: ") as caught:
        read_dbt(path, RUN_RESULTS)
    assert problem in str(caught.value)


def _stranger(run_results: dict) -> None:
    run_results["results"].append({**run_results["results"][1], "unique_id": "test.other.not_null_x.123"})


@pytest.mark.parametrize(
    ("mutate", "problem"),
    [
        (
            lambda r: r["metadata"].update(dbt_schema_version="https://schemas.getdbt.com/dbt/manifest/v12.json"),
            "not a dbt run-results file",
        ),
        (lambda r: r.pop("metadata"), "the top level has no 'metadata'"),
        (lambda r: r["results"][1].update(status="success"), "results[1]: 'success' is not a dbt test status"),
        (lambda r: r["results"][1].pop("unique_id"), "results[1] has no 'unique_id'"),
        (lambda r: r["results"].insert(0, "pass"), "results[0] is not an object"),
        (
            lambda r: r["results"][1]["timing"][1].update(completed_at="yesterday"),
            "results[1]: 'yesterday' is not an ISO 8601 timestamp",
        ),
        (_stranger, "1 test result for tests the manifest"),
    ],
)
def test_dbt_malformed_run_results(tmp_path, mutate, problem):
    run_results = load(RUN_RESULTS)
    mutate(run_results)
    path = write(tmp_path / "run_results.json", run_results)
    with pytest.raises(ValueError, match=f"^dbt run_results {path}: ") as caught:
        read_dbt(MANIFEST, path)
    assert problem in str(caught.value)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b'{"results": [', "not JSON: Expecting value at line 1, column 14"),
        (b'{"name": "caf\xe9"}', "not JSON: the file is not UTF-8 text"),  # Latin-1
        (b"[]", "the top level is a JSON array, not an object"),
        (b"null", "the top level is a JSON null, not an object"),
    ],
)
def test_not_json(tmp_path, content, problem):
    path = tmp_path / "broken.json"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=f"^dbt manifest {path}: {problem}"):
        read_dbt(path, RUN_RESULTS)
    with pytest.raises(ValueError, match=f"^Great Expectations validation result {path}: {problem}"):
        read_great_expectations(path)


def _no_expectation_type(doc: dict) -> None:
    del doc["results"][0]["expectation_config"]["type"]


@pytest.mark.parametrize(
    ("mutate", "problem"),
    [
        # a checkpoint result wraps validation results: not this shape
        (lambda d: d.pop("results"), "the top level has no 'results'"),
        (lambda d: d.pop("meta"), "the top level has no 'meta'"),
        (_no_expectation_type, "results[0] expectation_config has neither 'expectation_type' (GE 0.x) nor 'type'"),
        (lambda d: d["results"][0].pop("expectation_config"), "results[0] has no 'expectation_config'"),
        (lambda d: d["results"][0].update(success="yes"), "results[0]: 'success' should be a JSON boolean, not string"),
        (lambda d: d["results"][0].update(exception_info={"metric": "boom"}), "results[0]: exception_info is neither"),
        (lambda d: [d["meta"].pop(k) for k in ("active_batch_definition", "batch_spec")], "meta names no data asset"),
        (lambda d: d["meta"].update(validation_time="last night"), "meta: 'last night' is not an ISO 8601 timestamp"),
    ],
)
def test_great_expectations_malformed(tmp_path, mutate, problem):
    doc = load(GX1)
    mutate(doc)
    path = write(tmp_path / "gx.json", doc)
    with pytest.raises(ValueError, match=f"^Great Expectations validation result {path}: ") as caught:
        read_great_expectations(path)
    assert problem in str(caught.value)


def test_assertion_rejects_unknown_status_and_dimension():
    with pytest.raises(ValueError, match="status 'ok' is not one of"):
        Assertion("t", "n", "ok", "validity")
    with pytest.raises(ValueError, match="dimension 'timeliness' is not one of"):
        Assertion("t", "n", "pass", "timeliness")


# --- score -------------------------------------------------------------------------------------


def a(status: str, dimension: str = "completeness") -> Assertion:
    return Assertion("warehouse.analytics.orders", "check", status, dimension)


@pytest.mark.parametrize(
    ("assertions", "completeness", "uniqueness", "score"),
    [
        ([], None, None, None),
        ([a("skipped")], None, None, None),  # skipped is no evidence
        ([a("pass")], None, None, 1.0),
        ([a("warn")], None, None, 0.5),
        ([a("fail")], None, None, 0.0),
        ([a("error")], None, None, 0.0),  # an error is not a pass
        ([a("pass"), a("skipped")], None, None, 1.0),
        ([a("pass"), a("fail")], None, None, 0.5),
        ([a("pass"), a("pass"), a("warn"), a("error")], None, None, 0.625),
        # one term per dimension: three passing not_nulls do not outweigh a failed freshness check
        ([a("pass"), a("pass"), a("pass"), a("fail", "freshness")], None, None, 0.5),
        ([], 0.9, None, 0.9),
        ([a("skipped")], 0.0, None, 0.0),  # 0 is a measure, not a missing one
        ([a("error", "uniqueness")], None, 1.0, 0.5),
        ([a("pass"), a("warn", "validity")], 0.8, 0.6, (1 + 0.5 + 0.8 + 0.6) / 4),
    ],
)
def test_quality_score(assertions, completeness, uniqueness, score):
    assert quality_score(assertions, completeness, uniqueness) == pytest.approx(score)


def test_quality_score_of_the_fixtures():
    # stg_orders: completeness 1 (pass), validity 0.5 (warn), freshness 1 (pass) → 2.5 / 3
    stg_orders = [x for x in read_dbt(MANIFEST, RUN_RESULTS) if x.relation == STG_ORDERS]
    assert quality_score(stg_orders) == pytest.approx(2.5 / 3)
    # customers (GE): consistency 1, completeness 1, uniqueness 0, validity (pass, error, fail, pass) 0.5
    assert quality_score(read_great_expectations(GE_CLASSIC)) == pytest.approx(2.5 / 4)


@pytest.mark.parametrize("measure", [1.2, -0.1, math.nan])
def test_quality_score_rejects_measures_outside_0_1(measure):
    with pytest.raises(ValueError, match="completeness must be a fraction in"):
        quality_score([], completeness=measure)
    with pytest.raises(ValueError, match="uniqueness must be a fraction in"):
        quality_score([], uniqueness=measure)


# --- freshness -----------------------------------------------------------------------------------

NOW = datetime(2025, 3, 4, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("age", "sla", "verdict", "hours"),
    [
        (timedelta(hours=6), "6h", "fresh", 6.0),  # exactly the SLA is still fresh
        (timedelta(hours=6, seconds=1), "6h", "stale", 6 + 1 / 3600),
        (timedelta(hours=5, minutes=59), "6h", "fresh", 5 + 59 / 60),
        (timedelta(minutes=90), "90m", "fresh", 1.5),
        (timedelta(minutes=91), "90m", "stale", 91 / 60),
        (timedelta(hours=36), "1d 12h", "fresh", 36.0),
        (timedelta(days=2), "1d", "stale", 48.0),
        (timedelta(hours=3), None, "unknown", 3.0),  # no SLA: no verdict, but the age is known
        (-timedelta(hours=1), "1h", "fresh", 0.0),  # clock skew: modified "after" now
    ],
)
def test_freshness(age, sla, verdict, hours):
    assert freshness(NOW - age, sla, NOW) == (verdict, pytest.approx(hours))


def test_freshness_without_last_modified():
    assert freshness(None, "6h", NOW) == ("unknown", None)


def test_freshness_across_time_zones():
    lisbon_summer = timezone(timedelta(hours=1))
    assert freshness(datetime(2025, 3, 4, 7, 0, tzinfo=lisbon_summer), "6h", NOW) == ("fresh", 6.0)


def test_freshness_needs_aware_datetimes():
    with pytest.raises(ValueError, match="last_modified must be timezone-aware"):
        freshness(datetime(2025, 3, 4, 6, 0), "6h", NOW)
    with pytest.raises(ValueError, match="now must be timezone-aware"):
        freshness(None, "6h", datetime(2025, 3, 4, 12, 0))


def test_freshness_bad_sla_raises_even_without_last_modified():
    # a typo in the config must not hide behind "unknown"
    with pytest.raises(ValueError, match="'daily' is not a duration"):
        freshness(None, "daily", NOW)


@pytest.mark.parametrize(
    ("text", "sla"),
    [
        ("6h", timedelta(hours=6)),
        ("1d", timedelta(days=1)),
        ("90m", timedelta(minutes=90)),
        ("1d 12h", timedelta(days=1, hours=12)),
        ("1d12h", timedelta(days=1, hours=12)),
        (" 1d 2h 30m ", timedelta(days=1, hours=2, minutes=30)),
        ("6 hours", timedelta(hours=6)),
        ("90 min", timedelta(minutes=90)),
    ],
)
def test_parse_duration(text, sla):
    assert parse_duration(text) == sla


@pytest.mark.parametrize("text", ["", "6", "h", "1.5h", "-1h", "0h", "0d 0m", "1w", "daily", "6h later"])
def test_parse_duration_rejects(text):
    with pytest.raises(ValueError, match="is not a duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("text", "canonical"), [("6h", "6h"), ("1d 12h", "36h"), ("48h", "2d"), ("90 min", "90m"), ("2 days", "2d")]
)
def test_slas_are_stored_in_one_unit(text, canonical):
    assert canonical_duration(text) == canonical
