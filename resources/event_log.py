"""Moved to resources/tuning (event_log.py): kept so that an instance whose dagster.yaml still names
`module: resources.event_log` (a `make demo` home made before the move, `.lumos/dagster`) loads.
Its dagster.yaml should name `module: resources.tuning` instead."""

import warnings

from resources.tuning.event_log import GroupedEventWrites, LumosSqliteEventLogStorage

__all__ = ["GroupedEventWrites", "LumosSqliteEventLogStorage"]

warnings.warn(
    "dagster.yaml names `module: resources.event_log`: Lumos' tuned event logs moved to "
    "`module: resources.tuning` (same class names); resources.event_log will be removed",
    FutureWarning,
    stacklevel=2,
)
