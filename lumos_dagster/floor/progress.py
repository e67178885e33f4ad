"""Progress lines on long work, at most one every few seconds: a listing that pages through an
object store, and the materializations Dagster records (it writes each event as it is yielded: a
run of hundreds of datasets would otherwise say nothing for most of a minute)."""

from __future__ import annotations

import time
from typing import Callable

#: seconds between progress lines
EVERY = 5.0


def _recorded(count: int, total: int) -> str:
    return f"recorded {count}/{total} datasets"


class Progress:
    """Counts datasets through a piece of work; `say(count, total)` is its line."""

    def __init__(self, log: Callable[[str], None], total: int, every: float = EVERY,
                 clock: Callable[[], float] = time.monotonic, say: Callable[[int, int], str] = _recorded):  # fmt: skip
        self.log, self.total, self.every, self.clock, self.say = log, total, every, clock, say
        self.count, self.last = 0, clock()

    def step(self, datasets: int = 1) -> None:
        """A dataset through (or `datasets`): a line when `every` seconds passed since the last."""
        self.count += datasets
        if self.clock() - self.last >= self.every:
            self._line()

    def done(self) -> None:
        """A batch finished: a line when it is the last (short runs say what they recorded too), or
        when `every` seconds passed."""
        if self.count >= self.total or self.clock() - self.last >= self.every:
            self._line()

    def _line(self) -> None:
        self.log(self.say(self.count, self.total))
        self.last = self.clock()
