"""Data-quality evidence for the catalog: dbt test results and Great Expectations validation
results read into one model (`Assertion`), a quality score over them, and a freshness verdict.

Pure Python over the tools' JSON artifacts: neither dbt nor Great Expectations is imported.

Quality dimensions
------------------
dbt generic tests, by ``test_metadata.name`` (whatever the package namespace)::

    not_null, not_null_proportion, at_least_one, not_empty_string   completeness
    unique, unique_combination_of_columns                           uniqueness
    relationships, relationships_where, equal_rowcount,
        fewer_rows_than, equality, cardinality_equality             consistency
    recency, and any name containing recency or freshness           freshness
    expect_* (dbt_expectations)                                     the Great Expectations rules below
    anything else (accepted_values, accepted_range,
        expression_is_true, custom generic tests), singular tests   validity

Great Expectations expectation types, first matching rule wins::

    contains recency | freshness | recent_data                      freshness
    contains _not_be_null                                           completeness
    contains unique                                                 uniqueness
    contains row_count | other_table | pair_values | multicolumn_sum
        (volume and agreement with other columns or tables)         consistency
    a column statistic: _mean_ | _median_ | _stdev_ | _sum_ | _quantile_values_ |
        _kl_divergence_ | _chisquare_ | _bootstrapped_ks_
        (the values as a whole look like the real world)            accuracy
    anything else: _be_between, _be_in_set, _match_regex, _be_of_type,
        _lengths_, _be_dateutil_parseable, _min_/_max_ ranges, ...  validity

So ``expect_table_row_count_to_be_between`` is consistency and
``expect_column_proportion_of_unique_values_to_be_between`` uniqueness, not validity.

Statuses
--------
dbt: pass, fail, warn, skipped as they are; error and ``runtime error`` are error.
Great Expectations: an expectation that raised is error; otherwise success is pass, failure fail.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, NoReturn

from lumos_dagster.floor.model import AssertionResult
from lumos_dagster.floor.windows import parse_duration

DIMENSIONS = ("completeness", "uniqueness", "validity", "accuracy", "consistency", "freshness")
STATUSES = ("pass", "fail", "warn", "error", "skipped")


@dataclass(frozen=True)
class Assertion:
    """One data-quality check's latest outcome on one table."""

    relation: str  # the table, as the tool names it: "db.schema.table" (dbt) or the data asset name (GE)
    name: str  # e.g. "not_null_orders_customer_id" / "expect_column_values_to_not_be_null"
    status: str  # one of STATUSES
    dimension: str  # one of DIMENSIONS
    column: str | None = None
    source: str = ""  # "dbt" | "great_expectations"
    message: str | None = None  # failure message / unexpected counts, short
    observed_at: str | None = None  # ISO 8601 when known

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"assertion {self.name!r}: status {self.status!r} is not one of {STATUSES}")
        if self.dimension not in DIMENSIONS:
            raise ValueError(f"assertion {self.name!r}: dimension {self.dimension!r} is not one of {DIMENSIONS}")


# --- reading the tools' files ------------------------------------------------------------------

_JSON_TYPES = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
_MESSAGE_LIMIT = 200


class _Artifact:
    """One input file; its errors name it and say where in it the problem is."""

    def __init__(self, path: str | Path, kind: str) -> None:
        self.path, self.kind = Path(path), kind

    def fail(self, problem: str) -> NoReturn:
        raise ValueError(f"{self.kind} {self.path}: {problem}")

    def load(self) -> dict[str, Any]:
        try:
            doc = json.loads(self.path.read_bytes())
        except UnicodeDecodeError:
            self.fail("not JSON: the file is not UTF-8 text")
        except json.JSONDecodeError as e:
            self.fail(f"not JSON: {e.msg} at line {e.lineno}, column {e.colno}")
        if not isinstance(doc, dict):
            self.fail(f"the top level is a JSON {_JSON_TYPES.get(type(doc), 'null')}, not an object")
        return doc

    def field(self, obj: dict[str, Any], key: str, kind: type, where: str, *, optional: bool = False) -> Any:
        """obj[key] checked to be of `kind`; JSON null counts as absent."""
        value = obj.get(key)
        if value is None:
            if optional:
                return None
            self.fail(f"{where} has no {key!r}")
        if not isinstance(value, kind):
            self.fail(f"{where}: {key!r} should be a JSON {_JSON_TYPES[kind]}, not {_JSON_TYPES[type(value)]}")
        return value

    def timestamp(self, text: str, where: str) -> str:
        # Python 3.11 reads ISO 8601's basic format too: GE 0.x writes "20250304T063002.140937Z"
        try:
            return datetime.fromisoformat(text).isoformat()
        except ValueError:
            self.fail(f"{where}: {text!r} is not an ISO 8601 timestamp")


def _short(text: str) -> str:
    """On one line and at most 200 characters: dbt's database errors run to a dozen lines."""
    text = " ".join(text.split())
    return text if len(text) <= _MESSAGE_LIMIT else text[: _MESSAGE_LIMIT - 1] + "…"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _percent(value: float) -> str:
    """Three significant digits, never rounded up to a misleading 100."""
    text = f"{value:.3g}"
    return "99.9" if text == "100" and value < 100 else text


# --- dimensions --------------------------------------------------------------------------------

_FRESHNESS = re.compile(r"recency|freshness|recent_data")
_EXPECTATION_RULES = (
    (_FRESHNESS, "freshness"),
    (re.compile(r"_not_be_null"), "completeness"),
    (re.compile(r"unique"), "uniqueness"),
    (re.compile(r"row_count|other_table|pair_values|multicolumn_sum"), "consistency"),
    (
        re.compile(r"_(mean|median|stdev|sum|quantile_values|kl_divergence|chisquare|bootstrapped_ks)_"),
        "accuracy",
    ),
)
_DBT_DIMENSIONS = {
    "not_null": "completeness",
    "not_null_proportion": "completeness",
    "at_least_one": "completeness",
    "not_empty_string": "completeness",
    "unique": "uniqueness",
    "unique_combination_of_columns": "uniqueness",
    "relationships": "consistency",
    "relationships_where": "consistency",
    "equal_rowcount": "consistency",
    "fewer_rows_than": "consistency",
    "equality": "consistency",
    "cardinality_equality": "consistency",
    "recency": "freshness",
}


def _expectation_dimension(expectation_type: str) -> str:
    return next((dim for rule, dim in _EXPECTATION_RULES if rule.search(expectation_type)), "validity")


def _dbt_dimension(test_name: str) -> str:
    if test_name in _DBT_DIMENSIONS:
        return _DBT_DIMENSIONS[test_name]
    # dbt_expectations reuses Great Expectations' names; other packages' freshness tests say so in their name
    if test_name.startswith("expect_") or _FRESHNESS.search(test_name):
        return _expectation_dimension(test_name)
    return "validity"


# --- dbt ---------------------------------------------------------------------------------------

_MANIFEST_VERSIONS = range(9, 13)  # v9 is dbt 1.5, v10 1.6, v11 1.7, v12 1.8 and later
_DBT_STATUSES = {
    "pass": "pass",
    "fail": "fail",
    "warn": "warn",
    "error": "error",
    "runtime error": "error",
    "skipped": "skipped",
}
_RELATION_TYPES = ("model", "seed", "snapshot", "source")
_SCHEMA_URL = re.compile(r"/dbt/([a-z-]+)/v(\d+)\.json$")


def _dbt_metadata(artifact: _Artifact, doc: dict[str, Any], expected: str) -> tuple[dict[str, Any], int]:
    """The metadata and schema version of a dbt artifact that must be `expected` (manifest,
    run-results): catches the two files passed the wrong way round."""
    metadata = artifact.field(doc, "metadata", dict, "the top level")
    url = artifact.field(metadata, "dbt_schema_version", str, "metadata")
    m = _SCHEMA_URL.search(url)
    if not m or m.group(1) != expected:
        artifact.fail(f"not a dbt {expected} file: its dbt_schema_version is {url!r}")
    return metadata, int(m.group(2))


def _dbt_relation(manifest: _Artifact, nodes: dict, sources: dict, test_id: str, test: dict) -> str:
    """database.schema.table of the model, seed, snapshot or source a test is about."""
    where = f"test {test_id}"
    # null on source tests, absent on singular tests: then the first relation it depends on
    target = manifest.field(test, "attached_node", str, where, optional=True)
    if target is None:
        depends_on = manifest.field(test, "depends_on", dict, where)
        parents = manifest.field(depends_on, "nodes", list, f"{where} depends_on")
        target = next((p for p in parents if isinstance(p, str) and p.split(".")[0] in _RELATION_TYPES), None)
        if target is None:
            manifest.fail(f"{where} depends on no model, seed, snapshot or source")
    parent = nodes.get(target) or sources.get(target)
    if not isinstance(parent, dict):
        manifest.fail(f"{where} is about {target}, which the manifest does not define")
    where = f"node {target}"
    table_key = "identifier" if parent.get("resource_type") == "source" else "alias"
    table = manifest.field(parent, table_key, str, where, optional=True) or manifest.field(parent, "name", str, where)
    # adapters without databases (dbt-spark) leave it null
    database = manifest.field(parent, "database", str, where, optional=True)
    return ".".join(part for part in (database, manifest.field(parent, "schema", str, where), table) if part)


def _dbt_test(manifest: _Artifact, nodes: dict, sources: dict, test_id: str, test: dict) -> dict[str, Any]:
    """The manifest's side of an assertion: relation, name, column, dimension."""
    where = f"test {test_id}"
    column = manifest.field(test, "column_name", str, where, optional=True)
    metadata = manifest.field(test, "test_metadata", dict, where, optional=True)
    if metadata is None:
        dimension = "validity"  # a singular test: a query for the rows that break a rule
    else:
        dimension = _dbt_dimension(manifest.field(metadata, "name", str, f"{where} test_metadata"))
        kwargs = manifest.field(metadata, "kwargs", dict, f"{where} test_metadata", optional=True) or {}
        column = column or manifest.field(kwargs, "column_name", str, f"{where} test_metadata kwargs", optional=True)
    return {
        "relation": _dbt_relation(manifest, nodes, sources, test_id, test),
        "name": manifest.field(test, "name", str, where),
        "column": column,
        "dimension": dimension,
    }


def _dbt_outcome(run_results: _Artifact, result: dict, where: str, generated_at: str) -> dict[str, Any]:
    """run_results' side of an assertion: status, message, observed_at."""
    raw = run_results.field(result, "status", str, where)
    if raw not in _DBT_STATUSES:
        run_results.fail(f"{where}: {raw!r} is not a dbt test status ({', '.join(_DBT_STATUSES)})")
    status = _DBT_STATUSES[raw]
    message = None
    if status != "pass":
        text = run_results.field(result, "message", str, where, optional=True)
        failures = run_results.field(result, "failures", int, where, optional=True)
        if text:
            message = _short(text)
        elif failures:
            message = _count(failures, "failing row")
    timing = run_results.field(result, "timing", list, where, optional=True) or []
    execute = next((t for t in timing if isinstance(t, dict) and t.get("name") == "execute"), {})
    # a skipped test never executed: it was skipped by the run that ended at generated_at
    finished = run_results.field(execute, "completed_at", str, f"{where} execute timing", optional=True)
    return {
        "status": status,
        "message": message,
        "observed_at": run_results.timestamp(finished or generated_at, where),
    }


def read_dbt(manifest_path: str | Path, run_results_path: str | Path) -> list[Assertion]:
    """dbt's test results: the tests of `manifest.json` (schema v9 to v12) that `run_results.json`
    has a result for, sorted by relation and test name.

    The relation is the tested node's ``database.schema.alias`` (a source's identifier), the
    column the test's ``column_name`` or ``test_metadata.kwargs.column_name``. The message is
    dbt's own (``Got 2 results, configured to warn if != 0``, the database error) or the count of
    failing rows; none for a pass. observed_at is when the test finished executing, or when
    run_results was written for a test that never executed (skipped). Tests without a result were
    not selected and are left out; a test result the manifest does not define is an error (the
    files come from different projects or runs)."""
    manifest = _Artifact(manifest_path, "dbt manifest")
    manifest_doc = manifest.load()
    _, version = _dbt_metadata(manifest, manifest_doc, "manifest")
    if version not in _MANIFEST_VERSIONS:
        manifest.fail(f"manifest schema v{version} is not supported (v9 to v12, from dbt 1.5 on)")
    nodes = manifest.field(manifest_doc, "nodes", dict, "the top level")
    sources = manifest.field(manifest_doc, "sources", dict, "the top level")

    run_results = _Artifact(run_results_path, "dbt run_results")
    results_doc = run_results.load()
    metadata, _ = _dbt_metadata(run_results, results_doc, "run-results")
    generated_at = run_results.field(metadata, "generated_at", str, "metadata")

    assertions, strangers = [], []
    for index, result in enumerate(run_results.field(results_doc, "results", list, "the top level")):
        where = f"results[{index}]"
        if not isinstance(result, dict):
            run_results.fail(f"{where} is not an object")
        test_id = run_results.field(result, "unique_id", str, where)
        test = nodes.get(test_id)
        if test is None:
            if test_id.startswith("test."):
                strangers.append(test_id)
            continue
        if not isinstance(test, dict):
            manifest.fail(f"node {test_id} is not an object")
        if test.get("resource_type") != "test":
            continue  # `dbt build` reports seeds, models and snapshots too
        assertions.append(
            Assertion(
                **_dbt_test(manifest, nodes, sources, test_id, test),
                **_dbt_outcome(run_results, result, where, generated_at),
                source="dbt",
            )
        )
    if strangers:
        run_results.fail(
            f"{_count(len(strangers), 'test result')} for tests the manifest {manifest.path} does not define"
            f" (first: {strangers[0]}): are the two files from the same dbt project and run?"
        )
    return sorted(assertions, key=lambda a: (a.relation, a.name))


# --- Great Expectations ------------------------------------------------------------------------


def _data_asset(artifact: _Artifact, meta: dict[str, Any]) -> str:
    # V3 API and GX 1.x: active_batch_definition (batch_spec too); the V2 API: batch_kwargs
    for key in ("active_batch_definition", "batch_spec", "batch_kwargs"):
        section = meta.get(key)
        if isinstance(section, dict) and isinstance(section.get("data_asset_name"), str) and section["data_asset_name"]:
            return section["data_asset_name"]
    artifact.fail("meta names no data asset (data_asset_name in active_batch_definition, batch_spec or batch_kwargs)")


def _validation_time(artifact: _Artifact, meta: dict[str, Any]) -> str | None:
    stamp = artifact.field(meta, "validation_time", str, "meta", optional=True)
    run_id = meta.get("run_id")
    if stamp is None and isinstance(run_id, dict):  # older results carry only the run's time
        stamp = artifact.field(run_id, "run_time", str, "meta run_id", optional=True)
    return artifact.timestamp(stamp, "meta") if stamp else None


def _exception(artifact: _Artifact, result: dict[str, Any], where: str) -> tuple[bool, str | None]:
    """(whether the expectation raised, the exception's message).

    exception_info is one record, or (GE 0.15 and later, when a metric could not be computed)
    one record per failed metric keyed by the metric's id."""
    info = artifact.field(result, "exception_info", dict, where, optional=True) or {}
    records = [info] if "raised_exception" in info else list(info.values())
    for record in records:
        if not isinstance(record, dict):
            artifact.fail(f"{where}: exception_info is neither an exception record nor records by metric")
        if record.get("raised_exception") is True:
            message = record.get("exception_message")
            return True, message if isinstance(message, str) else None
    return False, None


def _ge_message(status: str, outcome: dict[str, Any], exception_message: str | None) -> str | None:
    if status == "error":
        return _short(exception_message) if exception_message else "the expectation raised an exception"
    count = outcome.get("unexpected_count")
    if isinstance(count, int) and count > 0:  # also on a pass: `mostly` tolerates some
        text = _count(count, "unexpected value")
        percent = outcome.get("unexpected_percent")
        return f"{text} ({_percent(percent)}%)" if isinstance(percent, int | float) else text
    if status == "fail" and "observed_value" in outcome:
        return _short(f"observed {json.dumps(outcome['observed_value'])}")
    return None


def read_great_expectations(path: str | Path) -> list[Assertion]:
    """One Great Expectations validation result (an ExpectationSuiteValidationResult as JSON, GE
    0.13 to 0.18 or GX 1.x), one assertion per expectation, in the suite's order.

    The relation is the batch's data asset name; the column the expectation's ``column``
    argument (none for table and multi-column expectations). The message counts unexpected
    values (``12 unexpected values (0.0996%)``), or gives the observed value of a failed
    aggregate expectation, or the exception's message. observed_at is the validation time."""
    artifact = _Artifact(path, "Great Expectations validation result")
    doc = artifact.load()
    results = artifact.field(doc, "results", list, "the top level")
    meta = artifact.field(doc, "meta", dict, "the top level")
    relation, observed_at = _data_asset(artifact, meta), _validation_time(artifact, meta)
    assertions = []
    for index, result in enumerate(results):
        where = f"results[{index}]"
        if not isinstance(result, dict):
            artifact.fail(f"{where} is not an object")
        config = artifact.field(result, "expectation_config", dict, where)
        where_config = f"{where} expectation_config"
        # GE 0.x calls it expectation_type, GX 1.x type
        name = artifact.field(config, "expectation_type", str, where_config, optional=True) or artifact.field(
            config, "type", str, where_config, optional=True
        )
        if name is None:
            artifact.fail(f"{where_config} has neither 'expectation_type' (GE 0.x) nor 'type' (GX 1.x)")
        kwargs = artifact.field(config, "kwargs", dict, where_config, optional=True) or {}
        raised, exception_message = _exception(artifact, result, where)
        if raised:
            status = "error"  # GE records success false too: the data was never checked
        else:
            status = "pass" if artifact.field(result, "success", bool, where) else "fail"
        outcome = artifact.field(result, "result", dict, where, optional=True) or {}
        assertions.append(
            Assertion(
                relation=relation,
                name=name,
                status=status,
                dimension=_expectation_dimension(name),
                column=artifact.field(kwargs, "column", str, f"{where_config} kwargs", optional=True),
                source="great_expectations",
                message=_ge_message(status, outcome, exception_message),
                observed_at=observed_at,
            )
        )
    return assertions


# --- score and freshness -----------------------------------------------------------------------

_POINTS = {"pass": 1.0, "warn": 0.5, "fail": 0.0, "error": 0.0}  # skipped: no evidence either way


def quality_score(
    assertions: Iterable[Assertion | AssertionResult],
    completeness: float | None = None,
    uniqueness: float | None = None,
) -> float | None:
    """A table's quality in [0, 1]: the mean of one term per dimension that has evidence.

    An assertion scores 1 for pass, 0.5 for warn, 0 for fail and error (a check that could not
    run proves nothing good); skipped assertions are left out. Each dimension's term is the mean
    score of its assertions, so twenty not_null tests weigh as much as one freshness test. The
    profile's completeness and uniqueness (fractions in [0, 1], e.g. non-null and distinct
    shares) are one term each, alongside the assertions' terms::

        score = (sum over dimensions d of mean(points of d's assertions)
                 + completeness + uniqueness) / (number of terms)

    None when there is no term at all (no scored assertion, no profile measure)."""
    points: dict[str, list[float]] = {}
    for assertion in assertions:
        if assertion.status in _POINTS:
            points.setdefault(assertion.dimension, []).append(_POINTS[assertion.status])
    terms = [sum(scores) / len(scores) for scores in points.values()]
    for label, measure in (("completeness", completeness), ("uniqueness", uniqueness)):
        if measure is not None:
            if not 0 <= measure <= 1:  # also rejects NaN
                raise ValueError(f"{label} must be a fraction in [0, 1], not {measure!r}")
            terms.append(measure)
    return sum(terms) / len(terms) if terms else None


def freshness(last_modified: datetime | None, sla: str | None, now: datetime) -> tuple[str, float | None]:
    """("fresh" | "stale" | "unknown", age in hours) of data last modified at `last_modified`.

    Fresh while the age is at most the SLA (exactly the SLA is still fresh), stale after.
    Unknown without a last modification (age None) or without an SLA (age still given). A
    last modification after `now` (clock skew) is age 0. Both datetimes must be timezone-aware;
    a bad SLA raises even when the verdict would be unknown, so a typo cannot hide."""
    window = parse_duration(sla) if sla is not None else None
    for label, moment in (("now", now), ("last_modified", last_modified)):
        if moment is not None and moment.utcoffset() is None:
            raise ValueError(f"{label} must be timezone-aware, not {moment.isoformat()}")
    if last_modified is None:
        return "unknown", None
    age = max(now - last_modified, timedelta())
    hours = age.total_seconds() / 3600
    if window is None:
        return "unknown", hours
    return ("fresh" if age <= window else "stale"), hours
