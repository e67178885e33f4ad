"""Issue 42, item 9: the API as its OpenAPI document says. Requests generated from the document by
schemathesis against a live `lumos serve` meet every check (each status answered is documented, a
body the schema allows is accepted, one it refuses is refused, a 405 lists the path's methods); and
the cases found by hand: a repeated or malformed parameter is 422, an overlong URL is Lumos' own 414,
and a 5 MB column name never reaches `GET /v1/dataset`."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import pytest
import yaml
from click.testing import CliRunner

from lumos_dagster.api.limits import MAX_URL_BYTES
from lumos_dagster.cli import main
from lumos_dagster.floor.limits import MAX_FIELD_NAME
from tests.lake import backdate
from tests.test_api import TOKENS, Server, build_lake, free_port, materialize, write_config

pytestmark = [pytest.mark.servers, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
ST = ROOT / ".venv" / "bin" / "st"
#: what schemathesis is told beyond the document: a dataset that exists, and that a body or URL past the
#: server's limits (413, 414, both documented) is a refusal too
SCHEMATHESIS = """
[parameters]
name = "raw/events"

[checks.negative_data_rejection]
expected-statuses = [400, 401, 403, 404, 405, 406, 409, 413, 414, 415, 422, 428, 429, "5xx"]
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """`lumos serve` on a materialized project (SQLite): bodies up to 1 MiB, so that what the
    document allows fits; a CSV dataset whose header has a 5 MB column name beside a real one."""
    tmp = tmp_path_factory.mktemp("schema")
    build_lake(tmp / "lake")
    (tmp / "lake" / "wide").mkdir()
    (tmp / "lake" / "wide" / "w.csv").write_text("id," + "x" * 5_000_000 + "\n1,2\n")
    backdate(tmp / "lake" / "wide")  # in the days `materialize` snapshots
    config = write_config(tmp / "lumos.yaml", tmp / "lake", f"sqlite:///{tmp}/store.db", writes=True)
    settings = yaml.safe_load(config.read_text())
    settings["api"]["limits"]["max_body_bytes"] = 1 << 20
    config.write_text(yaml.safe_dump(settings))
    materialize(config)
    server = Server(config, free_port(), tmp / "serve.log")
    server.config, server.tmp = config, tmp
    yield server
    server.stop()


def test_requests_generated_from_the_openapi_document_meet_every_check(served):
    (served.tmp / "schemathesis.toml").write_text(SCHEMATHESIS)
    out = subprocess.run(
        [str(ST), "--config-file", str(served.tmp / "schemathesis.toml"), "run", f"{served.url}/openapi.json",
         "-H", f"Authorization: Bearer {TOKENS['writer']}", "--checks", "all", "--max-examples", "15",
         "--seed", "42", "--no-color"],
        capture_output=True, text=True, timeout=300, cwd=served.tmp,  # its cache (.schemathesis/) goes there
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    assert " passed" in out.stdout and "failed" not in out.stdout.split("SUMMARY")[-1]


def _get(served, path: str, **params) -> httpx.Response:
    return httpx.get(f"{served.url}{path}", params=params, headers={"Authorization": f"Bearer {TOKENS['writer']}"})


def test_a_repeated_or_malformed_parameter_is_refused(served):
    twice = httpx.get(f"{served.url}/v1/impact?top=1&top=2", headers={"Authorization": f"Bearer {TOKENS['reader']}"})
    assert twice.status_code == 422 and twice.json()["error"]["message"] == "query.top: given more than once"
    assert _get(served, "/v1/impact", top="1").status_code == 200
    for since in ("0.5", "1700000000", "yesterday"):  # pydantic took a number for seconds since 1970
        answer = _get(served, "/v1/gate", since=since)
        assert answer.status_code == 422 and "query.since: " in answer.json()["error"]["message"], since
    assert _get(served, "/v1/gate", since="2030-01-01T00:00:00Z").json()["passed"]


def test_a_405_lists_every_method_of_the_path(served):
    headers = {"Authorization": f"Bearer {TOKENS['writer']}"}
    paths = [("OPTIONS", "/v1/releases", "GET, POST"), ("DELETE", "/v1/releases", "GET, POST"),
             ("OPTIONS", "/v1/dataset/check", "POST"), ("PUT", "/health", "GET, HEAD")]  # fmt: skip
    for method, path, allowed in paths:
        answer = httpx.request(method, f"{served.url}{path}", headers=headers)
        assert (answer.status_code, answer.headers["allow"]) == (405, allowed), (method, path)


def test_an_overlong_url_is_lumos_own_414(served):
    answer = _get(served, "/v1/search", q="a" * (MAX_URL_BYTES + 1))
    assert answer.status_code == 414 and answer.json()["error"]["code"] == "uri_too_long"
    longest = _get(served, "/v1/gate", datasets="\U0001f600" * 4_000)  # what the document allows: 48,000 bytes
    assert longest.status_code == 404 and "unknown dataset" in longest.json()["error"]["message"]  # it got through


def test_a_proposed_schema_the_document_allows_is_judged_not_refused(served):
    headers = {"Authorization": f"Bearer {TOKENS['checker']}"}
    answer = httpx.post(f"{served.url}/v1/dataset/check", params={"name": "raw/events"}, headers=headers,
                        json={"format": "avro", "schema": ""})  # fmt: skip
    assert answer.status_code == 200
    verdict = answer.json()
    assert not verdict["passed"] and verdict["problems"] == ["avro: not JSON: Expecting value at line 1, column 1"]


def test_a_field_name_past_the_limit_is_refused_where_it_is_read_and_the_api_answers_small(served):
    (line,) = CliRunner().invoke(main, ["schema", str(served.tmp / "lake" / "wide" / "w.csv")]).output.splitlines()
    assert line.startswith("Error: ") and line.endswith(
        f"w.csv: its field number 2 has a name of 5,000,000 characters, longer than the {MAX_FIELD_NAME:,} Lumos keeps"
    )
    answer = _get(served, "/v1/dataset", name="wide")
    assert answer.status_code == 200 and len(answer.content) < 20_000  # was 10.5 MB
    assert "longer than the 1,024 Lumos keeps" in answer.text and "x" * 2_000 not in answer.text
