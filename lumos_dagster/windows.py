"""When a dataset's data is ready: cron ticks in the dataset's time zone plus an
availability lag (`+6h`: the data of the 06:00 run can be read at 12:00).

Pure functions over aware datetimes; croniter walks the calendar in the zone, so DST
gaps and repeats are the zone's, not UTC's.
"""

from __future__ import annotations

import re
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
