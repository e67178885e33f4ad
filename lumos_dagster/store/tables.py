"""The snapshot store's tables (SQLAlchemy Core): registry, snapshots, outbox, catalog state, file
state, releases and what code says about datasets."""

import sqlalchemy as sa

metadata = sa.MetaData()

#: bumped when the tables change; an older store is brought up to date by MIGRATIONS, a newer one is refused
SCHEMA_VERSION = 2

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
    sa.Column("document", sa.Text, nullable=False),
    sa.Index("ix_lumos_snapshots_urn_partition", "urn", "partition_key", "id"),
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


def latest_captures(*conditions) -> sa.Select:
    """(urn, document) of each dataset's latest capture (newest partition, then capture) among the
    rows matching `conditions`; the datasets are the expanding parameter `urns`."""
    t = snapshots_table
    ranked = (
        sa.select(
            t.c.urn,
            t.c.document,
            sa.func.row_number()
            .over(partition_by=t.c.urn, order_by=(t.c.partition_key.desc(), t.c.id.desc()))
            .label("rank"),
        )
        .where(t.c.urn.in_(sa.bindparam("urns", expanding=True)), *conditions)
        .subquery()
    )
    return sa.select(ranked.c.urn, ranked.c.document).where(ranked.c.rank == 1)


#: the columns each schema version added, by (table, column): an older store gets them when opened
MIGRATIONS: dict[int, list[tuple[sa.Table, str]]] = {
    2: [(outbox_table, "claimed_by"), (outbox_table, "claimed_until")],  # outbox claims
}
