"""Time windows: a partition's window, and when a dataset's data is ready (cron ticks in the
dataset's time zone plus an availability lag: `+6h`, the data of the 06:00 run can be read at 12:00).

A partition of a cadence is keyed and bounded as Dagster's time-window partitions are (the
hourly, daily, weekly and monthly definitions the code location builds), so `lumos snapshot`
and a Dagster run take the same window for the same key.

Pure functions over aware datetimes; croniter walks the calendar in the zone, so DST
gaps and repeats are the zone's, not UTC's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from croniter import croniter

_LAG = re.compile(r"^\+?\s*(?:(\d+)\s*d)?\s*(?:(\d+)\s*h)?\s*(?:(\d+)\s*m)?$")


def parse_lag(text: str) -> timedelta:
    """`+6h`, `90m`, `1d 2h`, `0` → a timedelta."""
    text = text.strip()
    m = _LAG.match(text)
    if text in ("", "0") or not m or not any(m.groups()):
        if text in ("", "0", "+0"):
            return timedelta()
        raise ValueError(f"not a lag: {text!r} (write e.g. +6h, 90m, 1d 2h)")
    days, hours, minutes = (int(g or 0) for g in m.groups())
    return timedelta(days=days, hours=hours, minutes=minutes)


_PART = re.compile(r"\s*(\d+)\s*([a-z]+)\s*")
_MINUTES = {"m": 1, "min": 1, "minute": 1, "h": 60, "hr": 60, "hour": 60, "d": 1440, "day": 1440}


def parse_duration(text: str) -> timedelta:
    """A positive duration: `6h`, `6 hours`, `90 min`, `1d 12h`."""
    text = str(text).lower()
    minutes, pos = 0, 0
    for m in _PART.finditer(text):
        unit = m.group(2)
        unit = unit if unit in _MINUTES else unit.removesuffix("s")
        if m.start() != pos or unit not in _MINUTES:
            break
        minutes, pos = minutes + int(m.group(1)) * _MINUTES[unit], m.end()
    if pos != len(text) or not minutes:
        raise ValueError(f"{text!r} is not a duration like 30m, 6h, 2d or 1d 12h")
    return timedelta(minutes=minutes)


def canonical_duration(text: str) -> str:
    """A duration in one unit, as SLAs are stored: `1d 12h` → `36h`, `90 min` → `90m`, `48h` → `2d`."""
    minutes = int(parse_duration(text).total_seconds()) // 60
    return f"{minutes // 1440}d" if minutes % 1440 == 0 else f"{minutes // 60}h" if minutes % 60 == 0 else f"{minutes}m"


def next_window(after: datetime, cron: str, tz: str, lag: timedelta) -> tuple[datetime, datetime]:
    """(the first cron tick strictly after `after`, when its data is ready: tick + lag).

    The lag is elapsed time, so it is added in UTC: on the night clocks fall back, 02:30 + 1h
    is 02:30 again on the wall clock, not 03:30."""
    tick = croniter(cron, after.astimezone(ZoneInfo(tz))).get_next(datetime)
    return tick, tick.astimezone(UTC) + lag


def latest_due(now: datetime, cron: str, tz: str, lag: timedelta) -> datetime:
    """The latest cron tick whose data is ready at `now` (tick + lag <= now)."""
    # get_prev is strictly before its start: a second later keeps a tick exactly at now - lag
    return croniter(cron, (now - lag + timedelta(seconds=1)).astimezone(ZoneInfo(tz))).get_prev(datetime)


@dataclass(frozen=True)
class Window:
    """A partition of a run: its key and [start, end); all three None for a run without partitions."""

    key: str | None
    start: datetime | None = None
    end: datetime | None = None


#: each cadence's partition boundaries, and its keys (Dagster's time-window partitions)
CADENCE_CRON = {"hourly": "0 * * * *", "daily": "0 0 * * *", "weekly": "0 0 * * 0", "monthly": "0 0 1 * *"}
KEY_FORMAT = {"hourly": "%Y-%m-%d-%H:%M", "daily": "%Y-%m-%d", "weekly": "%Y-%m-%d", "monthly": "%Y-%m-%d"}


#: how long a partition of each cadence is at least: a snapshot's lag stays below it
PERIOD = {"hourly": timedelta(hours=1), "daily": timedelta(days=1), "weekly": timedelta(days=7),
          "monthly": timedelta(days=28)}  # fmt: skip


def snapshot_cron(cadence: str, lag: timedelta) -> str:
    """When a cadence's snapshot schedule ticks: each partition's end, `lag` later (the data of the
    day lands by 02:00: `+2h`). `lag` is below the cadence's period."""
    if not timedelta() <= lag < PERIOD[cadence]:
        raise ValueError(f"a lag of {lag} is not below a {cadence} partition's length")
    minutes = int(lag.total_seconds()) // 60
    minute, hour, day = minutes % 60, minutes // 60 % 24, minutes // 1440
    return {
        "hourly": f"{minute} * * * *",
        "daily": f"{minute} {hour} * * *",
        "weekly": f"{minute} {hour} * * {day}",
        "monthly": f"{minute} {hour} {1 + day} * *",
    }[cadence]


def partition_window(cadence: str, key: str, tz: str) -> Window:
    """The window of partition `key` of `cadence` in zone `tz`; ValueError for a key that is not one."""
    return Window(key, *_bounds(cadence, key, tz))


def _bounds(cadence: str, key: str, tz: str) -> tuple[datetime, datetime]:
    """[start, end) of partition `key`: `partition_window`'s, neither of them None."""
    start = datetime.strptime(key, KEY_FORMAT[cadence]).replace(tzinfo=ZoneInfo(tz))
    if partition_at(cadence, start, tz) != key:
        raise ValueError(f"{key!r} is not the start of a {cadence} partition")
    return start, croniter(CADENCE_CRON[cadence], start).get_next(datetime)


def partition_at(cadence: str, moment: datetime, tz: str) -> str:
    """The key of the `cadence` partition holding `moment` (aware) in zone `tz`."""
    cron, local = CADENCE_CRON[cadence], moment.astimezone(ZoneInfo(tz))
    start = croniter(cron, local).get_prev(datetime)  # strictly before: `moment` may be a boundary itself
    following = croniter(cron, start).get_next(datetime)
    return (following if following <= local else start).strftime(KEY_FORMAT[cadence])


def partition_windows(cadence: str, first: str, last: str, tz: str) -> list[Window]:
    """The windows of partitions `first` … `last` of `cadence`, both included."""
    start, end = _bounds(cadence, first, tz)
    last_start, _ = _bounds(cadence, last, tz)
    if last_start < start:
        raise ValueError(f"{first}...{last}: the range ends before it starts")
    out = [Window(first, start, end)]
    while end <= last_start:
        start, end = end, croniter(CADENCE_CRON[cadence], end).get_next(datetime)
        out.append(Window(start.strftime(KEY_FORMAT[cadence]), start, end))
    return out
