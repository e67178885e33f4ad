"""Moved to resources/tuning (event_log_postgres.py): kept so that an instance whose dagster.yaml
still names `module: resources.event_log_postgres` (docs/deploy.md before the move) loads. Its
dagster.yaml should name `module: resources.tuning` instead."""

import warnings

from resources.tuning.event_log_postgres import LumosPostgresEventLogStorage

__all__ = ["LumosPostgresEventLogStorage"]

warnings.warn(
    "dagster.yaml names `module: resources.event_log_postgres`: Lumos' tuned event logs moved to "
    "`module: resources.tuning` (same class names); resources.event_log_postgres will be removed",
    FutureWarning,
    stacklevel=2,
)
