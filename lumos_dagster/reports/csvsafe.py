"""CSV that a spreadsheet opens as data: a text cell has its control characters made visible
(`wording.visible`), and one that would start a formula (`=1+1`, `@SUM(…)`, `-2+3`) gets a leading
`'`, as OWASP advises against CSV injection; numbers, negative ones included, stay as they are."""

from __future__ import annotations

import csv
import re
from typing import Any, Iterable

from lumos_dagster.floor.wording import visible

_FORMULA = re.compile(r"[=+\-@]")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def cell(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    value = visible(value)
    return "'" + value if _FORMULA.match(value) and not _NUMBER.fullmatch(value) else value


class SafeWriter:
    """`csv.writer` whose cells go through `cell`."""

    def __init__(self, handle: Any):
        self._writer = csv.writer(handle)

    def writerow(self, row: Iterable[Any]) -> None:
        self._writer.writerow([cell(v) for v in row])

    def writerows(self, rows: Iterable[Iterable[Any]]) -> None:
        for row in rows:
            self.writerow(row)
