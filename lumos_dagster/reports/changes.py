"""Schema change reports for people and machines: text, JSON, and a pull-request comment.

Used by `lumos diff` (one pair) and `lumos gate` (every dataset a run changed).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

from lumos_dagster.floor.model import BREAKING, INFORMATIONAL, SchemaChange
from lumos_dagster.floor.snapshot_json import change_to_json
from lumos_dagster.floor.wording import visible
from lumos_dagster.lineage.impact import Affected
from lumos_dagster.schema.gate import how_to_accept

if TYPE_CHECKING:  # for the annotations only
    from lumos_dagster.floor.config import LumosConfig
    from lumos_dagster.floor.dataset_specs import Catalogue
    from lumos_dagster.floor.model import Acceptance
    from lumos_dagster.schema.inputs import Side
    from lumos_dagster.store.roles import HistoryStore


@dataclass(frozen=True)
class ChangeReport:
    name: str  # dataset name, or "OLD → NEW" for a diff of files
    old_version: str | None
    new_version: str | None
    change_class: str | None
    policy: str
    changes: tuple[SchemaChange, ...]
    accepted: tuple[tuple[SchemaChange, str], ...] = ()
    affected: tuple[Affected, ...] = field(default_factory=tuple)
    of_dataset: bool = True  # False for a diff of two files: nothing in lumos.yaml names them

    @property
    def unaccepted(self) -> list[SchemaChange]:
        taken = {id(c) for c, _ in self.accepted}
        return [c for c in self.changes if c.severity == BREAKING and id(c) not in taken]

    @property
    def schema_changes(self) -> list[SchemaChange]:
        return [c for c in self.changes if c.severity != INFORMATIONAL]


def breaking_count(reports: Sequence[ChangeReport]) -> int:
    return sum(len(r.unaccepted) for r in reports)


def exit_code(reports: Sequence[ChangeReport]) -> int:
    """0: nothing breaks under the policy (or all of it is accepted); 1: something breaks."""
    return 1 if breaking_count(reports) else 0


def _affected(reports: Sequence[ChangeReport]) -> set[str]:
    return {a.name for r in reports if r.unaccepted for a in r.affected}


def to_json(reports: Sequence[ChangeReport]) -> dict:
    changes = [c for r in reports for c in r.changes]
    return {
        "compatible": {
            "backward": all(c.backward for c in changes),
            "forward": all(c.forward for c in changes),
        },
        "breaking": breaking_count(reports),
        "schemas_changed": sum(1 for r in reports if r.schema_changes),
        "downstream_affected": sorted(_affected(reports)),
        "datasets": [
            {
                "name": r.name,
                "policy": r.policy,
                "old_version": r.old_version,
                "new_version": r.new_version,
                "change_class": r.change_class,
                "compatible": {
                    "backward": all(c.backward for c in r.changes),
                    "forward": all(c.forward for c in r.changes),
                },
                "changes": [
                    {**change_to_json(c), "accepted": next((why for a, why in r.accepted if a is c), None)}
                    for c in r.changes
                ],
                "downstream": [
                    {"name": a.name, "depth": a.depth, "via": a.via, "owners": [o.id for o in a.owners]}
                    for a in r.affected
                ],
            }
            for r in reports
        ],
    }


def _headline(reports: Sequence[ChangeReport]) -> str:
    altered = sum(1 for r in reports if r.schema_changes)
    breaking = sum(1 for r in reports if r.unaccepted)
    return (
        f"This change alters {altered} schema{'s' if altered != 1 else ''}, {breaking} breaking, "
        f"affecting {len(_affected(reports))} downstream dataset{'s' if len(_affected(reports)) != 1 else ''}."
    )


def _versions(r: ChangeReport) -> str:
    if r.old_version or r.new_version:
        return f"{r.old_version or '-'} → {r.new_version or '-'} ({r.change_class or 'none'})"
    return r.change_class or ""


def _verdict(r: ChangeReport, c: SchemaChange) -> str:
    why = next((w for a, w in r.accepted if a is c), None)
    return f"accepted: {why}" if why else c.severity


def to_text(reports: Sequence[ChangeReport]) -> str:
    lines = [_headline(reports)]
    for r in reports:
        lines += ["", f"{r.name}  {_versions(r)}  policy {r.policy}"]
        if not r.changes:
            lines.append("  no changes")
        for c in r.changes:
            lines.append(
                f"  {_verdict(r, c):<14} {c.kind:<24} {c.path or '(dataset)'}: {c.old or '-'} → {c.new or '-'}"
                f"  [backward {'ok' if c.backward else 'BREAKS'}, forward {'ok' if c.forward else 'BREAKS'}]"
                + (f" (against {c.against})" if c.against else "")
            )
        if r.unaccepted and r.affected:
            lines.append("  downstream: " + ", ".join(f"{a.name} (depth {a.depth})" for a in r.affected))
        if r.unaccepted and r.of_dataset:
            lines.append(f"  to accept: {how_to_accept(r.name)}")
    return "\n".join(map(visible, lines))  # a line each: a name's newline must not start one


def to_markdown(reports: Sequence[ChangeReport]) -> str:
    broken = breaking_count(reports)
    status = f"❌ {broken} breaking change{'s' if broken != 1 else ''}" if broken else "✅ compatible"
    lines = [
        f"### Lumos schema check: {status}",
        "",
        _headline(reports),
    ]
    for r in reports:
        if not r.changes:
            continue
        status = "BREAKING" if r.unaccepted else "compatible"
        lines += ["", f"#### `{r.name}` {_versions(r)} — {status} under {r.policy}", ""]
        lines += ["| verdict | change | field | old → new | backward | forward |", "|---|---|---|---|---|---|"]
        for c in r.changes:
            lines.append(
                f"| {_verdict(r, c)} | {c.kind} | `{c.path or '(dataset)'}` | {c.old or '-'} → {c.new or '-'} "
                f"| {'✅' if c.backward else '❌'} | {'✅' if c.forward else '❌'} |"
            )
        if r.unaccepted and r.affected:
            lines += [
                "",
                "Downstream: "
                + ", ".join(
                    f"`{a.name}` (depth {a.depth}{', ' + ', '.join(o.id for o in a.owners) if a.owners else ''})"
                    for a in r.affected
                ),
            ]
    for r in reports:
        if r.unaccepted and r.of_dataset:
            lines += ["", f"To accept the changes of `{r.name}`: {how_to_accept(r.name)}."]
    return "\n".join(map(visible, lines))  # a line each: a name's newline must not start one


def render(reports: Sequence[ChangeReport], fmt: str) -> str:
    if fmt == "json":
        return json.dumps(to_json(reports), indent=2)
    return to_markdown(reports) if fmt == "markdown" else to_text(reports)


# ------------------------------------------------------------------ building reports
# what `lumos diff` and `lumos gate` judge, without the printing: the API answers from these too


def diff_report(
    a: Side,
    b: Side,
    policy: str,
    config: LumosConfig | None = None,
    catalogue: Callable[[], Catalogue] | None = None,
    proposed: bool = False,
    acceptances: Sequence[Acceptance] = (),
) -> ChangeReport:
    """`lumos diff` of two sides (schema.inputs.Side) under `policy`. With `config` and a dataset name,
    the changes lumos.yaml (or `acceptances`) accepts are marked, and a breaking change lists the
    datasets downstream (`catalogue()` gives the lineage, read only then). `proposed`: `b` is a
    proposed schema for `a`'s dataset: it is judged as `a`'s snapshot with `b`'s schema would be."""
    from dataclasses import replace

    from lumos_dagster.lineage.impact import downstream
    from lumos_dagster.schema.diff import diff_schemas, diff_snapshots
    from lumos_dagster.schema.gate import judge_snapshot
    from lumos_dagster.schema.versioning import bump, change_class, judge

    name = b.dataset or a.dataset
    raw = diff_snapshots(a.snapshot, b.snapshot) if a.snapshot and b.snapshot else diff_schemas(a.schema, b.schema)
    changes = judge(raw, policy)
    cls = change_class(changes)
    old_version = a.snapshot.version if a.snapshot else None
    new_version = b.snapshot.version if b.snapshot else (bump(old_version, cls) if old_version else None)
    affected: tuple = ()
    accepted: tuple = ()
    if config and name:
        if catalogue is not None and any(c.severity == BREAKING for c in changes):
            affected = tuple(downstream(catalogue(), name))
        judged = b.snapshot or (replace(a.snapshot, schema=b.schema) if proposed and a.snapshot else None)
        if judged is not None:
            verdict = judge_snapshot(config, replace(judged, changes=changes, version=new_version), acceptances, policy)
            changes, accepted = verdict.changes, verdict.accepted
    label = name or f"{a.label} → {b.label}"
    return ChangeReport(
        label, old_version, new_version, cls, policy, changes, accepted, affected, of_dataset=bool(name)
    )


def gate_reports(
    config: LumosConfig,
    store: HistoryStore,
    catalogue: Catalogue,
    names: Iterable[str],
    cutoff: datetime | None = None,
    partition: str | None = None,
    acceptances: Sequence[Acceptance] = (),
) -> list[ChangeReport]:
    """`lumos gate`: each named dataset's latest version judged under its policy (only versions first
    seen after `cutoff`, when given); `acceptances` (schema.acceptances) accept changes besides lumos.yaml."""
    from lumos_dagster.lineage.impact import downstream
    from lumos_dagster.schema.gate import judge_snapshot
    from lumos_dagster.schema.history import timeline

    known = catalogue.by_name()
    reports = []
    for name in names:
        spec = known[name]
        snap = store.latest(spec.ref.urn, partition)
        if snap is None or not snap.changes:
            continue
        introduced = next((e for e in timeline(store.history(spec.ref.urn)) if e.version == snap.version), None)
        if cutoff is not None and introduced is not None and introduced.first_captured < cutoff:
            continue
        verdict = judge_snapshot(config, snap, acceptances)
        affected = tuple(downstream(catalogue, name)) if verdict.breaking else ()
        reports.append(
            ChangeReport(
                name,
                snap.previous_version,
                snap.version,
                snap.change_class,
                verdict.policy,  # the dataset's policy now: a policy changed since re-judges the version
                verdict.changes,
                verdict.accepted,
                affected,
            )
        )
    return reports
