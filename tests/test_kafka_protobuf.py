"""Protobuf subjects of a schema registry as Lumos schemas (lumos_dagster/formats/protobuf.py, compiled
by the real protoc from grpcio-tools), and through the Kafka source: subjects with references, framed
messages and the message they name, a malformed file failing only its topic.

The broker is Tansu and the registry the stand-in of tests/kafka_broker.py (see tests/test_kafka.py:
no registry server can run here). Payloads are encoded by the protobuf runtime; the framing's
message indexes are written out by hand here, byte by byte, as Confluent's serializers write them.
"""

import importlib.resources
import json
from dataclasses import replace

import pytest
from click.testing import CliRunner
from google.protobuf.message_factory import GetMessageClass

from lumos_dagster.cli import main
from lumos_dagster.floor.datatypes import (
    NO_DEFAULT,
    Array,
    Enum,
    Field,
    Map,
    Primitive,
    Schema,
    SchemaTooLarge,
    Struct,
    Timestamp,
    map_struct_fields,
)
from lumos_dagster.formats.protobuf import ProtobufError, compile_proto
from lumos_dagster.schema.diff import (
    ENUM_SYMBOLS_ADDED,
    FIELD_ADDED,
    FIELD_REMOVED,
    FIELD_RENAMED,
    diff_schemas,
)
from lumos_dagster.sources.kafka import KEY_FIELD, message_indexes
from lumos_dagster.sources.schema_registry import RegisteredSchema, RegistryError, to_schema
from tests import test_kafka
from tests.kafka_broker import create_topics, framed, produce
from tests.test_kafka import kafka_source, unique

# the Kafka tests' fixtures: a broker for the module, a registry stand-in for each test
kafka_broker, registry = test_kafka.kafka_broker, test_kafka.registry

I32, I64, U32, STR, BIN = (Primitive(k) for k in ("int32", "int64", "uint32", "string", "binary"))
JSON_T, BOOL, F64 = Primitive("json"), Primitive("boolean"), Primitive("float64")


def F(name, dtype, nullable, default, native, field_id, description=None) -> Field:
    return Field(name, dtype, nullable, default, description, native, field_id)


def undocumented(t):
    return map_struct_fields(t, lambda fields: tuple(replace(f, description=None, type=undocumented(f.type))
                                                     for f in fields))  # fmt: skip


def proto_schema(text: str, imports: dict[str, str] | None = None, subject: str = "t-value", message=(0,)) -> Schema:
    registered = RegisteredSchema(1, "PROTOBUF", text, subject, 1, tuple((imports or {}).items()), tuple(message))
    return to_schema(registered)


# ------------------------------------------------------------------ one field at a time

WELL_KNOWN = ("timestamp", "duration", "wrappers", "struct", "any", "empty")
ITEM = Struct((F("sku", STR, False, "", "string", 1),))
STATUS = Enum(("STATUS_UNKNOWN", "NEW"), "t.Status", "STATUS_UNKNOWN")


@pytest.mark.parametrize(
    "declaration, expected",
    [
        ("int32 x = 1;", (I32, False, 0, "int32")),
        ("sint64 x = 1;", (I64, False, 0, "sint64")),
        ("sfixed32 x = 1;", (I32, False, 0, "sfixed32")),
        ("fixed32 x = 1;", (U32, False, 0, "fixed32")),
        ("uint64 x = 1;", (Primitive("uint64"), False, 0, "uint64")),
        ("double x = 1;", (F64, False, 0.0, "double")),
        ("float x = 1;", (Primitive("float32"), False, 0.0, "float")),
        ("bool x = 1;", (BOOL, False, False, "bool")),
        ("string x = 1;", (STR, False, "", "string")),
        ("bytes x = 1;", (BIN, False, "", "bytes")),
        # proto3 `optional` tracks presence: null when unset
        ("optional string x = 1;", (STR, True, None, "optional string")),
        ("Status x = 1;", (STATUS, False, "STATUS_UNKNOWN", "t.Status")),
        ("Item x = 1;", (ITEM, True, None, "t.Item")),
        ("repeated int64 x = 1;", (Array(I64, False), False, [], "repeated int64")),
        ("repeated Item x = 1;", (Array(ITEM, False), False, [], "repeated t.Item")),
        ("map<string, int32> x = 1;", (Map(STR, I32, False), False, {}, "map<string, int32>")),
        ("map<int64, Item> x = 1;", (Map(I64, ITEM, False), False, {}, "map<int64, t.Item>")),
        # a oneof's members are the message's fields, each nullable: at most one is set
        ("oneof pick { string x = 1; int32 y = 2; }", (STR, True, None, "string (oneof pick)")),
        ("google.protobuf.Timestamp x = 1;", (Timestamp("ns", "UTC"), True, None, "google.protobuf.Timestamp")),
        ("google.protobuf.Duration x = 1;", (Primitive("interval"), True, None, "google.protobuf.Duration")),
        ("google.protobuf.Int64Value x = 1;", (I64, True, None, "google.protobuf.Int64Value")),
        ("google.protobuf.StringValue x = 1;", (STR, True, None, "google.protobuf.StringValue")),
        ("google.protobuf.BytesValue x = 1;", (BIN, True, None, "google.protobuf.BytesValue")),
        ("google.protobuf.BoolValue x = 1;", (BOOL, True, None, "google.protobuf.BoolValue")),
        ("google.protobuf.Struct x = 1;", (JSON_T, True, None, "google.protobuf.Struct")),
        ("google.protobuf.Value x = 1;", (JSON_T, True, None, "google.protobuf.Value")),
        ("google.protobuf.ListValue x = 1;", (JSON_T, True, None, "google.protobuf.ListValue")),
        ("repeated google.protobuf.Timestamp x = 1;",
         (Array(Timestamp("ns", "UTC"), False), False, [], "repeated google.protobuf.Timestamp")),
        # what an Any packs is known per message only: its wire form
        ("google.protobuf.Any x = 1;", (Struct((F("type_url", STR, False, "", "string", 1),
                                                F("value", BIN, False, "", "bytes", 2))), True, None,
                                        "google.protobuf.Any")),
        ("google.protobuf.Empty x = 1;", (Struct(()), True, None, "google.protobuf.Empty")),
        # a message that holds itself: unknown where it recurs
        ("M x = 1;", (Primitive("unknown"), True, None, "t.M")),
    ],
)  # fmt: skip
def test_proto3_field_types(declaration, expected):
    imports = "".join(f'import "google/protobuf/{w}.proto";\n' for w in WELL_KNOWN)
    text = (f'syntax = "proto3";\npackage t;\n{imports}enum Status {{ STATUS_UNKNOWN = 0; NEW = 1; }}\n'
            f"message M {{ {declaration} }}\nmessage Item {{ string sku = 1; }}\n")  # fmt: skip
    (field, *_) = proto_schema(text).fields
    # google/protobuf's own comments (Any's) are descriptions too: not what this table is about
    assert (undocumented(field.type), field.nullable, field.default, field.native_type) == expected
    assert field.field_id == 1


@pytest.mark.parametrize(
    "header, declaration, expected",
    [
        ('syntax = "proto2";', "required int32 x = 1;", (I32, False, NO_DEFAULT)),
        ('syntax = "proto2";', "optional int32 x = 1;", (I32, True, None)),
        ('syntax = "proto2";', "optional int32 x = 1 [default = 7];", (I32, True, 7)),
        ('syntax = "proto2";', "optional Status x = 1 [default = NEW];", (STATUS, True, "NEW")),
        ('syntax = "proto2";', 'optional bytes x = 1 [default = "\\001"];', (BIN, True, "\x01")),
        ('syntax = "proto2";', "optional double x = 1 [default = inf];", (F64, True, "Infinity")),
        ('syntax = "proto2";', "optional group X = 1 { optional int32 q = 1; }",
         (Struct((F("q", I32, True, None, "int32", 1),)), True, None)),
        # editions: presence is explicit unless a feature says otherwise
        ('edition = "2023";', "int32 x = 1;", (I32, True, None)),
        ('edition = "2023";', "int32 x = 1 [features.field_presence = IMPLICIT];", (I32, False, 0)),
        ('edition = "2023";', "int32 x = 1 [features.field_presence = LEGACY_REQUIRED];", (I32, False, NO_DEFAULT)),
    ],
)  # fmt: skip
def test_proto2_and_editions_presence_nullability_and_defaults(header, declaration, expected):
    text = f"{header}\npackage t;\nenum Status {{ STATUS_UNKNOWN = 0; NEW = 1; }}\nmessage M {{ {declaration} }}\n"
    (field,) = proto_schema(text).fields
    assert (field.type, field.nullable, field.default) == expected


# ------------------------------------------------------------------ a whole file, with imports

MONEY = """syntax = "proto3";
package common;
message Money {
  string currency = 1;
  int64 units = 2;
}
"""
ADDRESS = """syntax = "proto3";
package common;
import "common/money.proto";
// a postal address
message Address {
  string city = 1;
  // postal code, as written
  string zip = 2;
  common.Money delivery_fee = 3;
}
"""
ORDER = """syntax = "proto3";
package shop;
import "common/address.proto";
import "common/money.proto";
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";

// An order, as the shop takes it.
message Order {
  // the order's number
  int64 id = 1;
  string customer = 2; // who ordered
  repeated Line lines = 3;
  map<string, string> labels = 4;
  oneof payment {
    string card_token = 5;
    common.Money cash = 6;
  }
  google.protobuf.Timestamp placed_at = 7;
  google.protobuf.Int32Value priority = 8;
  optional string note = 9;
  common.Address ship_to = 10;
  Status status = 11;

  message Line {
    string sku = 1;
    uint32 quantity = 2;
  }
  enum Status {
    STATUS_UNSPECIFIED = 0;
    PLACED = 1;
    SHIPPED = 2;
  }
}

message OrderKey {
  int64 id = 1;
}
"""
MONEY_T = Struct((F("currency", STR, False, "", "string", 1), F("units", I64, False, 0, "int64", 2)))
ORDER_FIELDS = (
    F("id", I64, False, 0, "int64", 1, "the order's number"),
    F("customer", STR, False, "", "string", 2, "who ordered"),
    F("lines", Array(Struct((F("sku", STR, False, "", "string", 1), F("quantity", U32, False, 0, "uint32", 2))),
                     False), False, [], "repeated shop.Order.Line", 3),
    F("labels", Map(STR, STR, False), False, {}, "map<string, string>", 4),
    F("card_token", STR, True, None, "string (oneof payment)", 5),
    F("cash", MONEY_T, True, None, "common.Money (oneof payment)", 6),
    F("placed_at", Timestamp("ns", "UTC"), True, None, "google.protobuf.Timestamp", 7),
    F("priority", I32, True, None, "google.protobuf.Int32Value", 8),
    F("note", STR, True, None, "optional string", 9),
    F("ship_to", Struct((F("city", STR, False, "", "string", 1),
                         F("zip", STR, False, "", "string", 2, "postal code, as written"),
                         F("delivery_fee", MONEY_T, True, None, "common.Money", 3))), True, None, "common.Address", 10),
    F("status", Enum(("STATUS_UNSPECIFIED", "PLACED", "SHIPPED"), "shop.Order.Status", "STATUS_UNSPECIFIED"),
      False, "STATUS_UNSPECIFIED", "shop.Order.Status", 11),
)  # fmt: skip
IMPORTS = {"common/address.proto": ADDRESS, "common/money.proto": MONEY}


def test_a_file_with_imports_nested_types_and_comments_is_its_first_message():
    assert proto_schema(ORDER, IMPORTS) == Schema(ORDER_FIELDS)


@pytest.mark.parametrize(
    "indexes, names",
    [
        ((0,), ["id"]),  # Confluent's default: the file's first message
        ((1,), ["name", "tags", "inner"]),
        ((1, 0), ["a"]),
        # nested messages are counted as the .proto declares them: `tags`' map entry type is not one
        ((1, 1), ["b"]),
    ],
)
def test_message_indexes_name_the_message(indexes, names):
    text = """syntax = "proto3";
message First { int64 id = 1; }
message Second {
  string name = 1;
  message A { int32 a = 1; }
  map<string, string> tags = 2;
  message B { int32 b = 1; }
  B inner = 3;
}
"""
    assert [f.name for f in proto_schema(text, message=indexes).fields] == names


@pytest.mark.parametrize("indexes", [(2,), (1, 2), (-1,)])
def test_message_indexes_that_name_no_message_say_so(indexes):
    text = 'syntax = "proto3";\nmessage A { int32 a = 1; }\nmessage B { message C { int32 c = 1; } }\n'
    with pytest.raises(ProtobufError, match=rf"^t-value\.proto has no message at indexes \[{indexes[0]}"):
        proto_schema(text, message=indexes)


@pytest.mark.parametrize(
    "text, imports, reason",
    [
        ('syntax = "proto3";\nmessage M {\n  strin name = 1;\n}\n', {},
         r'^protoc: t-value\.proto:3:3: "strin" is not defined\.$'),
        ('syntax = "proto3";\nimport "common/money.proto";\nmessage M { int32 a = 1; }\n', {},
         r'^protoc: common/money\.proto: File not found\.; t-value\.proto:2:1: Import "common/money\.proto" was not'),
        ('syntax = "proto3";\nmessage M { int32 a = 1; int32 b = 1; }\n', {},
         r'^protoc: t-value\.proto:2:36: Field number 1 has already been used in "M" by field "a"\.'),
        ('syntax = "proto3";\nmessage M { int32 a = 1; }\n', {"../../escape.proto": MONEY},
         r"^'\.\./\.\./escape\.proto' is not a relative \.proto path"),
        ('syntax = "proto3";\nenum E { A = 0; }\n', {}, r"^t-value\.proto has no message at indexes \[0\]$"),
    ],
)  # fmt: skip
def test_a_file_protoc_refuses_fails_with_protocs_message_naming_the_subject(text, imports, reason):
    with pytest.raises(ProtobufError, match=reason):
        proto_schema(text, imports)


def test_a_file_that_reuses_messages_without_end_is_too_large_not_slow():
    levels = "".join(f"message L{i} {{ L{i + 1} a = 1; L{i + 1} b = 2; }}\n" for i in range(14))
    text = f'syntax = "proto3";\n{levels}message L14 {{ int32 leaf = 1; }}\n'  # 2^14 leaves
    with pytest.raises(SchemaTooLarge):
        compile_proto([("big.proto", text)], "big.proto").schema(max_fields=1_000)
    assert len(compile_proto([("big.proto", text)], "big.proto").schema((13,)).fields) == 2


# ------------------------------------------------------------------ Confluent's framing


@pytest.mark.parametrize(
    "data, expected",
    [
        (b"\x00PAYLOAD", ((0,), b"PAYLOAD")),  # the first message: one 0 byte
        (b"\x02\x02PAYLOAD", ((1,), b"PAYLOAD")),  # count 1, index 1 (zig-zag: 2, 2)
        (b"\x04\x00\x04", ((0, 2), b"")),  # count 2: 0, 2
        (b"\x02\x80\x01X", ((64,), b"X")),  # index 64 is zig-zag 128: two bytes
    ],
)
def test_message_indexes_are_read_as_confluents_serializers_write_them(data, expected):
    assert message_indexes(data) == expected


@pytest.mark.parametrize(
    "data, reason",
    [(b"", "cut short"), (b"\x02", "cut short"), (b"\x02\x80", "cut short"), (b"\x01", "claim -1 levels"),
     (b"\xca\x01", "claim 101 levels")],
)  # fmt: skip
def test_broken_message_indexes_are_refused(data, reason):
    with pytest.raises(ValueError, match=reason):
        message_indexes(data)


# ------------------------------------------------------------------ compatibility: numbers, not names

BASE = """syntax = "proto3";
message Order {
  int64 id = 1;
  string customer = 2;
  repeated Line lines = 3;
  oneof payment { string card = 4; int64 cash = 5; }
  Status status = 6;
  message Line { string sku = 1; }
  enum Status { NEW = 0; PAID = 1; }
}
"""


@pytest.mark.parametrize(
    "change, old, new, expected",
    [
        # the wire carries field numbers: a rename that keeps the number reads both ways
        ("rename", "string customer = 2;", "string buyer = 2;", [("buyer", FIELD_RENAMED, True, True)]),
        ("rename nested", "message Line { string sku = 1; }", "message Line { string code = 1; }",
         [("lines.code", FIELD_RENAMED, True, True)]),
        ("rename a oneof member", "string card = 4;", "string card_token = 4;",
         [("card_token", FIELD_RENAMED, True, True)]),
        # a new number is another field: old readers skip it, new ones default the one gone
        ("renumber under a new name", "string customer = 2;", "string buyer = 7;",
         [("customer", FIELD_REMOVED, True, True), ("buyer", FIELD_ADDED, True, True)]),
        ("drop a field", "string customer = 2;", "", [("customer", FIELD_REMOVED, True, True)]),
        ("add a field", "int64 id = 1;", "int64 id = 1; string region = 9;",
         [("region", FIELD_ADDED, True, True)]),
        ("add an enum value", "enum Status { NEW = 0; PAID = 1; }", "enum Status { NEW = 0; PAID = 1; VOID = 2; }",
         [("status", ENUM_SYMBOLS_ADDED, True, True)]),
    ],
)  # fmt: skip
def test_protobuf_schema_changes_are_judged_by_field_number(change, old, new, expected):
    assert BASE.count(old) == 1, change
    before, after = proto_schema(BASE), proto_schema(BASE.replace(old, new))
    assert [(c.path, c.kind, c.backward, c.forward) for c in diff_schemas(before, after)] == expected


def test_a_required_field_added_breaks_old_data():
    old = 'syntax = "proto2";\nmessage M { optional int32 a = 1; }\n'
    new = 'syntax = "proto2";\nmessage M { optional int32 a = 1; required string b = 2; }\n'
    (change,) = diff_schemas(proto_schema(old), proto_schema(new))
    assert (change.path, change.kind, change.backward, change.forward) == ("b", FIELD_ADDED, False, True)


# ------------------------------------------------------------------ through the registry and the broker

TIMESTAMP_PROTO = importlib.resources.files("grpc_tools") / "_proto/google/protobuf/timestamp.proto"


def register_order(registry, topic: str) -> int:
    """The order file under `<topic>-value`, with its references as Confluent's Java serializer
    registers them: each imported file under a subject named after it, google/protobuf's too."""
    registry.register("common/money.proto", MONEY, "PROTOBUF")
    registry.register("common/address.proto", ADDRESS, "PROTOBUF",
                      ({"name": "common/money.proto", "subject": "common/money.proto", "version": 1},))  # fmt: skip
    registry.register("google/protobuf/timestamp.proto", TIMESTAMP_PROTO.read_text(), "PROTOBUF")
    names = ("common/address.proto", "common/money.proto", "google/protobuf/timestamp.proto")
    refs = tuple({"name": n, "subject": n, "version": 1} for n in names)
    return registry.register(f"{topic}-value", ORDER, "PROTOBUF", refs)


@pytest.mark.servers
def test_protobuf_subjects_with_references_give_the_topics_key_and_value(kafka_broker, registry):
    t = unique("pborders")
    create_topics(kafka_broker, {t: 1})
    register_order(registry, t)
    registry.register(f"{t}-key", 'syntax = "proto3";\npackage shop;\nmessage OrderKey { int64 id = 1; }\n',
                      "PROTOBUF")  # fmt: skip
    desc = kafka_source(kafka_broker, schema_registry_url=registry.url).describe(t)  # no message needed
    key, *value = desc.schema.fields
    assert (key.name, key.type, key.nullable, key.is_key) == (
        KEY_FIELD, Struct((F("id", I64, False, 0, "int64", 1),)), False, True)  # fmt: skip
    assert tuple(value) == ORDER_FIELDS
    assert (desc.table.format, desc.table.version) == ("schema-registry", "key:1,value:1")
    fetched = [path for path, _ in registry.requests]
    assert "/subjects/common%2Fmoney.proto/versions/1" in fetched  # a reference's reference is followed


@pytest.mark.servers
def test_a_subjects_message_is_the_first_unless_its_newest_message_names_another(kafka_broker, registry):
    """Confluent's rule: a schema is its file's first message; its serializers frame each message with
    the indexes of its own type, and the newest one framed with the subject's schema says which."""
    t = unique("pbcustomers")
    create_topics(kafka_broker, {t: 1})
    text = ('syntax = "proto3";\npackage crm;\nmessage Address { string city = 1; }\n'
            "message Customer { string name = 1; Address home = 2; }\n")  # fmt: skip
    schema_id = registry.register(f"{t}-value", text, "PROTOBUF")
    source = kafka_source(kafka_broker, schema_registry_url=registry.url)
    assert [f.name for f in source.describe(t).schema.fields] == ["city"]  # no message: the first
    customer = GetMessageClass(compile_proto([("c.proto", text)], "c.proto").message((1,)))
    produce(kafka_broker, t, [(None, framed(schema_id, b"\x02\x02" + customer(name="ann").SerializeToString()))])
    assert [f.name for f in source.describe(t).schema.fields] == ["name", "home"]
    produce(kafka_broker, t, [(None, framed(99, b"\x00"))])  # the newest framed with another id has no say
    assert [f.name for f in source.describe(t).schema.fields] == ["name", "home"]


@pytest.mark.servers
def test_framed_protobuf_messages_are_read_as_the_type_they_name(kafka_broker, registry):
    """No subject named after the topic (RecordNameStrategy): the newest message's schema id and
    message indexes give the schema; its payload must decode as that message."""
    first, second, broken = unique("pbfirst"), unique("pbsecond"), unique("pbbroken")
    create_topics(kafka_broker, {first: 1, second: 1, broken: 1})
    text = ('syntax = "proto3";\npackage crm;\nmessage Address { string city = 1; }\n'
            "message Customer { string name = 1; repeated Address homes = 2; }\n")  # fmt: skip
    schema_id = registry.register("crm.Customer", text, "PROTOBUF")
    file = compile_proto([("c.proto", text)], "c.proto")
    address, customer = (GetMessageClass(file.message((i,))) for i in (0, 1))
    produce(kafka_broker, first, [(b"k", framed(schema_id, b"\x00" + address(city="Oslo").SerializeToString()))])
    produce(kafka_broker, second, [(None, framed(schema_id, b"\x02\x02" + customer(name="ann").SerializeToString()))])
    produce(kafka_broker, broken, [(None, framed(schema_id, b"\x00\x0a\x05ab"))])  # a string cut short
    source = kafka_source(kafka_broker, schema_registry_url=registry.url)
    assert [(f.name, f.type) for f in source.describe(first).schema.fields] == [(KEY_FIELD, STR), ("city", STR)]
    assert source.describe(second).schema.fields == (
        F("name", STR, False, "", "string", 1),
        F("homes", Array(Struct((F("city", STR, False, "", "string", 1),)), False), False, [], "repeated crm.Address",
          2),
    )  # fmt: skip
    with pytest.raises(ValueError, match=rf"^topic {broken}: .* does not decode with its PROTOBUF schema "
                                         rf"{schema_id}: not a crm.Address message"):  # fmt: skip
        source.describe(broken)


@pytest.mark.servers
def test_a_reference_the_registry_lacks_is_named(kafka_broker, registry):
    t = unique("pbdangling")
    create_topics(kafka_broker, {t: 1})
    registry.register(f"{t}-value", ORDER, "PROTOBUF",
                      ({"name": "common/address.proto", "subject": "gone.proto", "version": 3},))  # fmt: skip
    with pytest.raises(RegistryError, match="imports 'common/address.proto' from subject gone.proto version 3, which"):
        kafka_source(kafka_broker, schema_registry_url=registry.url).describe(t)


@pytest.mark.servers
@pytest.mark.dagster
def test_a_malformed_proto_fails_only_its_topic_and_the_scan_goes_on(kafka_broker, registry, tmp_path):
    """`lumos discover` then `lumos snapshot`: the topic whose subject protoc refuses is a failure named
    with the subject and protoc's message; the other topics are snapshotted."""
    good, bad = unique("pbgood"), unique("pbbad")
    create_topics(kafka_broker, {good: 1, bad: 1})
    register_order(registry, good)
    bad_id = registry.register(f"{bad}-value", 'syntax = "proto3";\nmessage M {\n  strin name = 1;\n}\n', "PROTOBUF")
    entry = {"type": "kafka", "name": "events", "bootstrap_servers": kafka_broker, "topics": [good, bad],
             "schema_registry_url": registry.url, "timeout": 5}  # fmt: skip
    (tmp_path / "lumos.yaml").write_text(json.dumps({"sources": [entry], "store": {"path": "store.db"},
                                                     "catalog": {"path": "lite.db"}}))  # fmt: skip
    config = ["-c", str(tmp_path / "lumos.yaml")]
    assert CliRunner().invoke(main, ["discover", *config]).exit_code == 0
    result = CliRunner().invoke(main, ["snapshot", *config, "--json"])
    out = json.loads(result.stdout)
    assert out["datasets"][good] and all(v == "1.0.0" for v in out["datasets"][good].values())
    assert all(v is None for v in out["datasets"][bad].values())  # no snapshot
    ((where, why),) = out["report"]["failures"]
    assert where.endswith(f"/{bad}")
    assert why == (f"cannot describe it: ValueError: topic {bad}: subject {bad}-value version 1 (schema {bad_id}): "
                   f'protoc: {bad}-value.proto:3:3: "strin" is not defined.')  # fmt: skip
