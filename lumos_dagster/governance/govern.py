"""The `govern` step: each snapshot's profile (opt-in, the run's newest partition) and quality
(test results, profile, freshness). Neither can fail a snapshot: what goes wrong is said in the
run's warnings and the schema is still taken; only Spark that cannot be had at all fails the run (once,
naming `spark.master` or `spark.remote` and the address)."""

from __future__ import annotations

from datetime import datetime
from typing import Mapping, Sequence

from lumos_dagster.floor.config import LumosConfig
from lumos_dagster.floor.dataset_specs import Catalogue, DatasetSpec
from lumos_dagster.floor.errors import NotProfiled, SparkUnavailable
from lumos_dagster.floor.model import Snapshots
from lumos_dagster.governance.profiling import Profiler, SizedPath
from lumos_dagster.governance.rules import assess, has_quality_sources, read_assertions


def govern(config: LumosConfig, catalogue: Catalogue, datasets: Sequence[DatasetSpec], snapshots: Snapshots,
           readable: Mapping[tuple[str, str | None], Sequence[SizedPath]], now: datetime,
           profile: Profiler) -> tuple[Snapshots, list[str]]:  # fmt: skip
    """(`snapshots` with their quality and the newest partition's profile, the warnings to say once)."""
    warnings: list[str] = []
    assertions: dict = {}
    if has_quality_sources(config):
        assertions, problems = read_assertions(config, [d.name for d in catalogue.datasets])
        warnings += [f"quality: {p}" for p in problems]
    out: Snapshots = {}
    for d in datasets:
        snaps = snapshots[d.name]
        newest = max(snaps, key=lambda k: k or "")
        found = None
        if d.profile is not None:
            try:
                found = profile(d, readable.get((d.name, newest), []))
                if found.partial is not None:
                    warnings.append(f"{d.name}: profile is partial: read {found.partial} within "
                                    f"profile.max_bytes; its row count is not the partition's")  # fmt: skip
            except NotProfiled as e:
                warnings.append(f"{d.name}: not profiled: {e}")
            except SparkUnavailable:  # no dataset can be profiled: the run fails once, saying where Spark is
                raise
            except Exception as e:  # the data refusing to be profiled must not lose the snapshot
                warnings.append(f"{d.name}: profiling failed: {type(e).__name__}: {str(e).splitlines()[0]}")
        out[d.name] = {
            key: assess(s, assertions.get(d.name, ()), found if key == newest else None, now)
            for key, s in snaps.items()
        }
    return out, warnings
