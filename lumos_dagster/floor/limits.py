"""What Lumos keeps at most, each limit declared here once. They are checked where data enters
(the readers, a run's observations, discovery, the portable format, the API) so that what is kept
can always be stored, exported, served and sent to DataHub; docs/reliability.md lists them with
their tests."""

#: a dataset's name, and its URN, as the store keeps them (`varchar(1024)` on PostgreSQL): a longer
#: one (a folder 200 levels deep) is skipped by discovery, with its reason
MAX_NAME = 1024
#: a field's own name (one part of its path): ten times the widest real column names (BigQuery allows
#: 300, Snowflake 255, PostgreSQL 63). A 5 MB CSV header cell is no name, and the API would serve it whole
MAX_FIELD_NAME = 1024
#: how many fields and nested types a schema may expand to: every field's type and each element, key,
#: value or branch within it counts (a flat schema counts its fields), an enum's symbols count, and a
#: reused named type (Avro) or `$ref` (JSON Schema) counts at each use. Ten times the widest real
#: tables; it bounds the work a hostile schema costs, as a 2 KB Avro schema that uses a record ten
#: times per level expands to millions of fields.
MAX_FIELDS = 100_000
#: how deep types may nest (structs, arrays, maps, unions within each other). Real schemas stay far
#: below it (BigQuery allows 15 levels, pyarrow's Parquet reader under 100); the readers refuse
#: deeper files, every step of a portable document (export, validate, import, compare) handles this
#: depth, and `lumos validate` refuses deeper.
MAX_NESTING = 64
#: the largest count (rows, bytes) kept: a signed 64-bit integer, as DataHub's and Avro's `long` and the
#: portable format's integers are. Two Parquet footers claiming 2^62 rows each sum past it; such a count
#: is unknown, said so, rather than kept
MAX_COUNT = 2**63 - 1
