"""Offline ranked search over datasets: BM25 over a few weighted zones of each document.

Pure Python: callers pass the documents (from a snapshot store, an estate file, ...) and
get ranked hits back; nothing here talks to a catalog. `search()` indexes the documents it
is given; a `SearchIndex` kept around answers several queries over the same documents.

Ranking, in order of precedence:

1. a dataset whose name equals the query (case-insensitively) comes first;
2. then a dataset with a field named as the query (its whole path, or its last segment:
   `customer_id` finds `customer_id` and `buyer.customer_id`, not `view_id` and `customer_name`);
3. then documents matching more of the query's words: a word matches a token exactly or,
   from three characters on, as the prefix of a longer token ("ord" finds "orders");
4. then BM25 (k1=1.2, b=0.75): each zone is scored on its own, length-normalised against
   that zone's average, and the zones are summed with weights (name 5, field names 3, tags 3,
   descriptions 2, owners/domain/platform 1) so that a name match keeps its weight however
   often the term recurs elsewhere; a prefix match counts `PREFIX_WEIGHT` of an occurrence.

`Hit.score` carries that order in one number: its integer part is the tier (query words
matched; an exact field name sits one above the most a query can match, an exact name two),
its fraction the BM25 score squashed into [0, 1).
"""

from __future__ import annotations

import bisect
import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from functools import cached_property, lru_cache
from itertools import chain
from typing import TYPE_CHECKING, Callable, Iterable

import numpy as np

if TYPE_CHECKING:  # for the annotations only
    from lumos_dagster.floor.dataset_specs import Catalogue, DatasetSpec
    from lumos_dagster.floor.model import Snapshot

K1 = 1.2
B = 0.75
PREFIX_WEIGHT = 0.5  # a power of two: sums of prefix matches stay exact whatever their order
MIN_PREFIX = 3
SCORED_VALUES = 1 << 22  # scores an index keeps for the query terms it saw last (32 MiB)
# zone -> weight; the order is the order of `_zone_texts`
ZONE_WEIGHTS = {
    "name": 5.0,
    "fields": 3.0,
    "tags": 3.0,
    "description": 2.0,
    "field_descriptions": 2.0,
    "meta": 1.0,  # owners, domain, platform
}


@dataclass(frozen=True)
class Document:
    """What is searchable about one dataset."""

    dataset: str
    platform: str = ""
    domain: str | None = None
    owners: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    description: str | None = None
    fields: tuple[tuple[str, str | None], ...] = ()  # (flat field path, field description)
    quality: float | None = None  # 0..1, None when unknown


@dataclass(frozen=True)
class Hit:
    """One ranked dataset; `matched` says where the query matched, for display."""

    dataset: str
    score: float
    matched: tuple[str, ...]  # "name", "field:<path>", "tag:<tag>", "description", ...


# a chunk keeps the characters data names are built from; "/" separates path segments
_CHUNK = re.compile(r"[\w.\-]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEPARATOR = re.compile(r"[\W_]+")


@lru_cache(maxsize=1 << 18)  # words repeat a lot across names and descriptions
def _split(chunk: str) -> tuple[str, tuple[str, ...]]:
    """A chunk as (the whole chunk, its atoms), lowercased: "customerId" -> ("customerid", ("customer", "id"))."""
    atoms = tuple(filter(None, _SEPARATOR.split(_CAMEL.sub(" ", chunk).lower())))
    return chunk.strip("._-").lower(), atoms


def _words(text: str) -> list[tuple[str, tuple[str, ...]]]:
    """The chunks of a query that hold anything searchable."""
    return [word for word in map(_split, _CHUNK.findall(text)) if word[1]]


@lru_cache(maxsize=1 << 18)
def _chunk_tokens(chunk: str) -> tuple[str, ...]:
    whole, atoms = _split(chunk)
    # the whole chunk too when it has several atoms, so "customer_id" matches as one token
    return atoms if not atoms or whole in atoms else (*atoms, whole)


def tokenize(text: str) -> tuple[str, ...]:
    """Lowercased atoms of every chunk, split on separators and camelCase, plus each multi-atom chunk whole."""
    return tuple(chain.from_iterable(map(_chunk_tokens, _CHUNK.findall(text))))


def _zone_texts(doc: Document) -> tuple[list[str], ...]:
    return (
        [doc.dataset],
        [path for path, _ in doc.fields],
        list(doc.tags),
        [doc.description] if doc.description else [],
        [text for _, text in doc.fields if text],
        [*doc.owners, doc.domain or "", doc.platform],
    )


def _saturate(tf: float) -> float:
    return tf * (K1 + 1) / (tf + K1)


class SearchIndex:
    """Per zone, each document's term counts and length norm; query terms are scored against them."""

    def __init__(self, documents: Iterable[Document]):
        self.documents = tuple(documents)
        # per zone, one Counter per document: counting in C is most of what building costs
        self._counts: list[list[Counter[str]]] = [[] for _ in ZONE_WEIGHTS]
        for doc in self.documents:
            for counts, texts in zip(self._counts, _zone_texts(doc), strict=True):
                # one pass over the joined texts: chunks never span a space
                counts.append(Counter(tokenize(" ".join(texts))))
        self._norms = [_length_norms(counts) for counts in self._counts]
        self._by_name: defaultdict[str, list[int]] = defaultdict(list)
        self._by_field: defaultdict[str, set[int]] = defaultdict(set)  # a field's path or last segment
        self._scored: dict[str, np.ndarray] = {}  # term → _dense(term), the newest
        for i, doc in enumerate(self.documents):
            self._by_name[doc.dataset.casefold()].append(i)
            for path, _ in doc.fields:
                self._by_field[path.casefold()].add(i)
                self._by_field[path.rpartition(".")[2].casefold()].add(i)

    def prepared(self) -> SearchIndex:
        """The index with everything a query needs built now (a server builds it aside, not in a request)."""
        _ = (self._postings, self._name_rank, self._vocabulary)  # cached properties: computed here
        return self

    @cached_property
    def _postings(self) -> dict[str, list[tuple[int, int, int]]]:
        """Token → (zone, document, count), zone by zone: a query reads only the documents holding its
        terms (built on the first query, so a server's cached index answers each in milliseconds)."""
        postings: defaultdict[str, list[tuple[int, int, int]]] = defaultdict(list)
        for z, counts in enumerate(self._counts):
            for i, zone in enumerate(counts):
                for token, n in zone.items():
                    postings[token].append((z, i, n))
        return dict(postings)

    @cached_property
    def _name_rank(self) -> np.ndarray:
        """Each document's place in (name, position) order: ties in score are broken by name, then position."""
        rank = np.empty(len(self.documents), dtype=np.int64)
        rank[sorted(range(len(self.documents)), key=lambda i: self.documents[i].dataset)] = np.arange(len(rank))
        return rank

    @cached_property
    def _vocabulary(self) -> list[str]:
        """Every indexed token, sorted for prefix look-ups."""
        return sorted(self._postings)

    def _idf(self, df: int) -> float:
        n = len(self.documents)
        return math.log(1 + (n - df + 0.5) / (df + 0.5))

    def _expansions(self, term: str) -> set[str]:
        """Indexed tokens that `term` is a proper prefix of."""
        vocabulary = self._vocabulary
        start = end = bisect.bisect_right(vocabulary, term)
        while end < len(vocabulary) and vocabulary[end].startswith(term):
            end += 1
        return set(vocabulary[start:end])

    def _dense(self, term: str) -> np.ndarray:
        """`_scores_of(term)` as one score per document (0: not held). Kept per term, the newest few
        (SCORED_VALUES in all): a term most documents hold ("table") is scored once, not per query."""
        dense = self._scored.get(term)
        if dense is None:
            dense = np.zeros(len(self.documents))
            scores = self._scores_of(term)
            dense[list(scores)] = list(scores.values())
            if len(self._scored) >= max(16, SCORED_VALUES // max(1, len(self.documents))):
                self._scored.pop(next(iter(self._scored)))  # the oldest
            self._scored[term] = dense
        return dense

    def _scores_of(self, term: str) -> dict[int, float]:
        """BM25 of a query term in each document holding it: idf times the weighted sum of per-zone scores.

        A token the term is a proper prefix of counts `PREFIX_WEIGHT` of an occurrence.
        """
        matches = [(term, 1.0)]
        if len(term) >= MIN_PREFIX:
            matches += [(token, PREFIX_WEIGHT) for token in sorted(self._expansions(term))]
        # sums of counts and halves are exact, so the order tokens are added in cannot change a frequency
        by_place: dict[tuple[int, int], float] = {}
        for token, share in matches:
            for z, i, n in self._postings.get(token, ()):
                by_place[z, i] = by_place.get((z, i), 0.0) + share * n
        weights = tuple(ZONE_WEIGHTS.values())
        scores: dict[int, float] = {}
        for (z, i), tf in sorted(by_place.items()):  # zone by zone: sums of floats depend on their order
            scores[i] = scores.get(i, 0.0) + weights[z] * _saturate(tf / self._norms[z][i])
        idf = self._idf(len(scores))
        return {i: score * idf for i, score in scores.items()}

    def search(
        self,
        query: str,
        *,
        platform: str | None = None,
        owner: str | None = None,
        tag: str | None = None,
        min_quality: float | None = None,
        limit: int = 20,
    ) -> list[Hit]:
        """The best `limit` documents passing every filter, best first; an empty query lists them by name."""
        if limit < 0:
            raise ValueError(f"limit must be >= 0, got {limit}")
        keep = _filter(platform, owner, tag, min_quality)
        if not query.strip():
            browsed = sorted((doc for doc in self.documents if keep(doc)), key=lambda doc: doc.dataset)
            return [Hit(doc.dataset, 0.0, ()) for doc in browsed[:limit]]

        words = _words(query)
        atoms = {atom for _, parts in words for atom in parts}
        terms = sorted(atoms | {whole for whole, _ in words})  # sorted: the same float sums on every run
        # one array per term, summed in numpy (the same IEEE sums, in the same order, as one document at a
        # time): a term most documents hold costs microseconds, not a Python loop over them all
        bm25 = np.zeros(len(self.documents))
        covered = np.zeros(len(self.documents))
        for term in terms:
            scores = self._dense(term)
            bm25 += scores
            if term in atoms:
                covered += scores > 0
        fields = sorted(self._by_field.get(query.strip().casefold(), ()))
        covered[fields] = len(atoms) + 1
        exact = list(self._by_name.get(query.strip().casefold(), ()))
        covered[exact] = len(atoms) + 2
        score = covered + bm25 / (bm25 + 1)
        wanted = bm25 > 0
        wanted[fields] = True
        wanted[exact] = True
        if (platform, owner, tag, min_quality) != (None, None, None, None):
            wanted &= np.fromiter(map(keep, self.documents), bool, len(self.documents))
        found = np.flatnonzero(wanted)
        found = found[np.lexsort((self._name_rank[found], -score[found]))[:limit]]  # best first, then by name
        ranked = [(float(score[i]), self.documents[i].dataset, int(i)) for i in found]

        is_match = _matcher(terms)
        return [Hit(name, score, _matched(self.documents[i], is_match, i in exact)) for score, name, i in ranked]


def search(
    documents: Iterable[Document],
    query: str,
    *,
    platform: str | None = None,
    owner: str | None = None,
    tag: str | None = None,
    min_quality: float | None = None,
    limit: int = 20,
) -> list[Hit]:
    """Rank `documents` for `query`; an empty query lists the documents passing the filters by name."""
    return SearchIndex(documents).search(
        query, platform=platform, owner=owner, tag=tag, min_quality=min_quality, limit=limit
    )


def _length_norms(counts: list[Counter[str]]) -> list[float]:
    """BM25's length normalisation of one zone in each document: longer than average dilutes a match."""
    lengths = [zone.total() for zone in counts]
    # a zone no document has keeps an average of 1, so the division stays defined (its lengths are all 0)
    average = sum(lengths) / len(lengths) if lengths and any(lengths) else 1.0
    return [1 - B + B * length / average for length in lengths]


def _filter(
    platform: str | None, owner: str | None, tag: str | None, min_quality: float | None
) -> Callable[[Document], bool]:
    owner_key = owner.casefold() if owner is not None else None
    tag_key = tag.casefold() if tag is not None else None

    def keep(doc: Document) -> bool:
        return (
            (platform is None or doc.platform == platform)
            and (owner_key is None or any(o.casefold() == owner_key for o in doc.owners))
            and (tag_key is None or any(t.casefold() == tag_key for t in doc.tags))
            and (min_quality is None or (doc.quality is not None and doc.quality >= min_quality))
        )

    return keep


def exclusions(
    doc: Document,
    platform: str | None = None,
    owner: str | None = None,
    tag: str | None = None,
    min_quality: float | None = None,
) -> list[str]:
    """Why the filters leave `doc` out, one reason per filter it fails (none when it passes): the
    same tests as the search's own filter, said in words."""
    if _filter(platform, owner, tag, min_quality)(doc):
        return []
    reasons = []
    if platform is not None and doc.platform != platform:
        reasons.append(f"platform {doc.platform or 'unknown'}, not {platform}")
    if owner is not None and not any(o.casefold() == owner.casefold() for o in doc.owners):
        reasons.append(f"not owned by {owner}" + (f" ({', '.join(doc.owners)})" if doc.owners else " (no owner)"))
    if tag is not None and not any(t.casefold() == tag.casefold() for t in doc.tags):
        reasons.append(f"no tag {tag}")
    if min_quality is not None:
        if doc.quality is None:
            reasons.append(f"no quality score (needs {min_quality:.2f})")
        elif doc.quality < min_quality:
            reasons.append(f"quality {doc.quality:.2f} < {min_quality:.2f}")
    return reasons


def _matcher(terms: list[str]) -> Callable[[str], bool]:
    """Whether a text holds a token the query matched, exactly or by prefix (the same rule as scoring)."""
    exact = set(terms)
    prefixes = tuple(term for term in terms if len(term) >= MIN_PREFIX)

    def is_match(text: str) -> bool:
        return any(token in exact or token.startswith(prefixes) for token in tokenize(text))

    return is_match


def _matched(doc: Document, is_match: Callable[[str], bool], exact_name: bool) -> tuple[str, ...]:
    """Where the query matched, zone by zone in index order, for display."""
    labels = ["name"] if exact_name or is_match(doc.dataset) else []
    labels += [f"field:{path}" for path, _ in doc.fields if is_match(path)]
    labels += [f"tag:{tag}" for tag in doc.tags if is_match(tag)]
    if doc.description and is_match(doc.description):
        labels.append("description")
    labels += [f"field-description:{path}" for path, text in doc.fields if text and is_match(text)]
    labels += [f"owner:{owner}" for owner in doc.owners if is_match(owner)]
    if doc.domain and is_match(doc.domain):
        labels.append("domain")
    if doc.platform and is_match(doc.platform):
        labels.append("platform")
    return tuple(labels)


def documents(catalogue: Catalogue, latest: Callable[[DatasetSpec], Snapshot | None]) -> list[Document]:
    """Everything Lumos knows, one document per dataset of `catalogue` (a scan.catalogue.Catalogue):
    the latest snapshot's names, fields, descriptions, tags, owners and quality (`latest(spec)` gives
    it); what lumos.yaml and code say for datasets not taken yet. Removed datasets are left out."""
    docs = []
    for d in catalogue.datasets:
        s = latest(d)
        if s is not None and s.removed:
            continue
        e = d.enrichment
        docs.append(
            Document(
                dataset=d.name,
                platform=d.platform,
                domain=s.domain if s else e.domain,
                owners=tuple(o.id for o in (s.owners if s else e.owners)),
                tags=tuple(s.tags if s else e.tags) + tuple(s.terms if s else ()),
                description=s.description if s else (e.description or e.default_description),
                fields=tuple((p, f.description) for p, f in s.schema.flatten()) if s else (),
                quality=s.quality.score if s and s.quality else None,
            )
        )
    return docs
