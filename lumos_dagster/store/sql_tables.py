"""The snapshot store's tables (SQLAlchemy Core): registry, snapshots and their documents, outbox,
catalog state, file state, releases and what code says about datasets.

A capture's document is kept in two parts (schema version 3): its body, everything but what differs
between captures of the same content, once per distinct body in `lumos_documents`; and the
capture's own fields (partition, capture time, the data's age) in its `lumos_snapshots` row, with
the body's id. Rows written before keep their whole document inline (`document`, `body` null); the
reads below give back the same document either way (`stored_document`)."""

from typing import Any, Callable

import sqlalchemy as sa
from sqlalchemy.ext.compiler import compiles

from lumos_dagster.floor.masking import mask_secrets, shown_url
from lumos_dagster.store.documents import DOCUMENT_MODES, assemble, packed

metadata = sa.MetaData()

#: bumped when the tables change; an older store is brought up to date by MIGRATIONS, a newer one is refused
SCHEMA_VERSION = 6

meta_table = sa.Table(
    "lumos_meta",
    metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.String(256), nullable=False),
)

datasets_table = sa.Table(
    "lumos_datasets",
    metadata,
    sa.Column("urn", sa.String(1024), primary_key=True),
    sa.Column("name", sa.String(1024), nullable=False),
    sa.Column("platform", sa.String(128), nullable=False),
    sa.Column("source", sa.String(256), nullable=False),
    sa.Column("location", sa.Text, nullable=False),
    sa.Column("format", sa.String(32)),
    sa.Column("domain", sa.String(256)),
    sa.Column("info", sa.Text, nullable=False),  # JSON: partitioning, counts
    sa.Column("first_seen", sa.DateTime(timezone=True), nullable=False),
    sa.Column("last_seen", sa.DateTime(timezone=True), nullable=False),
    sa.Column("removed_at", sa.DateTime(timezone=True)),  # vanished from its source: soft-deleted
)

snapshots_table = sa.Table(
    "lumos_snapshots",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("urn", sa.String(1024), nullable=False),
    sa.Column("partition_key", sa.String(64), nullable=False),  # '' when unpartitioned
    sa.Column("captured_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("version", sa.String(64)),
    sa.Column("fingerprint", sa.String(64), nullable=False),
    # an unreadable capture is history, but never what the next one is versioned against
    sa.Column("readable", sa.Boolean, nullable=False),
    # the whole document, as rows written before schema version 3 keep it; '' when `body` is set
    sa.Column("document", sa.Text, nullable=False),
    # lumos_documents.id of the document's body; null: the document is inline (an older row)
    sa.Column("body", sa.Integer),
    # JSON: the capture's own fields its columns do not give back as they were (the data's age;
    # a capture time not in UTC), the age alone as its bare number; null when there are none
    sa.Column("capture", sa.Text),
    # files the capture could not read: a partition whose latest capture has some stays in `lumos summary`
    # until it is read whole (null: stored before schema version 4)
    sa.Column("unread", sa.Integer),
    sa.Index("ix_lumos_snapshots_urn_partition", "urn", "partition_key", "id"),
)
#: the captures that could not read some files: few, found without reading a dataset's whole history
UNREAD_INDEX = sa.Index(
    "ix_lumos_snapshots_unread",
    snapshots_table.c.urn,
    postgresql_where=snapshots_table.c.unread > 0,
    sqlite_where=snapshots_table.c.unread > 0,
)

documents_table = sa.Table(
    "lumos_documents",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("hash", sa.String(64), nullable=False),  # sha256 of `body`: one row per distinct body
    sa.Column("body", sa.Text, nullable=False),  # JSON: a document without its capture's own fields
    sa.Index("ux_lumos_documents_hash", "hash", unique=True),
)

outbox_table = sa.Table(
    "lumos_outbox",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("snapshot_id", sa.Integer, sa.ForeignKey("lumos_snapshots.id"), nullable=False),
    sa.Column("catalog", sa.String(256), nullable=False),
    sa.Column("urn", sa.String(1024), nullable=False),
    sa.Column("partition_key", sa.String(64), nullable=False),
    # pending | delivered | unchanged | superseded | quarantined (the catalog cannot take it: kept, skipped)
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False, default=0),
    sa.Column("last_error", sa.Text),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("delivered_at", sa.DateTime(timezone=True)),
    # a delivery's lease on a pending entry: no other delivery sends it until the lease ends
    sa.Column("claimed_by", sa.String(32)),
    sa.Column("claimed_until", sa.DateTime(timezone=True)),
    sa.Index("ix_lumos_outbox_pending", "catalog", "status"),
)


catalog_state_table = sa.Table(
    "lumos_catalog_state",
    metadata,
    sa.Column("catalog", sa.String(256), primary_key=True),
    sa.Column("urn", sa.String(1024), primary_key=True),
    sa.Column("partition_key", sa.String(64), nullable=False),  # newest partition the catalog shows
    sa.Column("content_hash", sa.String(64), nullable=False),  # of what was last sent: same again = no write
    sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=False),
    # JSON: what Lumos added there to the dataset's shared aspects, and the entity (a catalog's `claims`):
    # what it may remove later, and where it was. Null: delivered before Lumos kept it
    sa.Column("claims", sa.Text),
)

file_state_table = sa.Table(
    "lumos_file_state",
    metadata,
    sa.Column("source", sa.String(256), primary_key=True),
    sa.Column("generation", sa.Integer, primary_key=True),
    sa.Column("path", sa.String(2048), primary_key=True),
    sa.Column("fingerprint", sa.String(128), nullable=False),
    sa.Column("dataset", sa.String(1024)),
    sa.Column("partition", sa.String(64)),  # the file's time-partition date, if any
)

releases_table = sa.Table(
    "lumos_releases",
    metadata,
    sa.Column("name", sa.String(128), primary_key=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("versions", sa.Text, nullable=False),  # JSON: dataset name → schema version
)

code_table = sa.Table(
    "lumos_code",
    metadata,
    sa.Column("dataset", sa.String(1024), primary_key=True),
    sa.Column("doc", sa.Text, nullable=False),  # JSON: what SQL files and dbt models say (lineage.resolve)
)


class _UtcText(sa.sql.functions.FunctionElement):
    """A capture time as text, in UTC and without its zone: `YYYY-MM-DD HH:MM:SS.ffffff`."""

    type = sa.Text()
    inherit_cache = True
    name = "lumos_utc_text"


@compiles(_UtcText)
def _utc_text(element, compiler, **kw) -> str:  # SQLite: the text SQLAlchemy stored, the time as given (UTC)
    return f"CAST({compiler.process(element.clauses, **kw)} AS TEXT)"


@compiles(_UtcText, "postgresql")
def _utc_text_pg(element, compiler, **kw) -> str:  # whatever the session's time zone
    return f"to_char(({compiler.process(element.clauses, **kw)}) AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')"


class StoredDocument(sa.types.TypeDecorator):
    """What `stored_document` selects, read back as the capture's document: its JSON text ("text",
    as the store kept it before schema version 3), its dict ("dict"), or what was selected ("raw",
    for `documents.assemble` later)."""

    impl = sa.Text
    cache_ok = True

    def __init__(self, mode: str = "dict"):
        if mode not in DOCUMENT_MODES:
            raise ValueError(f"mode: one of {DOCUMENT_MODES}, not {mode!r}")
        super().__init__()
        self.mode = mode

    def process_result_value(self, value: str | None, dialect: sa.Dialect) -> Any:
        return None if value is None else assemble(value, self.mode)


def stored_document(mode: str = "dict") -> sa.Label:
    """A capture's document (see `StoredDocument` for `mode`), selected from its row and its body
    (outer-joined: `with_bodies`). The parts are joined in SQL into one text; `StoredDocument` puts
    them together."""
    t, d = snapshots_table, documents_table
    parts = packed(t.c.partition_key, _UtcText(t.c.captured_at), t.c.capture, d.c.body)
    whole = sa.case((t.c.body.is_(None), t.c.document), else_=parts)
    return sa.type_coerce(whole, StoredDocument(mode)).label("document")


def with_bodies() -> sa.FromClause:
    """The snapshots with each row's body, for `stored_document`: `select(…).select_from(with_bodies())`."""
    return snapshots_table.outerjoin(documents_table, documents_table.c.id == snapshots_table.c.body)


def latest_captures(*conditions: sa.ColumnElement[bool], mode: str = "text") -> sa.Select:
    """(urn, document) of each dataset's latest capture (newest partition, then capture) among the
    rows matching `conditions`; the datasets are the expanding parameter `urns`. The document as
    `stored_document(mode)`: by default its JSON text, as the store kept it before schema version 3."""
    t = snapshots_table
    ranked = (
        sa.select(
            t.c.id,
            sa.func.row_number()
            .over(partition_by=t.c.urn, order_by=(t.c.partition_key.desc(), t.c.id.desc()))
            .label("rank"),
        )
        .where(t.c.urn.in_(sa.bindparam("urns", expanding=True)), *conditions)
        .subquery()
    )
    return (
        sa.select(t.c.urn, stored_document(mode))
        .select_from(ranked.join(t, t.c.id == ranked.c.id).outerjoin(documents_table, documents_table.c.id == t.c.body))
        .where(ranked.c.rank == 1)
    )


def _catalogs_without_credentials(conn: sa.Connection) -> None:
    """Schema version 4: a catalog is named by its endpoint without credentials (`masking.shown_url`);
    before, `datahub-rest:http://user:SECRET@gms` and the like were kept whole in the outbox and the
    catalog state. Their rows take the new name, so what waits is delivered under it, and the errors
    kept with them lose the credentials they quote."""
    o, c = outbox_table, catalog_state_table
    names = {n for t in (o, c) for n in conn.execute(sa.select(t.c.catalog).distinct()).scalars()}
    for old in names:
        kind, _, endpoint = old.partition(":")
        new = f"{kind}:{shown_url(endpoint)}" if "://" in endpoint else old
        if new == old:
            continue
        # the same catalog under another password: its state stands, this one goes (the next delivery compares)
        taken = sa.select(c.c.urn).where(c.c.catalog == new).scalar_subquery()
        conn.execute(c.delete().where(c.c.catalog == old, c.c.urn.in_(taken)))
        conn.execute(c.update().where(c.c.catalog == old).values(catalog=new))
        conn.execute(o.update().where(o.c.catalog == old).values(catalog=new))
    for row_id, error in conn.execute(sa.select(o.c.id, o.c.last_error).where(o.c.last_error.is_not(None))):
        if mask_secrets(error) != error:
            conn.execute(o.update().where(o.c.id == row_id).values(last_error=mask_secrets(error)))


#: what each schema version added: (table, column) for a column, an index as itself, a function for a
#: change of the rows; an older store gets them when opened (a table new in a version is created with the
#: others when the store opens)
MIGRATIONS: dict[int, list[tuple[sa.Table, str] | sa.Index | Callable[[sa.Connection], None]]] = {
    2: [(outbox_table, "claimed_by"), (outbox_table, "claimed_until")],  # outbox claims
    3: [(snapshots_table, "body"), (snapshots_table, "capture")],  # bodies kept once (lumos_documents)
    4: [_catalogs_without_credentials],
    5: [(catalog_state_table, "claims")],  # what Lumos added to shared aspects in each catalog
    6: [(snapshots_table, "unread"), UNREAD_INDEX],  # past partitions' unread files (governance.checks)
}
