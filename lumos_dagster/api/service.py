"""Lumos in process: the questions the API answers, as Python calls over a store.

    from lumos_dagster.api.service import Lumos

    lumos = Lumos.open("lumos.yaml")          # the store lumos.yaml names
    lumos.dataset("sales/orders").version     # '2.1.0'
    lumos.check("sales/orders", "spark-ddl", "id BIGINT NOT NULL").passed
    lumos.close()

Each method answers from one read transaction (`reading.pinned`) with the functions behind the
CLI (`lumos summary`, `diff`, `gate`, `impact`, `history`, `search`, `cost`, `export`, `release`)
and returns the models of `lumos_dagster.api.models`, the same the SDK (`lumos_dagster.client`)
returns from a server. The lineage graph, the search index and the cost report are built from the
whole estate: they are cached and rebuilt when the store changed, at most every `cache_seconds`
while a materialization writes (the stale one is served meanwhile, and the rebuild runs aside).
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from typing import TYPE_CHECKING, Any, Literal, cast

from lumos_dagster.api import limits
from lumos_dagster.api import models as m
from lumos_dagster.api.reading import ReadView, pinned, read_engine
from lumos_dagster.floor.config import LumosConfig, load_config
from lumos_dagster.floor.datatypes import Schema, type_str
from lumos_dagster.floor.errors import LumosError
from lumos_dagster.floor.masking import shown_url
from lumos_dagster.floor.model import BREAKING, SchemaChange
from lumos_dagster.floor.snapshot_json import change_to_json, snapshot_loads

if TYPE_CHECKING:
    from lumos_dagster.floor.model import Acceptance
    from lumos_dagster.reports.changes import ChangeReport
    from lumos_dagster.schema.inputs import Side

log = logging.getLogger("lumos.api")


class NotFound(LumosError):
    """An unknown dataset, version or release."""


#: what an unknown dataset is answered: never its name, which may be anything the client sent
UNKNOWN_DATASET = "unknown dataset (GET /v1/datasets lists them)"


class Invalid(LumosError):
    """A request that cannot be answered as asked (a malformed schema, an unknown policy…)."""


class Conflict(LumosError):
    """A write that clashes with what the store holds (a release name taken)."""


def _lumos_version() -> str:
    try:
        return package_version("lumos")
    except PackageNotFoundError:  # pragma: no cover
        return "unknown"


@dataclass
class _Entry:
    generation: tuple
    built: float
    value: Any


class _Cache:
    """Whole-estate values keyed by the store's generation; a stale value younger than `ttl` is
    served while one thread rebuilds it aside."""

    def __init__(self, ttl: float):
        self.ttl = ttl
        self._entries: dict[str, _Entry] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self._refreshing: set[str] = set()

    def _lock(self, key: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    def get(self, key: str, generation: Callable[[], tuple], build: Callable[[], Any],
            rebuild_aside: Callable[[], None]) -> Any:  # fmt: skip
        """The cached value: as it is while younger than `ttl`; then, if the store moved on
        (`generation()` differs), rebuilt by one thread aside while requests still get it. A
        materialization writing every second thus does not have the whole estate read at each write."""
        entry = self._entries.get(key)
        if entry is not None and time.monotonic() - entry.built < self.ttl:
            return entry.value
        gen = generation()
        if entry is not None and entry.generation == gen:
            entry.built = time.monotonic()
            return entry.value
        if entry is not None and time.monotonic() - entry.built < 10 * self.ttl + 60:
            with self._guard:
                start = key not in self._refreshing
                self._refreshing.add(key)
            if start:
                threading.Thread(target=self._aside, args=(key, rebuild_aside), daemon=True).start()
            return entry.value
        with self._lock(key):  # none yet (or a rebuild that keeps failing): build it here, once
            entry = self._entries.get(key)
            if entry is not None and entry.generation == gen:
                return entry.value
            value = build()
            self._entries[key] = _Entry(gen, time.monotonic(), value)
            return value

    def put(self, key: str, generation: tuple, value: Any) -> None:
        self._entries[key] = _Entry(generation, time.monotonic(), value)

    def _aside(self, key: str, rebuild: Callable[[], None]) -> None:
        try:
            rebuild()
        except Exception:  # the stale value stays; the next request tries again
            log.exception("rebuilding the cached %s failed", key)
        finally:
            with self._guard:
                self._refreshing.discard(key)


def judge_proposal(fmt: str, schema: str | dict | list, max_fields: int, current: Side, policy: str,
                   config: LumosConfig, accepted: Sequence[Acceptance]) -> ChangeReport:  # fmt: skip
    """`lumos diff` of the `current` side (schema.inputs.Side) and a proposed schema, without the lineage:
    a ChangeReport. A proposal of more than `max_fields` fields (nested ones counted) is refused: the
    comparison grows with them."""
    from lumos_dagster.reports.changes import diff_report
    from lumos_dagster.schema.inputs import Side
    from lumos_dagster.schema.proposed import ProposalError, ProposalTooLarge, parse_proposal

    too_large = f"{fmt}: the proposed schema has more than {max_fields} fields (api.limits.max_fields)"
    try:  # the budget stops an expanding schema while it is parsed, not after
        proposed = parse_proposal(fmt, schema, max_fields)
    except ProposalTooLarge:
        raise ProposalError(too_large) from None
    if len(proposed.flatten()) > max_fields:
        raise ProposalError(too_large)
    name = current.dataset
    return diff_report(current, Side(f"{name} (proposed)", proposed, None, name), policy, config, proposed=True,
                       acceptances=accepted)  # fmt: skip


# a parser's message quotes what it did not understand (`unknown type 'x'`) and may end in a Python exception's
# text (`KeyError: 'nullable'`): neither goes back to the client; its own quoted words (`expected 'null'`) stay
_QUOTED = re.compile(r"'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\"")
_GRAMMAR = frozenset({"<", ">", "(", ")", ",", ":", "null", "not", "comment", "fields", "type", "properties", "items"})
_RAW = re.compile(r":\s*[A-Z]\w*(?:Error|Exception): .*", re.S)


def _unechoed(message: str, sent: str | dict | list) -> str:
    """`message` without the input it quotes, nor a raw exception's text, in one printable line."""
    text = (sent if isinstance(sent, str) else json.dumps(sent, ensure_ascii=False)).lower()

    def quoted(m: re.Match) -> str:
        word = m[1] if m[1] is not None else m[2]
        return m[0] if word.lower() in _GRAMMAR or word.lower() not in text else "…"

    message = _RAW.sub(": a key is missing or a value has the wrong type", message)
    message = _QUOTED.sub(quoted, message)
    return "".join(c if c.isprintable() else " " for c in message)[:300]


def _change(c: SchemaChange, accepted: str | None = None) -> m.Change:
    return m.Change(**change_to_json(c), accepted=accepted)


def _changeset(reports: Sequence[ChangeReport]) -> m.ChangeSet:
    from lumos_dagster.reports.changes import exit_code, to_json

    return m.ChangeSet(passed=exit_code(reports) == 0, **to_json(reports))


def _unjudged(problem: str) -> m.ChangeSet:
    """The verdict on a proposed schema that could not be read: it does not pass, and `problems` says why."""
    nothing = m.Compatible(backward=False, forward=False)
    return m.ChangeSet(passed=False, compatible=nothing, breaking=0, schemas_changed=0, downstream_affected=[],
                       datasets=[], problems=[problem])  # fmt: skip


class Lumos:
    """The in-process facade. Thread-safe: each call takes a connection of its own."""

    def __init__(self, config: LumosConfig, store_url: str | None = None, connections: int = 4,
                 cache_seconds: float | None = None, timeout: float | None = None):  # fmt: skip
        from lumos_dagster.sources import build_sources
        from lumos_dagster.store import SnapshotStore

        self.config = config
        self.url = store_url or config.store_url
        self.timeout = timeout
        # opening the store the usual way first: it creates or checks its tables (and refuses a
        # store written by a newer Lumos) before anything reads it
        self._writer = SnapshotStore(self.url, f"{config.source_file}: store.url")
        self._writer_lock = threading.Lock()
        self.engine = read_engine(self.url, connections)
        self._health = read_engine(self.url, 1)
        self._roots = {name: s.root for name, s in build_sources(config).items()}
        self._cache = _Cache(config.api.cache_seconds if cache_seconds is None else cache_seconds)

    @classmethod
    def open(cls, config_file: str | None = None, **kwargs) -> Lumos:
        """From lumos.yaml (default: $LUMOS_CONFIG or ./lumos.yaml)."""
        return cls(load_config(config_file), **kwargs)

    def close(self) -> None:
        self.engine.dispose()
        self._health.dispose()
        self._writer.close()

    def __enter__(self) -> Lumos:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------ reading

    @contextmanager
    def view(self) -> Iterator[ReadView]:
        """One read transaction over the store: a SnapshotStore whose reads all see one state."""
        with pinned(self.engine, shown_url(self.url), self.timeout) as v:
            yield v

    def _lineage(self, v: ReadView, fresh: bool = False):
        """(the catalogue: datasets and lineage, its datasets by name), cached."""
        from lumos_dagster.lineage.catalogue import load_catalogue

        def build(view: ReadView):
            catalogue = load_catalogue(self.config, view, self._roots)
            return catalogue, catalogue.by_name()

        if fresh:
            value = build(v)
            self._cache.put("catalogue", v.generation(), value)
            return value
        return self._cache.get("catalogue", v.generation, lambda: build(v), lambda: self._aside("catalogue", build))

    def _catalogue(self, v: ReadView):
        return self._lineage(v)[0]

    def _aside(self, key: str, build: Callable[[ReadView], Any]) -> None:
        with self.view() as v:
            self._cache.put(key, v.generation(), build(v))

    def _spec(self, v: ReadView, name: str):
        spec = self._lineage(v)[1].get(name)
        if spec is None and v.urn_of(name):  # discovered since the cached lineage was built
            spec = self._lineage(v, fresh=True)[1].get(name)
        if spec is None:
            raise NotFound(UNKNOWN_DATASET)
        return spec

    def exists(self, name: str) -> bool:
        """Whether the store knows a dataset by that name."""
        with self.view() as v:
            try:
                self._spec(v, name)
            except NotFound:
                return False
        return True

    def health(self) -> m.Health:
        """Whether the store can be read, on a connection of its own: busy requests holding every
        connection of the pool do not make the server look down."""
        try:
            with pinned(self._health, shown_url(self.url), 5.0) as v:
                v.connection.exec_driver_sql("SELECT 1")
            ok = True
        except Exception:
            log.exception("health: the store cannot be read")
            ok = False
        state: Literal["ok", "unavailable"] = "ok" if ok else "unavailable"
        return m.Health(status=state, store=state, writes=self.config.api.writes, version=_lumos_version())

    def datasets(self, q: str | None = None, platform: str | None = None, domain: str | None = None,
                 offset: int = 0, limit: int = 100) -> m.DatasetPage:  # fmt: skip
        """The datasets (name contains `q`, on `platform`, in `domain`), a page of them, by name."""
        with self.view() as v:
            specs = self._catalogue(v).datasets
            if q:
                q_ = q.lower()
                specs = [d for d in specs if q_ in d.name.lower()]
            if platform:
                specs = [d for d in specs if d.platform == platform]
            if domain:
                specs = [d for d in specs if d.domain == domain]
            specs = sorted(specs, key=lambda d: d.name)
            page = specs[offset : offset + limit]
            docs = v.latest_many([d.ref.urn for d in page])
            found = {s.spec.name: cast(m.Status, s.status) for s in self._standings(v, [d.name for d in page])}
        items = []
        for d in page:
            doc = json.loads(docs[d.ref.urn]) if d.ref.urn in docs else None
            items.append(
                m.DatasetSummary(
                    name=d.name, urn=d.ref.urn, platform=d.platform, format=d.format,
                    domain=(doc or {}).get("domain") or d.domain,
                    version=doc.get("version") if doc else None,
                    partition=doc.get("partition_key") if doc else None,
                    captured_at=doc.get("captured_at") if doc else None,
                    upstream=list(d.upstream),
                    status=found.get(d.name),
                )
            )  # fmt: skip
        return m.DatasetPage(total=len(specs), offset=offset, limit=limit, items=items)

    def dataset(self, name: str) -> m.DatasetDetail:
        """What the store holds of a dataset: its latest capture's schema, version, owners, tags,
        quality and cost, and the capture itself."""
        with self.view() as v:
            spec = self._spec(v, name)
            snap = v.latest(spec.ref.urn)
            standing = next(iter(self._standings(v, [name])), None)
        policy = self.config.policy(name)
        ref = spec.ref
        base = dict(name=name, urn=ref.urn, platform=spec.platform, format=spec.format, upstream=list(spec.upstream))
        if standing is not None:
            base.update(
                status=standing.status,
                checks=[m.CheckInfo(name=c.name, passed=c.passed, severity=cast(Literal["ERROR", "WARN"], c.severity),
                                    description=c.description) for c in standing.checks],
                held_back=f"{standing.held_back[1]} failed {standing.held_back[0]}" if standing.held_back else None,
            )  # fmt: skip
        if snap is None:
            e = spec.enrichment
            return m.DatasetDetail(
                **base, domain=spec.domain, policy=policy, description=e.description or e.default_description,
                owners=[m.OwnerInfo(id=o.id, kind=o.kind, type=o.type) for o in e.owners], tags=list(e.tags),
            )  # fmt: skip
        from lumos_dagster.floor.snapshot_json import snapshot_to_json

        c, q = snap.cost, snap.quality
        return m.DatasetDetail(
            **base,
            domain=snap.domain,
            version=snap.version,
            partition=snap.partition_key,
            captured_at=snap.captured_at,
            description=snap.description,
            owners=[m.OwnerInfo(id=o.id, kind=o.kind, type=o.type) for o in snap.owners],
            tags=list(snap.tags),
            terms=list(snap.terms),
            previous_version=snap.previous_version,
            change_class=snap.change_class,
            policy=snap.policy or policy,
            fields=[
                m.FieldInfo(
                    path=p,
                    type=type_str(f.type),
                    nullable=f.nullable,
                    description=f.description,
                    native_type=f.native_type,
                )
                for p, f in snap.schema.flatten()
            ],  # fmt: skip
            stats=m.StatsInfo(
                file_count=snap.stats.file_count, total_bytes=snap.stats.total_bytes, row_count=snap.stats.row_count
            ),
            quality=None
            if q is None
            else m.QualityInfo(
                score=q.score,
                freshness=q.freshness,
                age_hours=q.age_hours,
                failed=sum(a.status in ("fail", "error") for a in q.assertions),
            ),  # fmt: skip
            cost=None
            if c is None
            else m.CostInfo(
                period=c.period,
                storage=c.storage,
                compute=c.compute,
                inherited=c.inherited,
                direct=c.direct,
                total=c.total,
                method=c.method,
                basis=c.basis,
                currency=c.currency,
            ),  # fmt: skip
            unreadable_files=len(snap.errors),
            snapshot=snapshot_to_json(snap),
        )

    def _standings(self, v: ReadView, names: list[str]):
        """The status of `names`, as `lumos summary` gives it (governance.status), acceptances included:
        not cached, an acceptance counts at once."""
        from lumos_dagster.governance.status import standings

        return standings(self.config, self._catalogue(v), v, names)

    def history(self, name: str) -> list[m.VersionInfo]:
        """The version timeline (`lumos history`): each version, where it appeared, what changed, releases."""
        from lumos_dagster.schema.history import timeline

        with self.view() as v:
            spec = self._spec(v, name)
            entries = timeline(v.history(spec.ref.urn))
            releases = v.releases()
        return [
            m.VersionInfo(
                version=e.version, previous_version=e.previous_version, change_class=e.change_class,
                first_partition=e.first_partition, first_captured=e.first_captured, last_partition=e.last_partition,
                captures=e.captures, releases=[r.name for r in releases if r.versions.get(name) == e.version],
                changes=[_change(c) for c in e.changes],
            )
            for e in entries
        ]  # fmt: skip

    def _side(self, v: ReadView, spec, version: str):
        from lumos_dagster.schema.inputs import Side

        snap = v.latest(spec.ref.urn) if version == "latest" else v.at_version(spec.ref.urn, version)
        if snap is None:
            known = sorted({s.version for s in v.history(spec.ref.urn) if s.version})
            hint = f"known versions: {', '.join(known)}" if known else "the store has no snapshot of it"
            raise NotFound(f"the dataset has no such version ({hint})")
        return Side(f"{spec.name}@{version}", snap.schema, snap, spec.name)

    def _policy(self, name: str, policy: str | None) -> str:
        from lumos_dagster.floor.model import POLICIES

        chosen = (policy or self.config.policy(name)).upper()
        if chosen not in POLICIES:
            raise Invalid(f"unknown policy: one of {', '.join(POLICIES)}")
        return chosen

    def diff(self, name: str, old: str, new: str = "latest", policy: str | None = None) -> m.ChangeSet:
        """`lumos diff NAME@OLD NAME@NEW --format json`."""
        from lumos_dagster.reports.changes import diff_report
        from lumos_dagster.store.acceptances import acceptances

        with self.view() as v:
            spec = self._spec(v, name)
            a, b = self._side(v, spec, old), self._side(v, spec, new)
            catalogue = self._catalogue(v)
            report = diff_report(a, b, self._policy(name, policy), self.config, lambda: catalogue,
                                 acceptances=acceptances(v.connection, [name]))  # fmt: skip
        return _changeset([report])

    def check(self, name: str, fmt: str, schema: str | dict | list, against: str | None = None,
              policy: str | None = None) -> m.ChangeSet:  # fmt: skip
        """Judge a proposed schema for a dataset against its latest version (or `against`) under its
        policy, as `lumos diff` would: whether it passes, each change, what breaks downstream.

        Reading the proposal and comparing it cost what the proposal makes them cost, so both run in
        a worker process killed at the request's deadline (in process outside a request)."""
        from dataclasses import replace

        from lumos_dagster.lineage.impact import downstream
        from lumos_dagster.schema.inputs import Side
        from lumos_dagster.schema.proposed import ProposalError
        from lumos_dagster.store.acceptances import acceptances

        with self.view() as v:
            spec = self._spec(v, name)
            if against is None and v.latest(spec.ref.urn) is None:
                a = Side(f"{name} (never materialized)", Schema(), None, name)
            else:
                a = self._side(v, spec, against or "latest")
            catalogue = self._catalogue(v)
            accepted = acceptances(v.connection, [name])
        args = (fmt, schema, self.config.api.limits.max_fields, a, self._policy(name, policy), self.config, accepted)
        at = limits.until(self.timeout)
        # a body the API's schema allows is answered 200: a proposal that cannot be read is a verdict (it
        # does not pass, and says why), not a refusal of the request
        try:
            report = judge_proposal(*args) if at is None else limits.call(judge_proposal, *args, at=at)
        except ProposalError as exc:
            return _unjudged(_unechoed(str(exc), schema))
        except MemoryError:
            return _unjudged(f"{fmt}: the proposed schema is too large to read")
        if any(c.severity == BREAKING for c in report.changes):  # the lineage stays here: diff_report's part
            report = replace(report, affected=tuple(downstream(catalogue, name)))
        return _changeset([report])

    def gate(self, datasets: list[str] | None = None, since: datetime | None = None,
             partition: str | None = None) -> m.ChangeSet:  # fmt: skip
        """`lumos gate --format json`: the datasets' latest versions judged under their policies."""
        from lumos_dagster.reports.changes import gate_reports
        from lumos_dagster.store.acceptances import acceptances

        with self.view() as v:
            catalogue = self._catalogue(v)
            known = catalogue.by_name()
            names = datasets or list(known)
            unknown = [str(i) for i, n in enumerate(names, 1) if n not in known]
            if unknown:
                raise NotFound(f"unknown dataset(s) in `datasets`, at position(s) {', '.join(unknown[:20])}")
            if since is not None and since.tzinfo is None:
                since = since.replace(tzinfo=timezone.utc)
            accepted = acceptances(v.connection, names if datasets else None)
            reports = gate_reports(self.config, v, catalogue, names, since, partition, accepted)
        return _changeset(reports)

    def impact(self, name: str, depth: int | None = None) -> m.Impact:
        """`lumos impact NAME --format json`: who is downstream, and what the breaking changes do to each."""
        from lumos_dagster.lineage.verdicts import consumer_verdicts

        with self.view() as v:
            spec = self._spec(v, name)
            snap = v.latest(spec.ref.urn)
            catalogue = self._catalogue(v)
        breaking = [c for c in (snap.changes if snap else ()) if c.severity == BREAKING]
        return m.Impact(
            dataset=name,
            version=snap.version if snap else None,
            breaking_changes=[_change(c) for c in breaking],
            downstream=[
                m.ImpactEntry(
                    name=a.name,
                    depth=a.depth,
                    via=a.via,
                    owners=[o.id for o in a.owners],
                    reached_by=list(a.reached_by),
                    verdict=cast(m.Verdict, a.verdict),  # lineage.verdicts gives no other than these three
                    reads=list(a.reads),
                    recommendation=a.recommendation,
                )
                for a in consumer_verdicts(catalogue, name, breaking, depth)
            ],  # fmt: skip
        )

    def fan_out(self, top: int = 10) -> list[m.FanOut]:
        """`lumos impact` without a dataset: the riskiest datasets by downstream fan-out."""
        from lumos_dagster.lineage.impact import fan_out

        with self.view() as v:
            catalogue = self._catalogue(v)
        return [m.FanOut(dataset=n, downstream=k) for n, k in fan_out(catalogue)[:top]]

    def _documents(self, v: ReadView):
        from lumos_dagster.reports.search import SearchIndex, documents

        catalogue = self._catalogue(v)
        docs = v.latest_many([d.ref.urn for d in catalogue.datasets])
        found = documents(catalogue, lambda d: snapshot_loads(docs[d.ref.urn]) if d.ref.urn in docs else None)
        return SearchIndex(found).prepared(), {d.dataset: d for d in found}

    def search(self, q: str = "", platform: str | None = None, owner: str | None = None, tag: str | None = None,
               min_quality: float | None = None, limit: int = 20) -> list[m.SearchHit]:  # fmt: skip
        """`lumos search --format json`: datasets ranked by name, field, description, tag or owner."""
        with self.view() as v:
            index, by_name = self._cache.get(
                "search", v.generation, lambda: self._documents(v), lambda: self._aside("search", self._documents)
            )
        hits = index.search(q, platform=platform, owner=owner, tag=tag, min_quality=min_quality, limit=limit)
        return [
            m.SearchHit(dataset=h.dataset, score=round(h.score, 4), matched=list(h.matched),
                        quality=by_name[h.dataset].quality, description=by_name[h.dataset].description)
            for h in hits
        ]  # fmt: skip

    def cost(self, month: str | None = None) -> m.CostReport:
        """`lumos cost --format json`: by dataset, owner, domain, platform; trend; unconsumed datasets."""
        from lumos_dagster.reports import cost as cost_report

        def build(v: ReadView):
            return cost_report.to_json(cost_report.build(v, self._catalogue(v), month))

        with self.view() as v:
            doc = self._cache.get(f"cost:{month}", v.generation, lambda: build(v),
                                  lambda: self._aside(f"cost:{month}", build))  # fmt: skip
        return m.CostReport(**doc)

    def export(self) -> dict:
        """`lumos export`: the whole estate, history included, as a portable document
        (lumos_dagster/estate.schema.json)."""
        from lumos_dagster.estate import portable

        with self.view() as v:
            estate = portable.from_store(v)
        estate.source = "lumos-api"  # not the store's address
        return portable.to_json(estate)

    def releases(self) -> list[m.Release]:
        with self.view() as v:
            return [m.Release(name=r.name, created_at=r.created_at, versions=r.versions) for r in v.releases()]

    # ------------------------------------------------------------ writing

    def accept(self, name: str, version: str, reason: str, path: str = "*", kind: str | None = None,
               by: str = "python") -> m.Acceptance:  # fmt: skip
        """Accept the breaking changes of `name` at `version` (those at `path`, of `kind`): the gate
        passes them from now on (schema.acceptances), and the dataset's latest capture is judged again
        and delivered when its checks change (DataHub resolves the change's incident)."""
        from lumos_dagster.delivery.catalogs import catalog_names
        from lumos_dagster.run.record import rejudge
        from lumos_dagster.store import acceptances

        with self.view() as v:
            spec = self._spec(v, name)
            if v.at_version(spec.ref.urn, version) is None:
                raise NotFound("the dataset has no such version in the store")
            catalogue = self._catalogue(v)
        with self._writer_lock:
            with self._writer.engine.begin() as conn:
                a = acceptances.record(conn, name, version, path, kind, reason, by)
            rejudge(self._writer, self.config, catalogue, spec, catalog_names(self.config))
        return m.Acceptance(**a.__dict__)

    def release(self, name: str | None = None, datasets: list[str] | None = None) -> m.Release:
        """`lumos release`: record each dataset's current schema version under a release name."""
        from lumos_dagster.schema.history import current_versions, next_release_name
        from lumos_dagster.schema.releases import Manifest, write_manifest

        wanted = set(datasets) if datasets else None
        with self._writer_lock:
            store = self._writer
            versions, missing = current_versions(store, wanted)
            if missing:
                raise NotFound(
                    f"{len(missing)} of the datasets named have no version in the store (materialize them "
                    "first, or check their names against GET /v1/datasets)"
                )
            chosen = name or next_release_name(self.config.releases.prefix, [r.name for r in store.releases()])
            try:
                rel = store.add_release(chosen, versions)
            except LumosError:
                raise Conflict("a release of that name exists; releases are immutable, pick the next name") from None
        if self.config.releases.watch:
            manifest = Manifest(rel.name, rel.created_at, tuple(sorted(wanted)) if wanted else ())
            write_manifest(self.config.resolve_location(self.config.releases.watch), manifest,
                           self.config.releases.endpoint_url)  # fmt: skip
        return m.Release(name=rel.name, created_at=rel.created_at, versions=rel.versions)


__all__ = ["Lumos", "NotFound", "Invalid", "Conflict"]
