"""The `store` and `judge` steps, in one transaction of the store: each capture is versioned once,
against what the store holds at that moment, and judged on that version.

Versions follow partition time (`schema.versioning.slot`): a capture is versioned against its
dataset's capture before it in partition order, whatever order runs finish in, and a stored
capture of a later partition is versioned again against its new predecessor (queued again when
it is what the catalogs show). The checks then judge the versions so decided, under the datasets'
policies now: the run's own captures, and a dataset's newest capture when it is of a later partition
(what the catalogs show, and `lumos gate` judges), as the store has just versioned it. A dataset held
back by an upstream failing a blocking check is not stored: it is recorded and judged when a later
run lets it through.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping, Sequence

from lumos_dagster.floor.config import LumosConfig
from lumos_dagster.floor.dataset_specs import Catalogue, DatasetSpec
from lumos_dagster.floor.model import CheckResult, Snapshot, Snapshots
from lumos_dagster.governance.checks import READABLE_CHECK, CheckOutcome, Judgement, Table, has_data, judge, readable
from lumos_dagster.schema.versioning import slot
from lumos_dagster.store.roles import HistoryStore
from lumos_dagster.store.store import Versioning


@dataclass(frozen=True)
class Recorded:
    """What the store kept: each dataset's partitions as versioned (those without data as observed),
    and each dataset's judgement."""

    snapshots: Snapshots
    judgements: Mapping[str, Judgement]


def _versioned(v: Versioning, captures: Sequence[Snapshot]):
    """(the captures versioned, in their order; stored captures whose version moved (id, capture);
    stored captures to queue again (id, urn, partition key); urn → its newest capture of a later
    partition than the captures', as versioned now)."""
    by_urn: dict[str, list[int]] = {}
    for i, s in enumerate(captures):
        by_urn.setdefault(s.dataset.urn, []).append(i)
    firsts = {urn: min(captures[i].partition_key or "" for i in at) for urn, at in by_urn.items()}
    full = [u for u, at in by_urn.items() if any((captures[i].policy or "").endswith("_TRANSITIVE") for i in at)]
    before, after = v.before(firsts, full), v.after(firsts)
    out: list[Snapshot] = list(captures)
    moved: list[tuple[int, Snapshot]] = []
    requeue: list[tuple[int, str, str]] = []
    newest: dict[str, Snapshot] = {}
    for urn, at in by_urn.items():
        past, later = before.get(urn, []), after.get(urn, [])
        versioned, changed = slot(past + [s for _, s in later], [captures[i] for i in at])
        for i, s in zip(at, versioned, strict=True):
            out[i] = s
        moved += [(later[j - len(past)][0], s) for j, s in changed.items()]
        last = len(past) + len(later) - 1
        if later and (later[-1][1].partition_key or "") > max(s.partition_key or "" for s in versioned):
            newest[urn] = changed.get(last, later[-1][1])
            if last in changed:
                requeue.append((later[-1][0], urn, later[-1][1].partition_key or ""))
    return out, moved, requeue, newest


def record(store: HistoryStore, config: LumosConfig, catalogue: Catalogue, datasets: Sequence[DatasetSpec],
           snapshots: Snapshots, catalogs: Sequence[str]) -> Recorded:  # fmt: skip
    """Version, judge and store `snapshots` (of `datasets`, lineage order), queued for `catalogs`. A
    partition with no files is not a snapshot: neither versioned, stored nor queued, only judged."""
    cells = [(d.name, pk) for d in datasets for pk, s in snapshots[d.name].items() if has_data(s)]
    captures = [snapshots[name][pk] for name, pk in cells]
    urns = {s.dataset.urn: name for (name, _), s in zip(cells, captures, strict=True)}
    with store.versioning(urns) as v:
        versioned, moved, requeue, newest = _versioned(v, captures)
        kept: Snapshots = {d.name: dict(snapshots[d.name]) for d in datasets}
        for (name, pk), s in zip(cells, versioned, strict=True):
            kept[name][pk] = s
        later = {d.name: {s.partition_key: s} for d in datasets if (s := newest.get(d.ref.urn)) is not None}
        judged = {d.name: {**later.get(d.name, {}), **kept[d.name]} for d in datasets}
        unread = v.unread(list(urns))  # past partitions whose files could not all be read stay in the check
        past = {urns[urn]: captures for urn, captures in unread.items()}
        judgements = judge(config, catalogue, datasets, judged, v.acceptances([d.name for d in datasets]),
                           unread=past)  # fmt: skip
        held = {name for name, j in judgements.items() if j.held_back is not None}
        roots = {d.name: d.source_root for d in datasets}
        judged_captures = [with_checks(s, judgements[name], roots[name]) for (name, _), s in zip(cells, versioned,
                                                                                              strict=True)]  # fmt: skip
        v.put([s for (name, _), s in zip(cells, judged_captures, strict=True) if name not in held], catalogs)
        v.revise([(sid, s) for sid, s in moved if urns[s.dataset.urn] not in held])
        v.queue([entry for entry in requeue if urns[entry[1]] not in held], catalogs)  # after the new ones
    return Recorded(kept, judgements)


def rejudge(store: HistoryStore, config: LumosConfig, catalogue: Catalogue, dataset: DatasetSpec,
            catalogs: Sequence[str]) -> Snapshot | None:  # fmt: skip
    """The dataset's latest capture judged again under today's acceptances (one recorded after its run):
    when its checks come out otherwise, the stored capture gets them and is queued for `catalogs` again,
    so the catalogs show them (DataHub resolves the incident of a breaking change now accepted).
    Returns the capture so revised, None when its checks stand."""
    urn = dataset.ref.urn
    with store.versioning([urn]) as v:
        found = v.latest(urn)
        if found is None:
            return None
        sid, s = found
        past = {dataset.name: v.unread([urn]).get(urn, [])}
        judgement = judge(config, catalogue, [dataset], {dataset.name: {s.partition_key: s}},
                          v.acceptances([dataset.name]), unread=past)[dataset.name]  # fmt: skip
        revised = with_checks(s, judgement, dataset.source_root)
        if revised.checks == s.checks:
            return None
        v.revise([(sid, revised)])
        v.queue([(sid, urn, s.partition_key or "")], catalogs)
    return revised


def with_checks(s: Snapshot, judgement: Judgement, root: str | None) -> Snapshot:
    """The capture with its dataset's checks, as catalogs show them; its files' readability its own
    partition's (a backfill judges every partition's files together)."""
    results = tuple(
        CheckResult(c.name, c.passed, c.severity, c.description, _affected(c))
        for c in (readable({s.partition_key: s}, root) if c.name == READABLE_CHECK else c for c in judgement.checks)
    )
    return replace(s, checks=results)


def _affected(c: CheckOutcome) -> tuple[str, ...]:
    table = c.metadata.get("lumos/downstream")
    return tuple(row[0] for row in table.rows) if isinstance(table, Table) else ()


def store_versioned(store: HistoryStore, snapshots: Sequence[Snapshot], catalogs: Sequence[str] = ()) -> list[Snapshot]:
    """Store new captures versioned as a run does, without judging them (imports of history, tests):
    the captures as stored, in their order."""
    with store.versioning({s.dataset.urn for s in snapshots}) as v:
        versioned, moved, requeue, _ = _versioned(v, snapshots)
        v.put(versioned, catalogs)
        v.revise(moved)
        v.queue(requeue, catalogs)
    return versioned
