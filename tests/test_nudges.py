"""Nudges: the escalation rule by age, the round's bookkeeping, and the schedule's job run on the demo
project: a real webhook receives the template's messages, DataHub Lite gets the deprecation."""

from datetime import UTC, date, datetime, timedelta

import pytest
import sqlalchemy as sa
import yaml
from dagster import DagsterInstance, build_schedule_context
from datahub.metadata.schema_classes import DeprecationClass

from lumos_dagster.catalog.datahub_lite import open_lite
from lumos_dagster.cli.demo_lake import build_demo_lake
from lumos_dagster.definitions import build_definitions
from lumos_dagster.floor.config import EscalationRule, NudgeConfig, load_config
from lumos_dagster.governance.rules import Todo, todo_markdown
from lumos_dagster.lineage.catalogue import load_catalogue
from lumos_dagster.reports.nudges import DEPRECATE, NOTIFY_DOMAIN_OWNER, decide, escalation, nudges_table
from lumos_dagster.sources import build_sources
from lumos_dagster.store import SnapshotStore
from tests.fake_servers import WebhookReceiver
from tests.lake import catalog_urn, demo_config, register, run_in_process

pytestmark = [pytest.mark.dagster, pytest.mark.servers]

RULES = [EscalationRule(after_days=14, action=NOTIFY_DOMAIN_OWNER), EscalationRule(after_days=30, action=DEPRECATE)]


@pytest.mark.parametrize(
    "age, rules, action",
    [
        (0, RULES, None),
        (13.9, RULES, None),
        (14, RULES, NOTIFY_DOMAIN_OWNER),
        (29, RULES, NOTIFY_DOMAIN_OWNER),
        (30, RULES, DEPRECATE),
        (400, RULES, DEPRECATE),
        (400, [], None),
        (40, list(reversed(RULES)), DEPRECATE),  # the order written does not matter
        (20, [EscalationRule(after_days=7, action=DEPRECATE)], DEPRECATE),
    ],
)
def test_the_action_due_at_an_age(age, rules, action):
    assert escalation(age, rules) == action


def test_a_round_escalates_once_and_lifts_a_deprecation_when_the_context_comes(tmp_path):
    engine = sa.create_engine(f"sqlite:///{tmp_path}/n.db")
    settings = NudgeConfig(escalate=RULES, domain_owners={"sales": "carol"}, template="{owner}: {count}\n{datasets}")
    orders = Todo("clean/orders", ("owner",), ())
    todos, domains, t0 = {"(unowned)": [orders]}, {"clean/orders": "sales"}, datetime(2026, 1, 1, tzinfo=UTC)

    def at(days, todos=todos):
        with engine.begin() as conn:
            return decide(conn, todos, domains, settings, t0 + timedelta(days=days))

    first = at(0)
    assert (first.messages, first.deprecate) == ({"(unowned)": "(unowned): 1\n- `clean/orders`: owner"}, [])
    assert at(15).messages["carol"] == "carol: 1\n- `clean/orders`: owner, escalated after 15 days"
    assert at(31).deprecate == ["clean/orders"]
    assert at(32).deprecate == []  # deprecated once
    filled = at(33, {})
    assert (filled.messages, filled.undeprecate) == ({}, ["clean/orders"])
    assert at(34).deprecate == [] and at(34 + 31).deprecate == ["clean/orders"]  # a new lapse starts from zero


DAY = date(2026, 11, 25)


def test_the_nudge_schedule_runs_on_the_demo_project(tmp_path):
    receiver = WebhookReceiver().start()
    try:
        build_demo_lake(str(tmp_path / "lake"), today=DAY)
        config = demo_config()
        config["sources"][0]["root"] = "lake"
        config["store"] = {"path": "store.db"}
        config["catalog"]["path"] = "catalog.db"
        config["partitions"]["start"] = "2026-11-01"
        config["governance"]["webhook"] = receiver.url
        config["governance"]["nudge"] = {
            "schedule": "0 8 * * 1",
            "escalate": [
                {"after_days": 14, "action": "notify_domain_owner"},
                {"after_days": 30, "action": "deprecate"},
            ],
            "domain_owners": {"sales": "carol@example.com"},
        }
        (tmp_path / "lumos.yaml").write_text(yaml.safe_dump(config))
        cfg = load_config(str(tmp_path / "lumos.yaml"))
        register(cfg)
        sources = build_sources(cfg)
        with SnapshotStore(cfg.store_url) as store:  # a materialization of DAY, read in process
            catalogue = load_catalogue(cfg, store, {n: s.root for n, s in sources.items()})
            start = datetime(2026, 11, 25, tzinfo=UTC)
            run_in_process(cfg, catalogue, sources, [(str(DAY), start, start + timedelta(1))], store=store)

        defs = build_definitions(cfg)
        schedule = defs.resolve_schedule_def("lumos_nudge_schedule")
        assert schedule.cron_schedule == "0 8 * * 1"
        tick = schedule.evaluate_tick(build_schedule_context(scheduled_execution_time=datetime(2026, 11, 30, 8)))
        assert len(tick.run_requests) == 1 and schedule.job_name == "lumos_nudge"
        job = defs.get_job_def("lumos_nudge")
        instance = DagsterInstance.ephemeral()

        assert job.execute_in_process(instance=instance).success
        ((_, _, first),) = receiver.requests
        # the default template is the missing-context report's own section of each owner
        assert first["text"] + "\n" == todo_markdown(
            {o: [Todo(t["dataset"], tuple(t["missing"]), tuple(t["links"].items())) for t in ts]
             for o, ts in first["owners"].items()}, cfg.governance.required
        )  # fmt: skip
        assert first["messages"]["(unowned)"] == (
            "## (unowned) (3)\n\n- `analytics/customer_360`: owner\n- `clean/events`: owner\n- `clean/orders`: owner"
        )  # customer_360's owner is in its SQL, which this project has not read

        with SnapshotStore(cfg.store_url) as store, store.engine.begin() as conn:  # a month goes by
            conn.execute(nudges_table.update().values(since=datetime.now(UTC) - timedelta(days=31)))
        assert job.execute_in_process(instance=instance).success
        second = receiver.requests[1][2]
        assert second["messages"]["carol@example.com"] == (
            "## carol@example.com (1)\n\n- `clean/orders`: owner, escalated after 31 days"
        )
        lite = open_lite(cfg.lite_path, read_only=True)
        try:
            for name in ("clean/orders", "clean/events", "analytics/customer_360"):
                deprecation = lite.get(catalog_urn(cfg, name), ["deprecation"], typed=True)["deprecation"]
                assert isinstance(deprecation, DeprecationClass) and deprecation.deprecated
            raw = lite.get(catalog_urn(cfg, "raw/orders"), ["deprecation"], typed=True)
            assert not (raw or {}).get("deprecation")
        finally:
            lite.close()
    finally:
        receiver.stop()
