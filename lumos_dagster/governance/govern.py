"""The `govern` step: each snapshot's profile (opt-in, the run's newest partition) and quality
(test results, profile, freshness). Neither can fail a snapshot: what goes wrong is said in the
run's warnings and the schema is still taken."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lumos_dagster.errors import NotProfiled
from lumos_dagster.governance.rules import assess, has_quality_sources, read_assertions

if TYPE_CHECKING:
    from lumos_dagster.scan.pipeline import Run, Services


def govern(run: Run, services: Services) -> None:
    assertions: dict = {}
    if has_quality_sources(run.config):
        assertions, problems = read_assertions(run.config, [d.name for d in run.catalogue.datasets])
        run.warnings += [f"quality: {p}" for p in problems]
    now = services.now()
    newest_key = run.partition_keys[-1]
    for d in run.datasets:
        profile = None
        if d.profile is not None:
            if services.profile is None:
                run.warnings.append(f"{d.name}: not profiled: no profiler in this run")
            else:
                try:
                    profile = services.profile(d, run.readable.get((d.name, newest_key), []))
                except NotProfiled as e:
                    run.warnings.append(f"{d.name}: not profiled: {e}")
                except Exception as e:  # the data refusing to be profiled must not lose the snapshot
                    run.warnings.append(f"{d.name}: profiling failed: {type(e).__name__}: {str(e).splitlines()[0]}")
        snaps = run.snapshots[d.name]
        for key, s in snaps.items():
            snaps[key] = assess(s, assertions.get(d.name, ()), profile if key == newest_key else None, now)
