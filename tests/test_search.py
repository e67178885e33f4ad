"""Offline dataset search: tokenization, ranking, filters and determinism (lumos_dagster.reports.search)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lumos_dagster.reports.search import Document, Hit, SearchIndex, search, tokenize
from tests.conftest import examples

ROOT = Path(__file__).resolve().parents[1]

DOCS = (
    Document(
        "sales/orders",
        platform="s3",
        domain="sales",
        owners=("ann@example.com", "data-eng"),
        tags=("gold",),
        description="Customer orders, one row per order.",
        fields=(
            ("order_id", None),
            ("customer_id", None),
            ("order_date", "Day the order was placed"),
            ("amount", "Order total in EUR"),
            ("status", None),
        ),
        quality=0.95,
    ),
    Document(
        "sales/order_items",
        platform="s3",
        domain="sales",
        owners=("ann@example.com",),
        description="Line items of each order.",
        fields=(("order_id", None), ("product_id", None), ("quantity", None), ("unit_price", None)),
        quality=0.9,
    ),
    Document(
        "sales/refunds",
        platform="s3",
        domain="sales",
        owners=("ann@example.com",),
        description="Money given back to customers.",
        fields=(("refund_id", None), ("order_id", None), ("amount", None), ("reason", "Why the refund was asked for")),
        quality=0.7,
    ),
    Document(
        "crm/customers",
        platform="postgres",
        domain="crm",
        owners=("Bob@Example.com",),
        tags=("pii",),
        description="Customer master data from the CRM.",
        fields=(
            ("customer_id", "Primary key"),
            ("email", None),
            ("first_name", None),
            ("last_name", None),
            ("address.city", None),
            ("address.zip", None),
        ),
        quality=0.99,
    ),
    Document(
        "crm/contacts",
        platform="postgres",
        domain="crm",
        owners=("bob@example.com",),
        tags=("PII",),
        description="People we talk to at each customer.",
        fields=(("contact_id", None), ("customer_id", None), ("phone", None), ("email", None)),
    ),
    Document(
        "raw/events",
        platform="file",
        domain="web",
        owners=("data-eng",),
        tags=("raw",),
        description="Clickstream from the website.",
        fields=(
            ("eventTime", "When it happened, in UTC"),
            ("eventType", None),
            ("userId", None),
            ("sessionId", None),
            ("page.url", None),
        ),
        quality=0.5,
    ),
    Document(
        "raw/sessions",
        platform="file",
        domain="web",
        owners=("data-eng",),
        tags=("raw",),
        fields=(("sessionId", None), ("startTime", None), ("endTime", None), ("userAgent", None)),
        quality=0.6,
    ),
    Document(
        "analytics/customer_360",
        platform="s3",
        domain="analytics",
        owners=("carol@example.com", "analytics"),
        tags=("gold",),
        description="One row per customer with lifetime value and last order",
        fields=(("customer_id", None), ("lifetime_value", None), ("last_order_date", None), ("segment", None)),
        quality=0.88,
    ),
    Document(
        "analytics/daily_revenue",
        platform="s3",
        domain="analytics",
        owners=("carol@example.com",),
        fields=(("day", None), ("revenue", "Sum of order amounts net of refunds"), ("currency", None)),
        quality=0.92,
    ),
    Document(
        "finance/invoices",
        platform="postgres",
        domain="finance",
        owners=("dave@example.com",),
        tags=("finance", "pii"),
        description="Invoices sent to customers.",
        fields=(("invoice_id", None), ("customer_id", None), ("billing_address.street", None), ("total", None)),
        quality=0.8,
    ),
    Document(
        "finance/payments",
        platform="postgres",
        domain="finance",
        owners=("dave@example.com",),
        tags=("finance",),
        fields=(("payment_id", None), ("invoice_id", None), ("paid_at", None), ("method", "Card, transfer or cash")),
    ),
    Document(
        "marketing/campaigns",
        platform="s3",
        domain="marketing",
        owners=("erin@example.com",),
        description="Marketing campaigns and their spend.",
        fields=(("campaign_id", None), ("channel", None), ("budget", None), ("start_date", None)),
        quality=0.75,
    ),
    Document(
        "inventory/stock_levels",
        platform="file",
        domain="operations",
        owners=("ops",),
        description="Stock on hand per warehouse, daily.",
        fields=(("sku", None), ("warehouse_id", None), ("on_hand", None), ("reorder_point", None)),
        quality=0.85,
    ),
    Document(
        "hr/employees",
        platform="postgres",
        domain="hr",
        owners=("hr-team",),
        tags=("pii",),
        fields=(("employee_id", None), ("name", None), ("manager_id", None), ("salary", None)),
        quality=0.97,
    ),
    Document(
        "ml/churn_features",
        platform="s3",
        domain="analytics",
        owners=("carol@example.com",),
        description="Features for the churn model.",
        fields=(("customer_id", None), ("days_since_last_order", None), ("support_tickets", None), ("churned", None)),
        quality=0.65,
    ),
)


def names(hits: list[Hit]) -> list[str]:
    return [hit.dataset for hit in hits]


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("customerId", ("customer", "id", "customerid")),
        ("cust_id", ("cust", "id", "cust_id")),
        ("customer.address.city", ("customer", "address", "city", "customer.address.city")),
        ("HTTPServer", ("http", "server", "httpserver")),
        ("sales/orders", ("sales", "orders")),
        ("analytics/customer_360", ("analytics", "customer", "360", "customer_360")),
        ("One row per customer.", ("one", "row", "per", "customer")),
        ("data-eng", ("data", "eng", "data-eng")),
        ("", ()),
    ],
)
def test_tokenize_splits_data_names_and_keeps_the_whole(text, tokens):
    assert tokenize(text) == tokens


# (query, filters) -> the expected first results, in order
TABLE = [
    ("sales/orders", {}, ["sales/orders"]),
    ("customer_id", {}, ["analytics/customer_360", "crm/customers"]),
    ("Customer Orders", {}, ["sales/orders"]),
    ("one row per customer", {}, ["analytics/customer_360", "sales/orders"]),
    ("event time", {}, ["raw/events", "raw/sessions"]),
    ("eventTime", {}, ["raw/events"]),
    ("address city", {}, ["crm/customers", "finance/invoices"]),
    ("start date", {}, ["marketing/campaigns"]),
    ("refund", {}, ["sales/refunds", "analytics/daily_revenue"]),
    ("finance", {}, ["finance/payments", "finance/invoices"]),
    ("data-eng", {}, ["raw/events", "raw/sessions", "sales/orders"]),
    ("customer", {"platform": "postgres", "tag": "pii"}, ["crm/customers", "crm/contacts", "finance/invoices"]),
    ("customer", {"owner": "ANN@example.com"}, ["sales/orders", "sales/refunds"]),
    ("customer", {"min_quality": 0.9}, ["crm/customers", "sales/orders"]),
    ("", {"platform": "file"}, ["inventory/stock_levels", "raw/events", "raw/sessions"]),
]


@pytest.mark.parametrize(("query", "filters", "expected"), TABLE, ids=[f"{q!r} {f}" for q, f, _ in TABLE])
def test_table(query, filters, expected):
    assert names(search(DOCS, query, **filters))[: len(expected)] == expected


def test_all_hits_of_the_combined_filters():
    hits = search(DOCS, "customer", platform="postgres", tag="PII", owner="bob@example.com", min_quality=0.9)
    assert names(hits) == ["crm/customers"]


def test_exact_name_beats_field_and_description_matches():
    bare = Document("crm/customers")
    busy = Document(
        "crm/accounts",
        tags=("customers",),
        description="crm customers, all crm customers",
        fields=(("crm", None), ("customers", "crm customers")),
    )
    # without the exact name, the document saying it most wins ...
    assert names(search([bare, busy], "crm customers")) == ["crm/accounts", "crm/customers"]
    # ... but a query naming a dataset puts that dataset first, whatever the case
    for query in ("crm/customers", " CRM/Customers "):
        hits = search([bare, busy], query)
        assert names(hits) == ["crm/customers", "crm/accounts"]
        assert hits[0].matched == ("name",)


def test_prefix_matches_partial_words():
    hits = search(DOCS, "ord")
    assert names(hits)[:2] == ["sales/orders", "sales/order_items"]
    assert hits[0].matched[:3] == ("name", "field:order_id", "field:order_date")
    assert names(search(DOCS, "cust"))[:2] == ["analytics/customer_360", "crm/customers"]


def test_prefix_match_ranks_below_an_exact_token():
    docs = [Document("web/clicks"), Document("web/click")]
    hits = search(docs, "click")
    assert names(hits) == ["web/click", "web/clicks"]
    assert hits[0].score > hits[1].score
    # under three characters a word only matches whole tokens
    assert search(docs, "cl") == []


def test_camel_and_snake_case_are_split():
    for query in ("event time", "event_time", "eventtime", "EventTime"):
        hits = search(DOCS, query)
        assert hits[0].dataset == "raw/events"
        assert "field:eventTime" in hits[0].matched
    assert "raw/events" in names(search(DOCS, "user id"))


def test_an_exact_field_name_matches_strongly():
    # the field as one token scores on top of its words: a document that only has the words scores less
    docs = [Document("a", fields=(("customer_id", None),)), Document("b", fields=(("customer", None), ("id", None)))]
    assert names(search(docs, "customer_id")) == ["a", "b"]


def test_all_words_matched_beat_one_word_matched_strongly():
    strong = Document(
        "crm/events", tags=("events",), description="events events events", fields=(("events", "events"),)
    )
    both = Document("web/log", description="page events and time spent")
    hits = search([strong, both], "events time")
    assert names(hits) == ["web/log", "crm/events"]
    assert int(hits[0].score) == 2 and int(hits[1].score) == 1


def test_matched_lists_zones_in_a_stable_order():
    (hit,) = [h for h in search(DOCS, "customer") if h.dataset == "crm/customers"]
    assert hit.matched == ("name", "field:customer_id", "description")
    (hit,) = search(DOCS, "refund")[:1]
    assert hit.matched == ("name", "field:refund_id", "field-description:reason")
    (hit,) = search(DOCS, "pii crm", tag="pii", platform="postgres", limit=1)
    assert hit == Hit("crm/customers", hit.score, ("name", "tag:pii", "description", "domain"))


def test_filters():
    assert names(search(DOCS, "", platform="postgres")) == [
        "crm/contacts",
        "crm/customers",
        "finance/invoices",
        "finance/payments",
        "hr/employees",
    ]
    assert names(search(DOCS, "", owner="BOB@EXAMPLE.COM")) == ["crm/contacts", "crm/customers"]
    assert names(search(DOCS, "", tag="Pii")) == ["crm/contacts", "crm/customers", "finance/invoices", "hr/employees"]
    assert search(DOCS, "", platform="S3", tag="pii") == []  # platform is compared exactly


def test_min_quality_excludes_unknown_quality():
    kept = names(search(DOCS, "", min_quality=0.0, limit=100))
    assert "crm/contacts" not in kept and "finance/payments" not in kept
    assert len(kept) == len(DOCS) - 2
    assert names(search(DOCS, "", min_quality=0.95)) == ["crm/customers", "hr/employees", "sales/orders"]


def test_empty_query_lists_by_name_with_score_zero():
    hits = search(DOCS, "  ", tag="gold")
    assert hits == [Hit("analytics/customer_360", 0.0, ()), Hit("sales/orders", 0.0, ())]
    assert names(search(DOCS, "")) == sorted(doc.dataset for doc in DOCS)


def test_no_match_is_empty():
    assert search(DOCS, "zebra") == []
    assert search(DOCS, "!!!") == []
    assert search(DOCS, "customer", platform="mongodb") == []
    assert search([], "customer") == []


def test_limit():
    assert len(search(DOCS, "customer", limit=2)) == 2
    assert search(DOCS, "customer", limit=0) == []
    with pytest.raises(ValueError, match="limit"):
        search(DOCS, "customer", limit=-1)


def test_one_index_serves_many_queries():
    index = SearchIndex(DOCS)
    for query in ("customer", "ord", "", "event time"):
        assert index.search(query, limit=50) == search(DOCS, query, limit=50)


def test_ties_are_broken_by_name():
    twins = [Document(name, fields=(("amount", None),)) for name in ("b/sales", "c/sales", "a/sales")]
    hits = search(twins, "amount")
    assert names(hits) == ["a/sales", "b/sales", "c/sales"]
    assert len({hit.score for hit in hits}) == 1


def test_ranking_does_not_depend_on_input_order_or_hash_seed():
    queries = ["customer", "ord", "order id", "pii", "event time"]
    expected = [search(DOCS, query) for query in queries]
    shuffled = list(DOCS)
    random.Random(3).shuffle(shuffled)
    assert [search(shuffled, query) for query in queries] == expected

    script = (
        "import json, sys; from lumos_dagster.reports.search import search; from tests.test_search import DOCS; "
        "print(json.dumps([[(h.dataset, h.score) for h in search(DOCS, q)] for q in json.loads(sys.argv[1])]))"
    )
    runs = {
        seed: subprocess.run(
            [sys.executable, "-c", script, json.dumps(queries)],
            cwd=ROOT,
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2")
    }
    assert runs["1"] == runs["2"]
    assert json.loads(runs["1"]) == [[[h.dataset, h.score] for h in hits] for hits in expected]


WORDS = ["sales", "orders", "order", "customer", "customers", "events", "event", "raw", "crm", "id", "time"]
PLATFORMS = ["file", "s3", "postgres"]
OWNERS = ["ann@example.com", "Bob@Example.com", "data-eng"]
TAGS = ["pii", "Gold", "raw"]

words = st.lists(st.sampled_from(WORDS), min_size=1, max_size=3)
field_names = st.tuples(words, st.sampled_from(["_", ".", ""])).map(
    lambda case: case[1].join(case[0]) if case[1] else case[0][0] + "".join(w.title() for w in case[0][1:])
)
documents = st.builds(
    Document,
    dataset=words.map("/".join),
    platform=st.sampled_from(PLATFORMS),
    domain=st.none() | st.sampled_from(WORDS),
    owners=st.lists(st.sampled_from(OWNERS), max_size=2, unique=True).map(tuple),
    tags=st.lists(st.sampled_from(TAGS), max_size=2, unique=True).map(tuple),
    description=st.none() | words.map(" ".join),
    fields=st.lists(st.tuples(field_names, st.none() | words.map(" ".join)), max_size=4).map(tuple),
    quality=st.none() | st.floats(0, 1),
)


def passes(doc: Document, filters: dict) -> bool:
    return (
        filters["platform"] in (None, doc.platform)
        and (filters["owner"] is None or filters["owner"].lower() in [o.lower() for o in doc.owners])
        and (filters["tag"] is None or filters["tag"].lower() in [t.lower() for t in doc.tags])
        and (filters["min_quality"] is None or (doc.quality is not None and doc.quality >= filters["min_quality"]))
    )


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(documents, max_size=12, unique_by=lambda doc: doc.dataset),
    st.data(),
    st.fixed_dictionaries(
        {
            "platform": st.none() | st.sampled_from(PLATFORMS),
            "owner": st.none() | st.sampled_from([*OWNERS, "BOB@example.com"]),
            "tag": st.none() | st.sampled_from([*TAGS, "PII"]),
            "min_quality": st.none() | st.floats(0, 1),
        }
    ),
    st.integers(1, 15),
)
def test_hits_pass_filters_rank_down_and_put_the_named_dataset_first(docs, data, filters, limit):
    named = [doc.dataset for doc in docs]
    query = data.draw(st.just("") | words.map(" ".join) | (st.sampled_from(named) if named else st.just("")))
    hits = search(docs, query, limit=limit, **filters)

    by_name = {doc.dataset: doc for doc in docs}
    assert len(hits) <= limit
    assert all(passes(by_name[hit.dataset], filters) for hit in hits)
    assert all(a.score >= b.score for a, b in zip(hits, hits[1:], strict=False))
    if query in by_name and passes(by_name[query], filters):
        assert hits[0].dataset == query
    if not query:
        assert names(hits) == sorted(name for name in named if passes(by_name[name], filters))[:limit]
    assert search(list(reversed(docs)), query, limit=limit, **filters) == hits


def test_an_exact_field_name_ranks_first():
    """`lumos search customer_id` split the query on `_` and ranked `view_id` and `customer_name` beside it
    (issue 41): a dataset with a field named as the query, at any depth, comes before the partial matches."""
    docs = [
        Document("web/views", fields=(("view_id", None), ("customer_name", None), ("session_id", None))),
        Document("web/sessions", fields=(("session_id", None), ("customer", None), ("id", None))),
        Document("crm/contacts", fields=(("contact_id", None), ("buyer", None), ("buyer.customer_id", None))),
        Document("sales/orders", fields=(("order_id", None), ("customer_id", None))),
        Document("customer_id_map", fields=(("key", None),)),
    ]
    hits = search(docs, "customer_id")
    assert [h.dataset for h in hits[:2]] == ["sales/orders", "crm/contacts"]
    assert {h.dataset for h in hits[2:]} == {"customer_id_map", "web/views", "web/sessions"}
    assert search(docs, "customer_id_map")[0].dataset == "customer_id_map"  # an exact name still first
    assert "field:buyer.customer_id" in hits[1].matched
