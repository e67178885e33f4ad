"""The `judge` step: each dataset's checks — files readable, schema compatible (the gate), required
documentation complete, data quality — and which datasets a failed blocking check holds back.

Outcomes are plain values: the Dagster op turns them into asset check evaluations, `lumos summary`
prints them. A blocking check stops the datasets downstream of it in the same run (lineage order).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence, TypeVar

from lumos_dagster.floor.config import LumosConfig
from lumos_dagster.floor.dataset_specs import Catalogue, DatasetSpec
from lumos_dagster.floor.model import (  # noqa: F401  the check names: the checks' own
    COMPATIBLE_CHECK,
    COMPLETE_CHECK,
    QUALITY_CHECK,
    READABLE_CHECK,
    SchemaChange,
    Snapshot,
)
from lumos_dagster.floor.wording import few, plural, visible
from lumos_dagster.governance.rules import has_quality_sources, missing_context, required_of
from lumos_dagster.lineage.impact import Affected, downstream
from lumos_dagster.schema.gate import Verdict, how_to_accept, judge_snapshot

T = TypeVar("T")

ERROR, WARN = "ERROR", "WARN"


@dataclass(frozen=True)
class Table:
    """Rows for people: shown as a markdown table in Dagster."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class CheckOutcome:
    name: str
    passed: bool
    severity: str  # ERROR | WARN
    description: str
    metadata: Mapping[str, int | float | str | Table] = field(default_factory=dict)


@dataclass(frozen=True)
class Judgement:
    checks: tuple[CheckOutcome, ...]
    held_back: tuple[str, str] | None = None  # (blocking check failed, by which upstream dataset)

    def failed_blocking(self, blocking: frozenset[str]) -> str | None:
        return next((c.name for c in self.checks if not c.passed and c.name in blocking), None)


CHANGE_HEADER = ("severity", "change", "field", "old → new", "backward", "forward")


def change_rows(changes: Sequence[SchemaChange]) -> tuple[tuple[str, ...], ...]:
    return tuple(
        (c.severity, c.kind, f"`{c.path or '(dataset)'}`", f"{c.old or '-'} → {c.new or '-'}",
         "yes" if c.backward else "no", "yes" if c.forward else "no")
        for c in changes
    )  # fmt: skip


def error_rows(snapshots: Mapping[str | None, Snapshot], root: str | None = None) -> tuple[tuple[str, ...], ...]:
    """(file, reason) rows, each once (an undated file is in every partition of a backfill); paths under
    `root` (the source's) relative to it, so the reason has room."""

    def shown(path: str) -> str:
        return path[len(root) :].lstrip("/") if root and path.startswith(root.rstrip("/") + "/") else path

    return tuple(dict.fromkeys((f"`{shown(e.path)}`", e.reason) for s in snapshots.values() for e in s.errors))


def has_data(s: Snapshot) -> bool:
    """Whether there was anything to snapshot: a schema, or files that failed to give one. A day whose
    files have not landed has neither; it is neither stored, delivered nor materialized."""
    return bool(s.schema.fields or s.errors)


def required_mode(config: LumosConfig, name: str) -> str | None:
    """warn | block when lumos.yaml requires documentation of this dataset, else None."""
    required = config.governance.required
    return required.mode if required_of(name, required) else None


def check_names(config: LumosConfig, d: DatasetSpec) -> tuple[str, ...]:
    """The checks a dataset has: the same at definition time and when judged."""
    names = [READABLE_CHECK, COMPATIBLE_CHECK]
    if required_mode(config, d.name) is not None:
        names.append(COMPLETE_CHECK)
    if has_quality_sources(config) or d.profile is not None:
        names.append(QUALITY_CHECK)
    return tuple(names)


def blocking_checks(config: LumosConfig) -> frozenset[str]:
    return frozenset({COMPATIBLE_CHECK} | ({COMPLETE_CHECK} if config.governance.required.mode == "block" else set()))


def readable(snapshots: Mapping[str | None, Snapshot], root: str | None = None) -> CheckOutcome:
    errors = error_rows(snapshots, root)
    unreadable = [pk or "now" for pk, s in snapshots.items() if s.errors and not s.readable]
    failing = [pk or "now" for pk, s in snapshots.items() if s.errors]
    empty = sorted(pk or "now" for pk, s in snapshots.items() if not has_data(s))
    where = f" in {few(failing)}" if failing != ["now"] else ""
    problems = [f"{len(errors)} file(s) could not be read{where}"
                + (f"; no schema could be taken for {few(unreadable)}" if unreadable else "")]  # fmt: skip
    # a day without files is no failure to read (`lumos summary` agrees): said, and left unmaterialized
    notes = [f"no files for {', '.join(empty)}: not snapshotted"] if empty else []
    return CheckOutcome(
        READABLE_CHECK,
        passed=not errors,
        severity=ERROR if unreadable else WARN,
        description="; ".join(notes + (problems if errors else [])) or "every file was read",
        metadata={"lumos/errors": Table(("file", "reason"), errors)} if errors else {},
    )


def _once_per_version(found: Iterable[tuple[str | None, SchemaChange, T]]) -> list[T]:
    """Each (version, change, item) once per version and change: the partitions of a backfill that
    hold one version (a table's commit, a file rewritten once) all carry its changes."""
    seen: set[tuple] = set()
    out = []
    for version, c, item in found:
        key = (version, c.path, c.kind, c.old, c.new)
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


def compatible(verdicts: Sequence[Verdict], affected: Sequence[Affected]) -> CheckOutcome:
    unaccepted = _once_per_version((v.version, c, c) for v in verdicts for c in v.unaccepted)
    accepted = _once_per_version((v.version, c, (c, why)) for v in verdicts for c, why in v.accepted)
    metadata: dict = {"lumos/breaking": len(unaccepted)}
    if unaccepted:
        metadata["lumos/unaccepted"] = Table(CHANGE_HEADER, change_rows(unaccepted))
        metadata["lumos/downstream"] = Table(
            ("dataset", "depth", "owners"),
            tuple((a.name, str(a.depth), ", ".join(o.id for o in a.owners) or "-") for a in affected),
        )
    if accepted:
        metadata["lumos/accepted"] = Table(
            ("change", "field", "why"), tuple((c.kind, c.path, why) for c, why in accepted)
        )
    policy = verdicts[-1].policy if verdicts else "FULL"
    # the fields by name: this description is also what a run stopped by the check fails with
    named = ", ".join(dict.fromkeys(f"{c.kind} {c.path or '(dataset)'}" for c in unaccepted))
    return CheckOutcome(
        COMPATIBLE_CHECK,
        passed=not unaccepted,
        severity=ERROR,
        description=(
            f"{plural(len(unaccepted), 'breaking change')} under {policy} ({named}), affecting "
            f"{plural(len(affected), 'downstream dataset')}; to accept: {how_to_accept(verdicts[-1].dataset)}"
            if unaccepted
            else f"compatible under {policy}"
            + (f" ({plural(len(accepted), 'accepted breaking change')})" if accepted else "")
        ),
        metadata=metadata,
    )


def complete(snapshot: Snapshot, config: LumosConfig) -> CheckOutcome:
    required = config.governance.required
    missing = missing_context(snapshot, required) or []
    return CheckOutcome(
        COMPLETE_CHECK,
        passed=not missing,
        severity=ERROR if required.mode == "block" else WARN,
        description=f"missing: {'; '.join(missing)}" if missing else "documented as required",
        metadata={"lumos/missing": "; ".join(missing)} if missing else {},
    )


def quality(snapshot: Snapshot, min_score: float) -> CheckOutcome:
    q = snapshot.quality
    failed = [a for a in q.assertions if a.status in ("fail", "error")] if q else []
    problems = [f"{len(failed)} failed test(s)"] if failed else []
    if q is not None and q.score is not None and q.score < min_score:
        problems.append(f"score {q.score:.2f} < {min_score}")
    if q is not None and q.freshness == "stale":
        problems.append(f"stale ({q.age_hours:g} h old, SLA {snapshot.sla})")
    metadata: dict = {}
    if q is not None and q.score is not None:
        metadata["lumos/quality_score"] = round(q.score, 3)
    if failed:
        metadata["lumos/failed"] = Table(
            ("check", "column", "from", "message"),
            tuple((a.name, a.column or "-", a.source, a.message or "") for a in failed),
        )
    return CheckOutcome(
        QUALITY_CHECK,
        passed=not problems,
        severity=ERROR if failed else WARN,
        description="; ".join(problems) if problems else "tests pass, fresh",
        metadata=metadata,
    )


def dataset_checks(config: LumosConfig, catalogue: Catalogue, d: DatasetSpec, snaps: Mapping[str | None, Snapshot],
                   accepted: Sequence = ()) -> tuple[CheckOutcome, ...]:  # fmt: skip
    """A dataset's checks over its snapshots judged together (partition → snapshot, oldest first):
    what a run yields to Dagster, and what `lumos summary` shows for the snapshots stored."""
    last = list(snaps.values())[-1]
    verdicts = [judge_snapshot(config, s, accepted) for s in snaps.values()]
    breaking = any(v.unaccepted for v in verdicts)
    checks = [
        readable(snaps, d.source_root),
        compatible(verdicts, downstream(catalogue, d.name) if breaking else ()),
    ]
    names = check_names(config, d)
    if COMPLETE_CHECK in names:
        checks.append(complete(last, config))
    if QUALITY_CHECK in names and last.quality is not None:  # no evidence: not evaluated rather than "passed"
        checks.append(quality(last, config.quality.min_score))
    return tuple(checks)


def judge(config: LumosConfig, catalogue: Catalogue, datasets: Sequence[DatasetSpec],
          snapshots: Mapping[str, Mapping[str | None, Snapshot]], accepted: Sequence = (),
          held: Callable[[DatasetSpec, str], bool] | None = None,
          unread: Mapping[str, Sequence[Snapshot]] | None = None) -> dict[str, Judgement]:  # fmt: skip
    """Each dataset's checks over its snapshots (`datasets` in lineage order, each one's partitions
    in any order): a dataset downstream of one failing a blocking check is held back instead, when
    `held(dataset, failing upstream)` (default: always, as in a run, which stops there). A dataset
    without snapshots has no checks. `unread`: name → the latest captures of its partitions that could
    not read some files (the store's `unread`): those of other partitions stay in its files_readable
    check, naming their partitions, until a capture of theirs reads every file."""
    blocking = blocking_checks(config)
    blocked: dict[str, tuple[str, str]] = {}  # dataset → (blocking check failed, by which dataset)
    out: dict[str, Judgement] = {}
    for d in datasets:  # lineage order: an upstream is judged before its consumers
        stop = next((blocked[u] for u in d.upstream if u in blocked), None)
        if stop is not None and (held is None or held(d, stop[1])):
            blocked[d.name] = stop
            out[d.name] = Judgement((), held_back=stop)
            continue
        snaps = snapshots.get(d.name)
        if not snaps:
            out[d.name] = Judgement(())
            continue
        ordered = {pk: snaps[pk] for pk in sorted(snaps, key=lambda k: k or "")}
        checks = dataset_checks(config, catalogue, d, ordered, accepted)
        past = {s.partition_key: s for s in (unread or {}).get(d.name, ()) if s.partition_key not in snaps}
        if past:
            every = {pk: s for pk, s in sorted({**past, **snaps}.items(), key=lambda kv: kv[0] or "")}
            checks = tuple(readable(every, d.source_root) if c.name == READABLE_CHECK else c for c in checks)
        judgement = Judgement(checks)
        failed = judgement.failed_blocking(blocking)
        if failed is not None:
            blocked[d.name] = (failed, d.name)
        out[d.name] = judgement
    return out


def failure_message(judgements: Mapping[str, Judgement], blocking: frozenset[str]) -> str | None:
    """What failed blocking checks stop, naming dataset, check and what it found (for a breaking
    change: kind and field), and the datasets they held back; None when nothing was stopped. Dagster's
    own error names only the check."""
    failed = [
        f"{name}: {c.name} failed: {c.description}"
        for name, j in judgements.items()
        for c in j.checks
        if not c.passed and c.severity == ERROR and c.name in blocking
    ]
    if not failed:
        return None
    held = [
        f"{name} (upstream {j.held_back[1]} failed {j.held_back[0]})" for name, j in judgements.items() if j.held_back
    ]
    return "\n".join(map(visible, failed + ([f"held back: {', '.join(held)}"] if held else [])))
