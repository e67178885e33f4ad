"""What a scan did: counted, printed at the end, attached to the materialization."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Sequence

from lumos_dagster.floor.wording import visible

SAMPLES = 5
#: failures printed one a line; past these, one line counts the others by reason (100,000 unreadable files
#: were 100,000 lines, 7.8 MB)
FAILURES_SHOWN = 10


def failure_lines(failures: Sequence[tuple[str, str]], shown: int = FAILURES_SHOWN) -> list[str]:
    """`where: reason` for the first `shown` failures, then one line for the rest, their commonest reasons
    counted."""
    lines = [f"{where}: {reason}" for where, reason in failures[:shown]]
    rest = Counter(reason for _, reason in failures[shown:])
    if rest:
        common = "; ".join(f"{n:,} × {reason}" for reason, n in rest.most_common(3))
        others = sum(rest.values()) - sum(n for _, n in rest.most_common(3))
        lines.append(f"and {sum(rest.values()):,} more: {common}" + (f"; {others:,} × other reasons" if others else ""))
    return lines


@dataclass
class ScanReport:
    files_listed: int = 0
    files_read: int = 0
    datasets_found: int = 0
    datasets_failed: int = 0
    skipped: Counter = field(default_factory=Counter)  # reason → count
    skipped_samples: dict[str, list[str]] = field(default_factory=dict)
    failures: list[tuple[str, str]] = field(default_factory=list)  # (path or source, reason)
    notes: Counter = field(default_factory=Counter)  # what is worth knowing but not a failure → count
    note_samples: dict[str, list[str]] = field(default_factory=dict)
    _failed: set[tuple[str, str]] = field(default_factory=set, init=False, repr=False, compare=False)

    def skip(self, path: str, reason: str) -> None:
        self.skipped[reason] += 1
        samples = self.skipped_samples.setdefault(reason, [])
        if len(samples) < SAMPLES:
            samples.append(path)

    def note(self, path: str, note: str) -> None:
        self.notes[note] += 1
        samples = self.note_samples.setdefault(note, [])
        if len(samples) < SAMPLES:
            samples.append(path)

    def fail(self, where: str, reason: str) -> None:
        # a file read for several partitions of one run fails once, not once per partition
        if (where, reason) not in self._failed:
            self._failed.add((where, reason))
            self.failures.append((where, reason))

    def add(self, other: ScanReport) -> None:
        """Count `other` in too (an op's batches make one report)."""
        for name in ("files_listed", "files_read", "datasets_found", "datasets_failed"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for counts, samples, theirs, their_samples in (
            (self.skipped, self.skipped_samples, other.skipped, other.skipped_samples),
            (self.notes, self.note_samples, other.notes, other.note_samples),
        ):
            counts.update(theirs)
            for key, paths in their_samples.items():
                kept = samples.setdefault(key, [])
                kept.extend(paths[: SAMPLES - len(kept)])
        for where, reason in other.failures:
            self.fail(where, reason)

    @property
    def ok(self) -> bool:
        return not self.failures

    def render(self) -> str:
        lines = [
            f"files listed    {self.files_listed}",
            f"files read      {self.files_read}",
            f"datasets found  {self.datasets_found}",
            f"datasets failed {self.datasets_failed}",
        ]
        for reason, n in self.skipped.most_common():
            lines.append(f"skipped {n:>6}  {reason} (e.g. {', '.join(self.skipped_samples[reason][:2])})")
        for note, n in self.notes.most_common():
            lines.append(f"note    {n:>6}  {note} (e.g. {', '.join(self.note_samples[note][:2])})")
        lines += [f"FAILED  {line}" for line in failure_lines(self.failures)]
        return "\n".join(map(visible, lines))  # a line each: a path's newline must not start one
