"""Turning "what changed" into run requests: which dataset assets, which partition keys."""

from datetime import datetime, timedelta
from typing import Any, Mapping, Sequence
from zoneinfo import ZoneInfo

from dagster import AssetKey, AssetsDefinition, TimeWindow

from lumos_dagster.floor.dataset_specs import DatasetSpec
from lumos_dagster.floor.windows import CADENCE_CRON

#: what `define_asset_job` returns: an asset job, resolved when Definitions binds it (its class is
#: private to Dagster, so it is named here by what it is)
AssetJob = Any


class Targets:
    """Dataset name → its asset key and partitions, for the datasets Dagster knows now; `jobs`: each
    cadence's snapshot job, which sensors request runs of."""

    def __init__(self, specs: Mapping[str, DatasetSpec], keys: Mapping[str, AssetKey],
                 assets_by_cadence: Mapping[str, Sequence[AssetsDefinition]],
                 jobs: Mapping[str, AssetJob]):  # fmt: skip
        self.specs, self.keys, self.assets, self.jobs = specs, keys, assets_by_cadence, jobs

    def known(self, name: str | None) -> bool:
        return name in self.specs

    def of_source(self, source: str) -> list[AssetKey]:
        """The asset keys of a source's datasets: what its change sensor may request."""
        return [self.keys[n] for n, s in self.specs.items() if s.source == source]

    def partitions(self, name: str):
        return self.assets[self.specs[name].cadence][0].partitions_def

    def keys_for_date(self, name: str, day: str | None) -> list[str] | None:
        """Partition keys covering a file's date; the current partition when the dataset has no dates;
        None when the date is after the last partition (it does not exist yet: tomorrow's folder);
        [] when it is before the first (it never will)."""
        partitions = self.partitions(name)
        last = partitions.get_last_partition_key()
        if day is None or self.specs[name].time_partition_key is None:
            return [last]
        zone = ZoneInfo(partitions.timezone)
        start = datetime.fromisoformat(day).replace(tzinfo=zone)
        if start.timestamp() >= partitions.time_window_for_partition_key(last).end.timestamp():
            return None
        window = TimeWindow(start, start + timedelta(days=1))
        return list(partitions.get_partition_keys_in_time_window(window))

    def key_at(self, name: str, moment: datetime) -> str | None:
        """The partition holding `moment`, if it exists (not before the first one)."""
        partitions = self.partitions(name)
        if moment.timestamp() < partitions.start.timestamp():
            return None
        return partitions.get_partition_key_for_timestamp(moment.timestamp())

    def schedule(self, name: str) -> tuple[str, str, str]:
        """(cron, zone, lag) of the dataset: declared, or its cadence's."""
        spec = self.specs[name]
        if spec.schedule is not None:
            return spec.schedule.cron, spec.schedule.timezone, spec.schedule.lag
        return CADENCE_CRON[spec.cadence], self.partitions(name).timezone, "0"
