"""Protobuf schemas (.proto text) as Lumos schemas: what a schema registry's Protobuf subjects hold.

The text is compiled by protoc itself, the compiler the `grpcio-tools` wheel bundles (run as a
child process, so its error message is caught whole and a crash cannot take the scan down), into
a FileDescriptorSet read with the `protobuf` package's descriptors. A file that does not compile
fails with protoc's own message.

The mapping, field by field:

* a message is a struct of its fields, in declaration order; each keeps its field number as its
  `field_id`, so a rename that keeps the number is found as one by the diff (the wire carries
  numbers, not names); a message that contains itself is `unknown` where it recurs;
* `repeated T` is an array of T, `map<K, V>` a map; neither is nullable (absent is empty);
* presence decides nullability: a message field, a proto3 `optional` one, a `oneof` member and a
  proto2 `optional` one are nullable (default null, or proto2's declared default); a proto3 scalar
  without `optional` is not nullable, its zero value the default; proto2 `required` has none.
  Every non-required field thus has a default: a reader meets old data without it, as protobuf
  readers do;
* a `oneof`'s members stay fields of the message, each nullable (at most one is set); the native
  type names the oneof, e.g. `string (oneof payment)`;
* an enum is an enum of its value names, in declaration order, the first its default (what a
  proto3 reader makes of a number it does not know is kept, not refused);
* well-known types: `Timestamp` is a timestamp (ns, UTC), `Duration` an interval, the wrappers
  (`Int64Value`…) their scalar, nullable; `Struct`, `Value` and `ListValue` are `json`; `Any` is
  what it is on the wire, a struct of `type_url` and `value` bytes (what it packs is known per
  message only); `Empty`, `FieldMask` are plain messages;
* the comment before a field (else after it, on its line) is its description.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Iterable, Sequence

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message
from google.protobuf.message_factory import GetMessageClass

from lumos_dagster.floor.datatypes import (
    NO_DEFAULT,
    Array,
    DataType,
    Enum,
    Field,
    FieldBudget,
    Map,
    Primitive,
    Schema,
    Struct,
    Timestamp,
)
from lumos_dagster.floor.limits import MAX_FIELDS

#: seconds protoc may take on one schema; it takes milliseconds on real ones
PROTOC_TIMEOUT = 60.0

_T = FieldDescriptor
_SCALARS = {
    _T.TYPE_DOUBLE: "float64", _T.TYPE_FLOAT: "float32", _T.TYPE_BOOL: "boolean",
    _T.TYPE_STRING: "string", _T.TYPE_BYTES: "binary",
    _T.TYPE_INT32: "int32", _T.TYPE_SINT32: "int32", _T.TYPE_SFIXED32: "int32",
    _T.TYPE_INT64: "int64", _T.TYPE_SINT64: "int64", _T.TYPE_SFIXED64: "int64",
    _T.TYPE_UINT32: "uint32", _T.TYPE_FIXED32: "uint32",
    _T.TYPE_UINT64: "uint64", _T.TYPE_FIXED64: "uint64",
}  # fmt: skip
_JSON = Primitive("json")
_WELL_KNOWN: dict[str, DataType] = {
    "google.protobuf.Timestamp": Timestamp("ns", "UTC"),
    "google.protobuf.Duration": Primitive("interval"),
    "google.protobuf.Struct": _JSON,
    "google.protobuf.Value": _JSON,
    "google.protobuf.ListValue": _JSON,
    "google.protobuf.DoubleValue": Primitive("float64"),
    "google.protobuf.FloatValue": Primitive("float32"),
    "google.protobuf.Int64Value": Primitive("int64"),
    "google.protobuf.UInt64Value": Primitive("uint64"),
    "google.protobuf.Int32Value": Primitive("int32"),
    "google.protobuf.UInt32Value": Primitive("uint32"),
    "google.protobuf.BoolValue": Primitive("boolean"),
    "google.protobuf.StringValue": Primitive("string"),
    "google.protobuf.BytesValue": Primitive("binary"),
}
# DescriptorProto paths (descriptor.proto's field numbers) of what SourceCodeInfo locates
_MESSAGE_TYPE, _FIELD, _NESTED_TYPE = 4, 2, 3


class ProtobufError(ValueError):
    """A .proto file that protoc refuses (its message), or a message it does not declare."""


@dataclass(frozen=True, eq=False)
class ProtoFile:
    """A compiled .proto file, with every file it imports."""

    name: str
    pool: descriptor_pool.DescriptorPool
    proto: descriptor_pb2.FileDescriptorProto
    comments: dict[str, str]  # field full name → its comment
    optional: frozenset[str]  # full names of proto3 `optional` fields (their oneof is protoc's, not the file's)

    def message(self, indexes: Sequence[int] = (0,)) -> Descriptor:
        """The message that Confluent's message indexes name (the first top-level one by default):
        positions among the messages the file declares, as the registry's reference implementation
        counts them in the .proto text, where the entry types protoc makes for `map` fields are not."""
        if not indexes or not 0 <= indexes[0] < len(self.proto.message_type):
            raise ProtobufError(f"{self.name} has no message at indexes {list(indexes)}")
        package = f"{self.proto.package}." if self.proto.package else ""
        found = self.pool.FindMessageTypeByName(package + self.proto.message_type[indexes[0]].name)
        for i in indexes[1:]:
            declared = [m for m in found.nested_types if not m.GetOptions().map_entry]
            if not 0 <= i < len(declared):
                raise ProtobufError(f"{self.name} has no message at indexes {list(indexes)}")
            found = declared[i]
        return found

    def schema(self, indexes: Sequence[int] = (0,), max_fields: int = MAX_FIELDS) -> Schema:
        """The message's fields as a Lumos schema; SchemaTooLarge past `max_fields` (`FieldBudget`)."""
        message = self.message(indexes)
        conv = _Converter(self, FieldBudget(max_fields))
        conv.expanding.add(message.full_name)
        return Schema(tuple(conv.field(f) for f in message.fields))

    def parse(self, indexes: Sequence[int], payload: bytes) -> Message:
        """The payload decoded as that message; ProtobufError when it is not one."""
        try:
            return GetMessageClass(self.message(indexes)).FromString(payload)
        except DecodeError as exc:
            raise ProtobufError(f"not a {self.message(indexes).full_name} message: {exc}") from None


def compile_proto(files: Iterable[tuple[str, str]], main: str) -> ProtoFile:
    """Compile `main` with protoc, among `files` (import name → text, `main` one of them); the
    well-known google/protobuf/*.proto come with protoc when no file of that name is given.
    ProtobufError with protoc's message when it does not compile."""
    return _compile(tuple(sorted(files)), main)


@functools.lru_cache(maxsize=128)  # a subject's text compiles once per process, however many messages use it
def _compile(files: tuple[tuple[str, str], ...], main: str) -> ProtoFile:
    if importlib.util.find_spec("grpc_tools") is None:
        raise ProtobufError("reading Protobuf needs protoc from grpcio-tools: pip install 'lumos[kafka]'")
    with tempfile.TemporaryDirectory(prefix="lumos-protoc-") as tmp:
        root = Path(tmp, "src")
        root.mkdir()
        for name, text in files:
            path = root.joinpath(*_relative(name).parts)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        out = Path(tmp, "descriptors.pb")
        # `python -m grpc_tools.protoc` puts the bundled well-known types on the import path, after ours
        # run from the source root, so that its messages name files as the imports do, not the temporary path
        command = [sys.executable, "-m", "grpc_tools.protoc", "--proto_path=.", "--include_imports",
                   "--include_source_info", f"--descriptor_set_out={out}", main]  # fmt: skip
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=PROTOC_TIMEOUT, cwd=root)
        except subprocess.TimeoutExpired:
            raise ProtobufError(f"protoc did not compile {main} within {PROTOC_TIMEOUT:g}s") from None
        if done.returncode != 0:
            why = "; ".join(line for line in done.stderr.strip().splitlines() if line.strip())
            raise ProtobufError(f"protoc: {why or f'exited with {done.returncode}'}")
        described = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for file in described.file:  # protoc lists each file after those it imports
        pool.Add(file)
    proto = next(f for f in described.file if f.name == main)
    comments, optional = _source_facts(described.file)
    return ProtoFile(main, pool, proto, comments, frozenset(optional))


def _relative(name: str) -> PurePosixPath:
    """An import name as a path below the source root: a registry's reference names cannot leave it."""
    path = PurePosixPath(name)
    if not name or "\\" in name or "\0" in name or path.is_absolute() or ".." in path.parts:
        raise ProtobufError(f"{name!r} is not a relative .proto path, as an import names one")
    return path


def _source_facts(files: Iterable[descriptor_pb2.FileDescriptorProto]) -> tuple[dict[str, str], set[str]]:
    """Field full name → its comment; and the proto3 `optional` fields, which only the protos mark."""
    comments: dict[str, str] = {}
    optional: set[str] = set()
    for file in files:
        paths: dict[tuple[int, ...], str] = {}
        todo: list[tuple[tuple[int, ...], str, Any]] = [
            ((_MESSAGE_TYPE, i), file.package, m) for i, m in enumerate(file.message_type)
        ]
        while todo:
            path, scope, message = todo.pop()
            name = f"{scope}.{message.name}" if scope else message.name
            for i, f in enumerate(message.field):
                paths[(*path, _FIELD, i)] = f"{name}.{f.name}"
                if f.proto3_optional:
                    optional.add(f"{name}.{f.name}")
            todo += [((*path, _NESTED_TYPE, i), name, m) for i, m in enumerate(message.nested_type)]
        for location in file.source_code_info.location:
            field = paths.get(tuple(location.path))
            text = (location.leading_comments or location.trailing_comments).strip()
            if field and text:
                comments[field] = "\n".join(line.strip() for line in text.splitlines())
    return comments, optional


def _is_map(f: FieldDescriptor) -> bool:
    return f.is_repeated and f.message_type is not None and f.message_type.GetOptions().map_entry


def _native(f: FieldDescriptor) -> str:
    """The field's type as a .proto spells it."""
    if f.message_type is not None:
        return f.message_type.full_name
    if f.enum_type is not None:
        return f.enum_type.full_name
    return descriptor_pb2.FieldDescriptorProto.Type.Name(f.type).removeprefix("TYPE_").lower()


def _json_default(f: FieldDescriptor) -> Any:
    """The field's default value as JSON writes it (protobuf's JSON mapping for the odd ones)."""
    value = f.default_value
    if f.enum_type is not None:
        found = f.enum_type.values_by_number.get(value)
        return found.name if found is not None else f.enum_type.values[0].name
    if isinstance(value, bytes):
        return value.decode("latin-1")  # as Avro spells a bytes default
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


class _Converter:
    """Each message is expanded at each use, so the budget stops a file that reuses one without limit."""

    def __init__(self, file: ProtoFile, budget: FieldBudget) -> None:
        self.file = file
        self.budget = budget
        self.expanding: set[str] = set()

    def type_of(self, f: FieldDescriptor) -> DataType:
        """The type of one of the field's values (an element, for a repeated field)."""
        self.budget.spend()
        message = f.message_type
        if message is not None:
            if message.full_name in _WELL_KNOWN:
                return _WELL_KNOWN[message.full_name]
            if message.full_name in self.expanding:
                return Primitive("unknown")
            self.expanding.add(message.full_name)
            try:
                return Struct(tuple(self.field(inner) for inner in message.fields))
            finally:
                self.expanding.discard(message.full_name)
        if f.enum_type is not None:
            symbols = tuple(v.name for v in f.enum_type.values)
            self.budget.spend(len(symbols))
            return Enum(symbols, f.enum_type.full_name, symbols[0])
        return Primitive(_SCALARS[f.type])

    def field(self, f: FieldDescriptor) -> Field:
        native = _native(f)
        nullable, default = False, NO_DEFAULT
        if _is_map(f):
            self.budget.spend()
            key, value = f.message_type.fields_by_name["key"], f.message_type.fields_by_name["value"]
            dtype: DataType = Map(self.type_of(key), self.type_of(value), value_nullable=False)
            native, default = f"map<{_native(key)}, {_native(value)}>", {}
        elif f.is_repeated:
            self.budget.spend()
            dtype, native, default = Array(self.type_of(f), element_nullable=False), f"repeated {native}", []
        else:
            dtype = self.type_of(f)
            oneof = f.containing_oneof
            if f.full_name in self.file.optional:
                native = f"optional {native}"
            elif oneof is not None:
                native = f"{native} (oneof {oneof.name})"
            if f.is_required:  # proto2's `required` (an edition's LEGACY_REQUIRED): never null, no default
                nullable, default = False, NO_DEFAULT
            elif f.has_presence:
                nullable, default = True, _json_default(f) if f.has_default_value else None
            else:
                default = _json_default(f)  # proto3's zero value
        return Field(
            name=f.name,
            type=dtype,
            nullable=nullable,
            default=default,
            description=self.file.comments.get(f.full_name),
            native_type=native,
            field_id=f.number,
        )
