"""The release sensor: a release manifest lands (`lumos release`, or a file dropped in the
watched folder / S3 prefix); for each dataset it names, the sensor waits for the dataset's
next data window after the release (its cron and time zone, plus the availability lag)
and then requests that partition, tagged with the release, whose versions the refresh
records."""

import hashlib
import json
from datetime import UTC, datetime

from dagster import DefaultSensorStatus, RunRequest, SensorDefinition, SensorResult, sensor

from lumos_dagster.floor.naming import RELEASE_TAG, TRIGGER_TAG
from lumos_dagster.floor.windows import latest_due, next_window, parse_lag
from lumos_dagster.schema.releases import read_manifests
from lumos_dagster.sensors.run_tags import AUTOMATION_RUN_TAGS
from lumos_dagster.sensors.triggers import Targets

KEEP_DONE = 200  # names of fully requested releases kept in the cursor


def release_requests(manifests, done: set[str], targets: Targets, now: datetime):
    """(run requests due now, releases all of whose refreshes are requested)."""
    requests, finished = [], []
    for m in manifests:
        if m.name in done:
            continue
        pending = False
        for name in m.datasets or sorted(targets.specs):
            if not targets.known(name):
                continue
            cron, zone, lag = targets.schedule(name)
            tick, ready = next_window(m.released_at, cron, zone, parse_lag(lag))
            if ready > now:
                pending = True  # not yet: the data of the first window after the release is not there
                continue
            pk = targets.key_at(name, tick)
            if pk is not None:
                requests.append(
                    RunRequest(
                        run_key=f"release:{m.name}:{name}",
                        asset_selection=[targets.keys[name]],
                        partition_key=pk,
                        tags={RELEASE_TAG: m.name, TRIGGER_TAG: "release", **AUTOMATION_RUN_TAGS},
                    )
                )
        if not pending:
            finished.append(m.name)
    return requests, finished


def release_sensor(
    watch: str, targets: Targets, endpoint_url: str | None = None, interval: int = 60
) -> SensorDefinition:
    @sensor(
        name="lumos_releases",
        description=f"Refreshes the datasets of each release manifest in {watch} once their data is ready.",
        minimum_interval_seconds=interval,
        default_status=DefaultSensorStatus.RUNNING,
        asset_selection=list(targets.keys[n] for n in targets.specs),
    )
    def _releases(context):
        done = json.loads(context.cursor)["done"] if context.cursor else []
        manifests, problems = read_manifests(watch, endpoint_url)
        for problem in problems:
            context.log.warning(f"release manifest skipped: {problem}")
        for m in manifests:
            if m.name not in done and (unknown := [n for n in m.datasets if not targets.known(n)]):
                context.log.warning(
                    f"release {m.name} names datasets Lumos has no asset for, skipped: {', '.join(unknown)} "
                    "(a typo, or not discovered yet: lumos discover)"
                )
        requests, finished = release_requests(manifests, set(done), targets, datetime.now(UTC))
        cursor = json.dumps({"done": (done + finished)[-KEEP_DONE:]})
        return SensorResult(run_requests=requests, cursor=cursor)

    return _releases


def schedule_requests(targets: Targets, now: datetime) -> list[RunRequest]:
    """For each dataset with a declared schedule: its latest window whose data is ready."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for name, spec in sorted(targets.specs.items()):
        if spec.schedule is None:
            continue
        tick = latest_due(now, spec.schedule.cron, spec.schedule.timezone, parse_lag(spec.schedule.lag))
        pk = targets.key_at(name, tick)
        if pk is not None:
            groups.setdefault((spec.cadence, pk, tick.isoformat()), []).append(name)
    requests = []
    for (_, pk, when), names in sorted(groups.items()):
        ident = hashlib.sha1("\n".join(names).encode()).hexdigest()[:12]
        requests.append(
            RunRequest(
                run_key=f"schedule:{when}:{ident}",
                asset_selection=[targets.keys[n] for n in names],
                partition_key=pk,
                tags={TRIGGER_TAG: "schedule", **AUTOMATION_RUN_TAGS},
            )
        )
    return requests


def dataset_schedule_sensor(targets: Targets, interval: int = 60) -> SensorDefinition:
    @sensor(
        name="lumos_dataset_schedules",
        description="Refreshes each dataset with a declared schedule once the data of its latest window is ready.",
        minimum_interval_seconds=interval,
        default_status=DefaultSensorStatus.RUNNING,
        asset_selection=[targets.keys[n] for n, s in targets.specs.items() if s.schedule is not None],
    )
    def _schedules(context):
        return SensorResult(run_requests=schedule_requests(targets, datetime.now(UTC)))

    return _schedules
