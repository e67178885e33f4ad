"""Which Hive-style partition folders drive time, and at what granularity.

* `year=/month=/day=` together are one date (`year/month/day`, values may be unpadded);
* otherwise a key whose values are dates: `dt=`, `date=`, `ds=` first, then any other;
* a few odd folders beside the dates (Hive's null partition, an empty `dt=`, `dt=2026-13-45`, a file
  outside the date folders) leave the key in place: discovery leaves their files out and says so. A
  key of mostly odd values drives no time;
* an `hour=` folder below the date makes it hourly (`dt/hour`, `year/month/day/hour`).

A composite key is the keys joined by `/` (no key can hold one: keys are folder names), its
format the matching `strptime` formats joined the same way.
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Iterable, Mapping, Sequence

DATE_FORMATS = ("%Y-%m-%d", "%Y%m%d")
DATE_KEYS = ("dt", "date", "ds")  # Hive's usual names for a date partition, preferred to other date-valued keys
YEAR_MONTH_DAY = ("year", "month", "day")
HOUR = "hour"
#: the folder Hive writes rows under when their partition value is null
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"


@functools.lru_cache(maxsize=4096)
def parse_time(value: str, fmt: str | None = None) -> datetime | None:
    # every file of a partition folder asks for the same few values: strptime is ~20 µs a call
    for candidate in (fmt,) if fmt else DATE_FORMATS:
        try:
            return datetime.strptime(value, candidate)
        except ValueError:
            continue
    return None


def partition_time(key: str, fmt: str | None, partition: Mapping[str, str]) -> datetime | None:
    """The moment a file's partition values name under the (possibly composite) time key."""
    keys = key.split("/")
    if not all(k in partition for k in keys):
        return None
    return parse_time("/".join(partition[k] for k in keys), fmt)


def granularity(time_format: str | None) -> str | None:
    if time_format is None:
        return None
    return "hourly" if "%H" in time_format else "daily"


def _candidates(keys: tuple[str, ...]) -> Iterable[tuple[tuple[str, ...], str]]:
    if all(k in keys for k in YEAR_MONTH_DAY):
        yield YEAR_MONTH_DAY, "%Y/%m/%d"
    ordered = [k for k in keys if k in DATE_KEYS] + [k for k in keys if k not in DATE_KEYS and k != HOUR]
    for key in ordered:
        for fmt in DATE_FORMATS:
            yield (key,), fmt


def time_key(keys: tuple[str, ...], partitions: list[Mapping[str, str]]) -> tuple[str | None, str | None]:
    """(key, format) of the partition that drives time, hourly when every file has an `hour=`
    folder below its date; (None, None) when no key's values are all dates."""
    for parts, fmt in _candidates(keys):
        below = keys.index(HOUR) > max(keys.index(p) for p in parts) if HOUR in keys else False
        options = [((*parts, HOUR), f"{fmt}/%H"), (parts, fmt)] if below else [(parts, fmt)]
        for chosen, chosen_fmt in options:
            key = "/".join(chosen)
            if mostly_times(key, chosen_fmt, partitions):
                return key, chosen_fmt
    return None, None


def mostly_times(key: str, fmt: str, partitions: Sequence[Mapping[str, str]]) -> bool:
    """Whether the key's values name times, odd ones aside: one stray folder must not turn a daily
    dataset into an unpartitioned one (whose every snapshot would read every file). Odd values are
    tolerated when they are Hive's null partition or empty, or at most a third of the distinct values."""
    keys = key.split("/")
    values = {tuple(p.get(k, "") for k in keys) for p in partitions}  # a folder's files share its values
    good = {v for v in values if all(v) and parse_time("/".join(v), fmt)}
    odd = values - good  # a key missing from a file's folders counts as empty
    null = all(v[0] in ("", HIVE_NULL) for v in odd)
    return bool(good) and (null or len(good) >= 2 * len(odd))
