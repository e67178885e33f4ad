"""The compatibility gate: which breaking changes are accepted, which stop a release.

A breaking change is accepted when
* the dataset declares `accept_major: N` and the change leaves its version at a major
  of at most N (a declared, expected major bump), or
* an `allow` rule under `compatibility:` in lumos.yaml matches the dataset, the field
  path and (optionally) the kind, giving a reason, or
* an acceptance recorded for that version of the dataset (`schema.acceptances`, written by
  the API's `POST /v1/dataset/acceptances?name=…`) matches it.

Accepted changes still bump the major version; they just do not fail the gate.

A snapshot is judged under the dataset's policy now, not the one it was versioned under: each
recorded change keeps whether it is backward and forward compatible, so a policy changed in
lumos.yaml re-judges every recorded version (its version number stays what it was).
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Sequence

from lumos_dagster.floor.config import LumosConfig
from lumos_dagster.floor.model import BREAKING, SchemaChange, Snapshot
from lumos_dagster.schema.versioning import judge


def how_to_accept(dataset: str) -> str:
    """The same advice wherever a breaking change is reported: the `schema_compatible` check, the
    failure of a run it stops, `lumos gate`."""
    return (
        f"declare `accept_major` on {dataset}, add a `compatibility.allow` rule in lumos.yaml, or record an "
        f"acceptance through the API (POST /v1/dataset/acceptances?name={dataset}); see `lumos docs compatibility`"
    )


@dataclass(frozen=True)
class Verdict:
    dataset: str
    version: str | None
    policy: str
    breaking: tuple[SchemaChange, ...]
    accepted: tuple[tuple[SchemaChange, str], ...]  # (change, why)
    changes: tuple[SchemaChange, ...] = ()  # all of the snapshot's changes, judged under `policy`

    @property
    def unaccepted(self) -> tuple[SchemaChange, ...]:
        taken = {id(c) for c, _ in self.accepted}
        return tuple(c for c in self.breaking if id(c) not in taken)

    @property
    def passed(self) -> bool:
        return not self.unaccepted


def _major(version: str | None) -> int:
    return int(version.split(".")[0]) if version else 0


def judge_snapshot(config: LumosConfig, snapshot: Snapshot, acceptances: Sequence = (),
                   policy: str | None = None) -> Verdict:  # fmt: skip
    """`acceptances`: breaking changes accepted besides lumos.yaml, each for one dataset version
    (Acceptance, recorded through the API); `policy`: instead of the dataset's (`lumos diff --policy`)."""
    name = snapshot.dataset.name
    policy = policy or config.policy(name)
    changes = judge(snapshot.changes, policy)
    breaking = tuple(c for c in changes if c.severity == BREAKING)
    decl = config.declaration(name)
    accepted = []
    for c in breaking:
        if decl and decl.accept_major is not None and _major(snapshot.version) <= decl.accept_major:
            accepted.append((c, f"expected major bump to {decl.accept_major}.x (accept_major in lumos.yaml)"))
            continue
        rule = next(
            (
                r
                for r in config.compatibility.allow
                if fnmatchcase(name, r.dataset) and fnmatchcase(c.path, r.path) and r.kind in (None, c.kind)
            ),
            None,
        )
        if rule is not None:
            accepted.append((c, f"allowed: {rule.reason}"))
            continue
        taken = next((a for a in acceptances if a.matches(name, snapshot.version, c)), None)
        if taken is not None:
            accepted.append((c, f"accepted by {taken.accepted_by}: {taken.reason}"))
    return Verdict(name, snapshot.version, policy, breaking, tuple(accepted), changes)
