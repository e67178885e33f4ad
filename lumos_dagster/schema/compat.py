"""Type compatibility rules: may data written as one type be read as another?

`promotable(writer, reader)` is the union of the public rules:

* Avro schema resolution: int→long/float/double, long→float/double, float→double,
  string↔bytes;
* Iceberg evolution: int→long, float→double, decimal(P,S)→decimal(P',S) with P'≥P;
* Delta type widening: byte→short→int→long, float→double, integers→decimal with
  enough integer digits, decimal precision/scale widening that keeps integer digits,
  date→timestamp without time zone.

Plus the obvious ones for types those formats do not have (float16, unsigned ints).
Everything else is not promotable: `variant` among them, which Delta's type widening neither widens
to nor from (a string or JSON text column becomes a variant only by rewriting its data).
See docs/compatibility.md for the table.
"""

from __future__ import annotations

from lumos_dagster.floor.datatypes import DataType, Decimal, Primitive, Timestamp

_SIGNED = ("int8", "int16", "int32", "int64")
_UNSIGNED = ("uint8", "uint16", "uint32", "uint64")
_FLOATS = ("float16", "float32", "float64")
# integer digits an integer type needs as a decimal (Delta: byte 3, short 5, int 10, long 20)
_INT_DIGITS = {"int8": 3, "int16": 5, "int32": 10, "int64": 20, "uint8": 3, "uint16": 5, "uint32": 10, "uint64": 20}
_UNSIGNED_FITS = {"uint8": "int16", "uint16": "int32", "uint32": "int64"}


def _rank(kind: str, family: tuple[str, ...]) -> int:
    return family.index(kind) if kind in family else -1


def promotable(writer: DataType, reader: DataType) -> bool:
    """True when every value of `writer` can be read as `reader` by the rules above."""
    if writer == reader:
        return True
    if isinstance(writer, Primitive) and isinstance(reader, Primitive):
        w, r = writer.kind, reader.kind
        if w == "null":
            return True
        for family in (_SIGNED, _UNSIGNED, _FLOATS):
            if w in family and r in family:
                return _rank(w, family) < _rank(r, family)
        if w in _UNSIGNED and r in _SIGNED:
            return w in _UNSIGNED_FITS and _rank(_UNSIGNED_FITS[w], _SIGNED) <= _rank(r, _SIGNED)
        if (w in _SIGNED or w in _UNSIGNED) and r in ("float32", "float64"):
            return True  # Avro: int and long are readable as float and double
        if {w, r} == {"string", "binary"}:
            return True  # Avro: string and bytes are interchangeable
        return False
    if isinstance(writer, Primitive) and isinstance(reader, Decimal):
        digits = _INT_DIGITS.get(writer.kind)
        return digits is not None and reader.precision - reader.scale >= digits
    if isinstance(writer, Decimal) and isinstance(reader, Decimal):
        return reader.scale >= writer.scale and reader.precision - reader.scale >= writer.precision - writer.scale
    if writer == Primitive("date") and isinstance(reader, Timestamp):
        return reader.tz is None  # Delta: date → timestamp_ntz
    return False
