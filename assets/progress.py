"""Progress while a run's materializations are recorded: Dagster writes each event as it is
yielded, and a run of hundreds of datasets would otherwise say nothing for most of a minute."""

from __future__ import annotations

import time
from typing import Callable

#: seconds between progress lines while events are recorded
EVERY = 5.0


class Progress:
    def __init__(self, log: Callable[[str], None], total: int, every: float = EVERY, clock=time.monotonic):
        self.log, self.total, self.every, self.clock = log, total, every, clock
        self.count, self.last = 0, clock()

    def step(self, datasets: int = 1) -> None:
        """A dataset's events recorded (or `datasets`): a line when `every` seconds passed since the last."""
        self.count += datasets
        if self.clock() - self.last >= self.every:
            self._line()

    def done(self) -> None:
        """A batch finished: a line when it is the last (short runs say what they recorded too), or
        when `every` seconds passed."""
        if self.count >= self.total or self.clock() - self.last >= self.every:
            self._line()

    def _line(self) -> None:
        self.log(f"recorded {self.count}/{self.total} datasets")
        self.last = self.clock()
