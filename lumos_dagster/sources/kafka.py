"""Kafka topics as datasets, through confluent-kafka (librdkafka).

Each topic is a dataset named after it, on DataHub's `kafka` platform; topics whose name starts
with `_` (`__consumer_offsets`, `_schemas`) are left out unless `internal: true`. Its schema is the
message value's fields, with the key as one more field, `__key` (marked as the key). Where a
schema registry is configured, the subjects `<topic>-value` and `<topic>-key` give them (Avro,
JSON Schema or Protobuf, their latest version: a new version is a schema change, versioned by the
same engine and policies as any other). What no subject describes is inferred from a sample of the
topic's newest messages: JSON, or Avro, JSON Schema and Protobuf framed as the registry's serializers
write them (magic byte 0, a 4-byte schema id; for Protobuf then the message indexes), the schema of
the newest message's id.

A Protobuf file may declare several messages. Which one a topic holds follows Confluent: its
serializers frame each message with the indexes of its type in the file, which its deserializer
follows; a schema without a message at hand is its file's first message (the registry's
`ProtobufSchema.name()`). So a sampled topic is the newest message's type; a subject whose file
declares one top-level message is that one; with several, the type the newest message framed with
that subject's schema id names (one sample read), else the first.

Change detection is a digest per topic of its partition count and its subjects' latest versions:
one metadata request per tick, and with a registry its subject listing and a versions request
per subject of a wanted topic. A sampled topic's shape is not in it (that costs a sample); its
next scheduled snapshot sees it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import time
from dataclasses import replace
from fnmatch import fnmatchcase
from io import BytesIO
from typing import Any, Callable

import fastavro

from lumos_dagster.floor.datatypes import DataType, Field, Schema, Struct
from lumos_dagster.floor.errors import ConfigError
from lumos_dagster.floor.masking import mask_secrets
from lumos_dagster.floor.model import DatasetRecord, OperationalStats, TableVersion
from lumos_dagster.floor.plugins import expand_secrets
from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.sources.base import Progress, TableDescription, TableSource
from lumos_dagster.sources.mongodb import infer_fields, merge_types, value_type
from lumos_dagster.sources.schema_registry import RegisteredSchema, SchemaRegistry, proto_file, to_schema

KEY_FIELD = "__key"
FORMAT = "topic"
MAGIC = 0
log = logging.getLogger(__name__)


class KafkaSource(TableSource):
    def __init__(self, config, where: str = "source"):
        """`where` names the entry in errors, e.g. `lumos.yaml: sources[0]`."""
        super().__init__(config)
        self.where = where
        self.root = f"kafka://{config.bootstrap_servers}"

    # --- connecting

    def _client_config(self) -> dict[str, Any]:
        c = self.config
        out: dict[str, Any] = {
            "bootstrap.servers": c.bootstrap_servers,
            "security.protocol": c.security_protocol,
            "client.id": "lumos",
            "socket.timeout.ms": int(c.timeout * 1000),
            "logger": log,  # librdkafka's own lines go to logging, not stderr
        }
        if c.sasl_mechanism:
            out["sasl.mechanism"] = c.sasl_mechanism
        if c.sasl_username is not None:
            out["sasl.username"] = c.sasl_username
        if c.sasl_password is not None:
            out["sasl.password"] = expand_secrets(c.sasl_password, f"{self.where}.sasl_password")
        out.update({k: expand_secrets(v, f"{self.where}.properties.{k}") for k, v in c.properties.items()})
        return out

    def registry(self) -> SchemaRegistry | None:
        """A client of the schema registry, for one call of the source: it holds the expanded password,
        which the source (kept by a code server for its lifetime) must not."""
        c = self.config
        if c.schema_registry_url is None:
            return None
        auth = None
        if c.schema_registry_user is not None:
            password = c.schema_registry_password or ""
            auth = (c.schema_registry_user, expand_secrets(password, f"{self.where}.schema_registry_password"))
        url = expand_secrets(c.schema_registry_url, f"{self.where}.schema_registry_url")
        return SchemaRegistry(url, auth, c.timeout)

    def _metadata(self, topic: str | None = None):
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        admin = AdminClient(self._client_config())
        try:
            return admin.list_topics(topic=topic, timeout=self.config.timeout)
        except KafkaException as exc:
            reason = exc.args[0].str() if exc.args and hasattr(exc.args[0], "str") else str(exc)
            where = f"{self.config.bootstrap_servers} within {self.config.timeout:g}s"
            raise ConnectionError(f"cannot reach the Kafka brokers {where}: {reason}") from None

    def _wanted(self, topic: str) -> bool:
        if topic.startswith("_") and not self.config.internal:
            return False
        return any(fnmatchcase(topic, p) for p in self.config.topics) and not any(
            fnmatchcase(topic, p) for p in self.config.exclude
        )

    def _topics(self, report: ScanReport) -> dict[str, int] | None:
        """Wanted topic → partition count; None (the reason in the report) when the brokers cannot be read."""
        try:
            metadata = self._metadata()
        except ConfigError as exc:
            report.fail(f"source {self.name}", str(exc))
            return None
        except ConnectionError as exc:
            report.fail(f"source {self.name}", mask_secrets(str(exc)))
            return None
        return {t: len(m.partitions) for t, m in sorted(metadata.topics.items()) if m.error is None and self._wanted(t)}

    def _failed(self, report: ScanReport, exc: Exception) -> None:
        report.fail(f"source {self.name}", mask_secrets(str(exc)))

    # --- the TableSource contract

    def discover(self, report: ScanReport, progress: Progress | None = None) -> list[DatasetRecord] | None:
        topics = self._topics(report)
        if topics is None:
            return None
        records = [
            DatasetRecord(name=t, platform=self.platform, source=self.name, location=t, format=FORMAT) for t in topics
        ]
        report.datasets_found += len(records)
        return records

    def describe(self, location: str) -> TableDescription | None:
        """The topic's schema now (registry subjects, else a sample) and its message count; None when gone.
        Raises, naming the topic, when its messages cannot be decoded."""
        metadata = self._metadata(location).topics.get(location)
        if metadata is None or metadata.error is not None or not metadata.partitions:
            return None
        registry = self.registry()
        subjects: dict[str, RegisteredSchema | None] = {}
        if registry is not None:
            for part in ("key", "value"):
                subjects[part] = registry.version(f"{location}-{part}")
        partitions = sorted(metadata.partitions)
        sample = functools.cache(lambda: _Sample(self, location, partitions, registry))  # when a subject is missing
        value_subject, key_subject = subjects.get("value"), subjects.get("key")
        value = _subject_schema(location, "value", value_subject, sample) if value_subject else sample().value_schema()
        if key_subject:
            key: Field | None = _key_field(_subject_schema(location, "key", key_subject, sample), _record(key_subject))
        else:
            key = sample().key_field()
        fields = ((key,) if key else ()) + tuple(f for f in value.fields if f.name != KEY_FIELD)
        seen = {p: v.version for p, v in subjects.items() if v is not None}
        return TableDescription(
            schema=replace(value, fields=fields),
            stats=OperationalStats(row_count=_message_count(self, location, sorted(metadata.partitions))),
            table=TableVersion("schema-registry", ",".join(f"{p}:{v}" for p, v in seen.items()), None)
            if seen
            else None,
        )

    def fingerprints(self, report: ScanReport) -> dict[str, tuple[str, str]] | None:
        """Topic → (dataset name, digest of its partition count and its subjects' latest versions)."""
        topics = self._topics(report)
        if topics is None:
            return None
        latest: dict[str, int] = {}
        try:
            registry = self.registry()  # a ${VAR} not set fails this source, as the brokers' do
            if registry is not None:
                for subject in registry.subjects():
                    topic, _, part = subject.rpartition("-")
                    if topic in topics and part in ("key", "value"):
                        latest[subject] = max(registry.versions(subject), default=0)
        except Exception as exc:
            self._failed(report, exc)
            return None
        out = {}
        for topic, partitions in topics.items():
            state = repr((partitions, latest.get(f"{topic}-key"), latest.get(f"{topic}-value")))
            out[topic] = (topic, hashlib.sha1(state.encode()).hexdigest())
        return out


def _subject_schema(topic: str, part: str, registered: RegisteredSchema, sample: Callable[[], _Sample]) -> Schema:
    """The schema a subject gives the topic's key or value; ValueError naming the topic and subject
    when it cannot be read."""
    try:
        if registered.schema_type == "PROTOBUF" and len(proto_file(registered).proto.message_type) > 1:
            registered = replace(registered, message=sample().message_indexes(part, registered.id) or (0,))
        return to_schema(registered)
    except ValueError as exc:  # protoc's message, a message the indexes do not name, too large
        where = f"subject {registered.subject} version {registered.version} (schema {registered.id})"
        raise ValueError(f"topic {topic}: {where}: {exc}") from None


def _record(registered: RegisteredSchema) -> bool:
    """Whether a registered schema is a record (a Protobuf message always is)."""
    if registered.schema_type == "PROTOBUF":
        return True
    native = json.loads(registered.text)
    return isinstance(native, dict) and (native.get("type") in ("record", "object") or "properties" in native)


def _key_field(schema: Schema, record: bool) -> Field:
    """The key as one field: a record key is a struct of its fields, any other its one type."""
    if record or len(schema.fields) != 1:
        dtype: DataType = Struct(schema.fields, schema.name, schema.aliases)
        nullable = False
    else:
        dtype, nullable = schema.fields[0].type, schema.fields[0].nullable
    return Field(name=KEY_FIELD, type=dtype, nullable=nullable, is_key=True, description="the message key")


def _message_count(source: KafkaSource, topic: str, partitions: list[int]) -> int | None:
    """Messages the topic holds (high minus low watermark, summed): exact but for compacted topics."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**source._client_config(), "group.id": "lumos", "enable.auto.commit": False})
    try:
        total = 0
        for p in partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=source.config.timeout)
            total += high - low
        return total
    finally:
        consumer.close()


class _Sample:
    """The newest `sample_size` messages of a topic (spread over its partitions), decoded."""

    def __init__(self, source: KafkaSource, topic: str, partitions: list[int], registry: SchemaRegistry | None):
        self.source, self.topic, self.registry = source, topic, registry
        self.messages = self._read(partitions)

    def _read(self, partitions: list[int]) -> list:
        from confluent_kafka import Consumer, KafkaError, TopicPartition

        size, timeout = self.source.config.sample_size, self.source.config.timeout
        per_partition = -(-size // len(partitions))
        consumer = Consumer(
            {**self.source._client_config(), "group.id": "lumos", "enable.auto.commit": False,
             "enable.partition.eof": True}
        )  # fmt: skip
        try:
            assigned = []
            for p in partitions:
                low, high = consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=timeout)
                if high > low:
                    assigned.append(TopicPartition(self.topic, p, max(low, high - per_partition)))
            if not assigned:
                return []
            consumer.assign(assigned)
            out: list = []
            done: set[int | None] = set()  # partitions at their end
            deadline = time.monotonic() + timeout
            while len(done) < len(assigned) and len(out) < size and time.monotonic() < deadline:
                message = consumer.poll(min(1.0, max(0.0, deadline - time.monotonic())))
                if message is None:
                    continue
                if (error := message.error()) is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        done.add(message.partition())
                        continue
                    raise ConnectionError(f"topic {self.topic}: {error.str()}")
                out.append(message)
            return sorted(out, key=lambda m: m.timestamp()[1])
        finally:
            consumer.close()

    def _decode(self, data: bytes, message, part: str) -> tuple[Any, RegisteredSchema | None]:
        """The payload as a value (JSON, Avro) and the registered schema it was framed with, if any."""
        where = f"topic {self.topic}: the {part} at partition {message.partition()} offset {message.offset()}"
        if len(data) >= 5 and data[0] == MAGIC:
            schema_id = int.from_bytes(data[1:5], "big")
            registry = self.registry
            registered = registry.by_id(schema_id) if registry is not None else None
            if registered is not None:
                return self._framed(data, registered, where)
            if part == "value":
                why = f"the schema registry {registry.shown} has none" if registry else "no schema_registry_url is set"
                raise ValueError(f"{where} is framed with schema id {schema_id}, but {why}")
            # a key no registered schema frames is a plain one: a big-endian number starts with 0 too
        try:
            return json.loads(data), None
        except ValueError:
            if part == "key":  # plain keys (ids, names) are common: their type is text or bytes
                try:
                    text = data.decode()
                except UnicodeDecodeError:
                    return data, None
                return (text if text.isprintable() else data), None
            raise ValueError(f"{where} is neither JSON nor framed by a schema registry") from None

    @staticmethod
    def _framed(data: bytes, registered: RegisteredSchema, where: str) -> tuple[Any, RegisteredSchema]:
        try:
            if registered.schema_type == "AVRO":
                parsed = fastavro.parse_schema(json.loads(registered.text))
                return fastavro.schemaless_reader(BytesIO(data[5:]), parsed, None), registered
            if registered.schema_type == "JSON":
                return json.loads(data[5:]), registered
            if registered.schema_type == "PROTOBUF":
                indexes, payload = message_indexes(data[5:])
                registered = replace(registered, message=indexes)
                return proto_file(registered).parse(indexes, payload), registered
        except Exception as exc:
            raise ValueError(
                f"{where} does not decode with its {registered.schema_type} schema {registered.id}: {exc}"
            ) from None
        raise ValueError(
            f"{where}: schema {registered.id} is {registered.schema_type}; Lumos reads Avro, JSON and Protobuf"
        )

    def message_indexes(self, part: str, schema_id: int) -> tuple[int, ...] | None:
        """The Protobuf message indexes the newest key or value framed with that schema id carries."""
        framing = bytes([MAGIC]) + schema_id.to_bytes(4, "big")
        for m in reversed(self.messages):
            data = m.value() if part == "value" else m.key()
            if data is not None and data.startswith(framing):
                try:
                    return message_indexes(data[5:])[0]
                except ValueError:
                    return None  # not framed as Confluent's Protobuf serializers frame: no say
        return None

    def _decoded(self, part: str) -> list[tuple[Any, RegisteredSchema | None]]:
        out = []
        for m in self.messages:
            data = m.value() if part == "value" else m.key()
            if data is not None:
                out.append(self._decode(data, m, part))
        return out

    def value_schema(self) -> Schema:
        decoded = self._decoded("value")
        if decoded and decoded[-1][1] is not None:  # framed: the newest message's registered schema
            return to_schema(decoded[-1][1])
        documents = [v for v, _ in decoded]
        if documents and all(isinstance(d, dict) for d in documents):
            return Schema(infer_fields(documents))
        if documents:
            return Schema((Field("value", merge_types([value_type(d) for d in documents]), nullable=False),))
        return Schema()

    def key_field(self) -> Field | None:
        decoded = self._decoded("key")
        if not decoded:
            return None
        if decoded[-1][1] is not None:
            registered = decoded[-1][1]
            return _key_field(to_schema(registered), _record(registered))
        keys = [k for k, _ in decoded]
        if all(isinstance(k, dict) for k in keys):
            return _key_field(Schema(infer_fields(keys)), True)
        dtype = merge_types([value_type(k) for k in keys])
        return Field(KEY_FIELD, dtype, nullable=False, is_key=True, description="the message key")


def message_indexes(data: bytes) -> tuple[tuple[int, ...], bytes]:
    """Confluent's Protobuf framing after the schema id: the indexes of the message's type in its file
    (a count, then each index, zig-zag varints; a count of 0, one 0 byte, is the first message) and
    the payload after them. ValueError when they are cut short or implausible."""
    at = 0

    def varint() -> int:
        nonlocal at
        value = shift = 0
        while True:
            if at >= len(data) or shift > 63:
                raise ValueError("its Protobuf message indexes are cut short")
            byte = data[at]
            at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return (value >> 1) ^ -(value & 1)

    count = varint()
    if not 0 <= count <= 100:  # nesting as deep as a file can hold; a count past it is not framing
        raise ValueError(f"its Protobuf message indexes claim {count} levels")
    indexes = tuple(varint() for _ in range(count)) or (0,)
    return indexes, data[at:]
