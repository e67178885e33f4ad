"""What a dataset's breaking changes do to each consumer, following column lineage where it is known.

A consumer that reads none of the changed columns is COMPATIBLE; one that reads one is BREAKING;
one that reads the dataset without column lineage (declared lineage, a query sqlglot could not
follow) is POSSIBLY BREAKING, since any of its columns may come from a changed one. Verdicts pass
down the lineage column by column: a consumer of a BREAKING dataset is reached only through the
columns that dataset derives from changed ones; below a POSSIBLY BREAKING dataset nothing is
certain, so the worst a consumer gets is POSSIBLY BREAKING.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from lumos_dagster.floor.dataset_specs import Catalogue
from lumos_dagster.floor.model import BREAKING, ColumnMapping, Owner, SchemaChange
from lumos_dagster.lineage.impact import downstream

POSSIBLY_BREAKING, COMPATIBLE = "POSSIBLY BREAKING", "COMPATIBLE"
_RANK = {COMPATIBLE: 0, POSSIBLY_BREAKING: 1, BREAKING: 2}
NO_ACTION = "no action"


@dataclass(frozen=True)
class Reach:
    """How a change reaches one dataset. `columns`: each reached column → the changes reaching it,
    None when unknown (every column may be reached). `reads`: (column, upstream, upstream column)
    edges carrying a change in; `blind`: upstreams it reads without column lineage."""

    verdict: str
    columns: Mapping[str, frozenset[str]] | None = None
    reads: tuple[tuple[str, str, str], ...] = ()
    blind: tuple[str, ...] = ()

    @property
    def changes(self) -> frozenset[str]:
        return frozenset().union(*self.columns.values()) if self.columns else frozenset()


UNREACHED = Reach(COMPATIBLE, {})


def change_label(c: SchemaChange) -> str:
    return f"{c.kind} {c.path}"


def root_reach(changes: Sequence[SchemaChange]) -> Reach:
    """The changed dataset itself: its breaking changes, by field path ('' = the whole dataset)."""
    columns: dict[str, frozenset[str]] = {}
    for c in changes:
        if c.severity == BREAKING:
            columns[c.path] = columns.get(c.path, frozenset()) | {change_label(c)}
    return Reach(BREAKING, columns) if columns else UNREACHED


def _touches(column: str, path: str) -> bool:
    """A read column and a changed path overlap: equal, or one nests inside the other (`a` and `a.b`)."""
    if not path or column == path:
        return True
    inner, outer = (column, path) if len(column) > len(path) else (path, column)
    return inner.startswith(outer) and inner[len(outer)] in ".[{"


def edge_reach(parent: Reach, upstream: str, columns: Sequence[ColumnMapping], all_changes: frozenset[str]) -> Reach:
    """What reaches a consumer through one lineage edge from `upstream` (reached as `parent`), given
    the edge's column mappings (none: no column lineage). `all_changes`: the changes at the root,
    for a parent whose reached columns are unknown."""
    if parent.verdict == COMPATIBLE:
        return UNREACHED
    if not columns:
        # no column lineage: any column may be reached, by whatever reached the upstream
        return Reach(POSSIBLY_BREAKING, None, blind=(upstream,))
    reached: dict[str, frozenset[str]] = {}
    reads = []
    for m in columns:
        if parent.columns is None:
            hit = all_changes
        else:
            hit = frozenset().union(*(ch for path, ch in parent.columns.items() if _touches(m.upstream, path)))
        if hit:
            reached[m.downstream] = reached.get(m.downstream, frozenset()) | hit
            reads.append((m.downstream, upstream, m.upstream))
    if not reached:
        return UNREACHED
    certain = parent.verdict == BREAKING
    return Reach(BREAKING if certain else POSSIBLY_BREAKING, reached, tuple(reads))


def combine(reaches: Sequence[Reach]) -> Reach:
    """A consumer of several upstreams: the worst verdict, every reached column and edge."""
    hit = [r for r in reaches if r.verdict != COMPATIBLE]
    if not hit:
        return UNREACHED
    columns: dict[str, frozenset[str]] | None = {}
    for r in hit:
        if r.columns is None or columns is None:
            columns = None
        else:
            for c, ch in r.columns.items():
                columns[c] = columns.get(c, frozenset()) | ch
    return Reach(
        max((r.verdict for r in hit), key=_RANK.__getitem__),
        columns,
        tuple(dict.fromkeys(e for r in hit for e in r.reads)),
        tuple(dict.fromkeys(u for r in hit for u in r.blind)),
    )


def recommendation(name: str, reach: Reach) -> str:
    """What the consumer's owners should do before the change is released."""
    if reach.verdict == COMPATIBLE:
        return NO_ACTION
    parts = [f"{name}.{col} ← {up}.{upcol}" for col, up, upcol in reach.reads]
    if reach.blind:
        parts.append(f"{name} (reads {', '.join(reach.blind)} with no column lineage)")
    if reach.verdict == BREAKING:
        return f"update {'; '.join(parts)} before releasing"
    unsure = "" if reach.blind else " (column lineage above it is unknown)"
    return f"check {'; '.join(parts)} before releasing{unsure}"


@dataclass(frozen=True)
class ConsumerVerdict:
    name: str
    depth: int  # 1 = a direct consumer
    via: str
    owners: tuple[Owner, ...]
    verdict: str  # BREAKING | POSSIBLY BREAKING | COMPATIBLE
    reached_by: tuple[str, ...]  # the changes reaching it ("FIELD_REMOVED status")
    reads: tuple[str, ...]  # the edges carrying them: "status ← raw/orders.status"
    recommendation: str

    @property
    def label(self) -> str:
        """POSSIBLY BREAKING comes only from an edge without column lineage, here or above."""
        return f"{self.verdict} (no column lineage)" if self.verdict == POSSIBLY_BREAKING else self.verdict


def consumer_verdicts(
    catalogue: Catalogue, name: str, changes: Sequence[SchemaChange], max_depth: int | None = None
) -> list[ConsumerVerdict]:
    """Every dataset downstream of `name` (breadth first, as `impact.downstream`) with its verdict on
    `name`'s breaking changes. Column lineage is the catalogue's: what code says now."""
    root = root_reach(changes)
    everything = root.changes
    labels = list(dict.fromkeys(change_label(c) for c in changes if c.severity == BREAKING))
    reach: dict[str, Reach] = {name: root}
    for d in catalogue.datasets:  # lineage order: a dataset's upstreams come first
        parents = [u for u in d.upstream if u in reach]
        if d.name == name or not parents:
            continue
        edges = {e.upstream.name: e.columns for e in d.enrichment.upstream}
        reach[d.name] = combine([edge_reach(reach[u], u, edges.get(u, ()), everything) for u in parents])
    out = []
    for a in downstream(catalogue, name, max_depth):
        r = reach[a.name]
        reaching = everything if r.columns is None else r.changes
        reached = [label for label in labels if label in reaching]
        out.append(
            ConsumerVerdict(
                a.name, a.depth, a.via, a.owners, r.verdict, tuple(reached),
                tuple(f"{col} ← {up}.{upcol}" for col, up, upcol in r.reads), recommendation(a.name, r),
            )
        )  # fmt: skip
    return out
