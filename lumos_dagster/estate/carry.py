"""What a catalog can hold, and how much of one estate another holds: the migration report.

Each readable adapter declares `cannot_hold`, a frozenset of the categories below it keeps
nothing of (every catalog keeps current state only: no `history`, no `releases`). The report
counts, per category, what the source has (expected) and what the target gave back (carried),
so a loss shows as a count short of its expected one; a category the target cannot hold is
reported as such ("OpenMetadata keeps no version history: 3 earlier versions not carried"),
never silently dropped.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from lumos_dagster.catalog.base import (
    CURRENT_STATE_ONLY,
    DATASETS,
    DESCRIPTIONS,
    HISTORY,
    LINEAGE,
    OWNERS,
    RELEASES,
    SCHEMAS,
    TAGS,
    TERMS,
    VERSIONS,
)
from lumos_dagster.estate.portable import Estate
from lumos_dagster.floor.model import Snapshot
from lumos_dagster.floor.wording import plural

#: what a category's items are called in the report, and how to say a catalog keeps none of them
NOUNS = {
    DATASETS: ("dataset", "keeps no datasets"),
    VERSIONS: ("version", "keeps no dataset versions"),
    HISTORY: ("earlier version", "keeps no version history"),
    RELEASES: ("release", "keeps no releases"),
    LINEAGE: ("lineage edge", "keeps no lineage"),
    OWNERS: ("owner", "keeps no owners"),
    TAGS: ("tag", "keeps no tags"),
    TERMS: ("glossary term", "keeps no glossary terms"),
    SCHEMAS: ("schema", "keeps no schemas"),
    DESCRIPTIONS: ("description", "keeps no descriptions"),
}


def cannot_hold(catalog: Any) -> frozenset[str]:
    """The categories a store or catalog keeps nothing of (`None`: the Lumos store, which keeps all)."""
    return frozenset() if catalog is None else getattr(catalog, "cannot_hold", CURRENT_STATE_ONLY)


def _items(estate: Estate) -> dict[str, set[tuple]]:
    """Every item of every category, each a hashable key (dataset first)."""
    current = [e.snapshot for e in estate.entries]
    per: dict[str, Callable[[Snapshot], Iterable[tuple]]] = {
        DATASETS: lambda s: [(s.dataset.name,)],
        VERSIONS: lambda s: [(s.dataset.name, s.version)] if s.version else [],
        LINEAGE: lambda s: [(s.dataset.name, e.upstream.name) for e in s.upstream],
        OWNERS: lambda s: [(s.dataset.name, o.id, o.kind, o.type) for o in s.owners],
        TAGS: lambda s: [(s.dataset.name, t) for t in s.tags],
        TERMS: lambda s: [(s.dataset.name, t) for t in s.terms],
        SCHEMAS: lambda s: [(s.dataset.name, s.fingerprint)] if s.schema.fields else [],
        DESCRIPTIONS: lambda s: [(s.dataset.name, s.description)] if s.description else [],
    }
    out = {what: {item for s in current for item in get(s)} for what, get in per.items()}
    out[HISTORY] = {(e.snapshot.dataset.name, h.version) for e in estate.entries for h in e.history if h.version}
    out[RELEASES] = {(r.name,) for r in estate.releases}
    return out


@dataclass
class Carried:
    """Per category: items expected (in the source) and carried (the same items in the target)."""

    target: str
    expected: dict[str, int]
    carried: dict[str, int]
    cannot_hold: frozenset[str]
    missing: dict[str, list[tuple]] = field(default_factory=dict)  # category → items the target lacks

    @property
    def lost(self) -> dict[str, int]:
        """Counts short of expected in categories the target can hold: what the migration lost."""
        return {w: self.expected[w] - self.carried[w] for w in self.expected
                if w not in self.cannot_hold and self.carried[w] < self.expected[w]}  # fmt: skip

    @property
    def not_held(self) -> dict[str, int]:
        """Items the target cannot hold by its nature (declared, not lost)."""
        return {w: self.expected[w] - self.carried[w] for w in self.expected  # in the report's order
                if w in self.cannot_hold and self.carried[w] < self.expected[w]}  # fmt: skip

    @property
    def complete(self) -> bool:
        return not self.lost

    def manual_mapping(self) -> list[str]:
        """Tags, terms and owners the target lacks, each once with how many datasets use it."""
        lines = []
        for what, key, label in ((TAGS, lambda i: i[1], "tag"), (TERMS, lambda i: i[1], "glossary term"),
                                 (OWNERS, lambda i: f"{i[1]} ({i[2]})", "owner")):  # fmt: skip
            for name, n in sorted(Counter(key(i) for i in self.missing.get(what, ())).items()):
                lines.append(f"{label} {name}: {self.target} lacks it ({plural(n, 'dataset')})")
        return lines

    def not_held_lines(self) -> list[str]:
        """e.g. `openmetadata:… keeps no version history: 3 earlier versions not carried`."""
        return [f"{self.target} {NOUNS[w][1]}: {plural(n, NOUNS[w][0])} not carried" for w, n in self.not_held.items()]

    def lines(self) -> list[str]:
        """The design's report: carried / expected per category, then what is not held, lost, to map."""

        def count(w: str) -> str:
            return f"{self.carried[w]:,}/{self.expected[w]:,} {NOUNS[w][0]}s"

        out = [
            f"{count(DATASETS)} migrated, {count(LINEAGE)} migrated",
            ", ".join(count(w) for w in (VERSIONS, OWNERS, TAGS, TERMS)) + " carried",
            ", ".join(count(w) for w in (SCHEMAS, DESCRIPTIONS)) + " identical",
        ]
        out += self.not_held_lines()
        for what, n in self.lost.items():
            sample = ", ".join(_item(what, i) for i in self.missing[what][:5])
            out.append(f"lost: {plural(n, NOUNS[what][0])} ({sample}{', …' if n > 5 else ''})")
        mapping = self.manual_mapping()
        if mapping:
            out.append(
                f"{plural(len(mapping), 'item')} {'requires' if len(mapping) == 1 else 'require'} manual mapping:"
            )
            out += [f"  {m}" for m in mapping]
        return out


def _item(what: str, item: tuple) -> str:
    """`clean/orders ← raw/orders`, `raw/orders: ann@example.com (user)`, `raw/orders: pii`…"""
    if what == LINEAGE:
        return f"{item[0]} ← {item[1]}"
    if what == OWNERS:
        return f"{item[0]}: {item[1]} ({item[2]})"
    return ": ".join(map(str, item))


def carried(source: Estate, target: Estate, target_name: str, target_cannot_hold: frozenset[str]) -> Carried:
    want, have = _items(source), _items(target)
    missing = {w: sorted(want[w] - have[w], key=str) for w in want}
    return Carried(
        target_name,
        expected={w: len(want[w]) for w in want},
        carried={w: len(want[w] & have[w]) for w in want},
        cannot_hold=target_cannot_hold,
        missing={w: m for w, m in missing.items() if m},
    )
