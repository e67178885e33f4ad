import os
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

# DataHub's golden-file flags (--update-golden-files) and its UTC pin for the test process
from datahub.testing.pytest_hooks import (  # noqa: F401
    load_golden_flags,
    local_timezone,
    pytest_configure,
)
from datahub.testing.pytest_hooks import pytest_addoption as _datahub_options
from hypothesis import settings as hypothesis_settings

#: `make test-fast` (the inner loop) sets LUMOS_TEST_FAST: property tests try a tenth of their examples
FAST = bool(os.environ.get("LUMOS_TEST_FAST"))
hypothesis_settings.register_profile("fast", max_examples=10)
if FAST:
    hypothesis_settings.load_profile("fast")


def examples(n: int) -> int:
    """A property test's budget of examples: `n` in `make test`, a tenth in `make test-fast`."""
    return max(n // 10, 5) if FAST else n


ROOT = Path(__file__).resolve().parents[1]
S3_TEST_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "lumos",
    "AWS_SECRET_ACCESS_KEY": "lumos-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}
TESTDATA = ROOT.parent / "shared" / "testdata"
# moto's request recorder writes into the working directory unless told otherwise (read at import)
os.environ.setdefault("MOTO_RECORDER_FILEPATH", os.path.join(tempfile.mkdtemp(prefix="lumos-moto-"), "recording"))


def pytest_addoption(parser: pytest.Parser) -> None:
    _datahub_options(parser)
    parser.addoption(
        "--dagster-instance",
        choices=("stock", "tuned"),
        default="stock",
        help="the Dagster instance the suite runs as on: Dagster's stock one (default, the repository's "
        "dagster.yaml), or the same with its commented switch on: Lumos' tuning (resources/tuning). Tests of the tuned "
        "classes themselves run either way.",
    )


def instance_yaml(kind: str) -> str:
    """A DAGSTER_HOME's dagster.yaml: the repository's (`stock`: Dagster's own storage, nothing of
    Dagster replaced), or the same with its commented switch on (`tuned`: Lumos' tuned event log)."""
    from lumos_dagster.cli.instance import TUNED_EVENT_LOG

    shipped = (ROOT / "dagster.yaml").read_text()
    if kind == "stock":
        return shipped
    return yaml.safe_dump({**yaml.safe_load(shipped), **TUNED_EVENT_LOG})


@pytest.fixture(scope="session")
def dagster_instance(pytestconfig: pytest.Config) -> str:
    """`stock` or `tuned`: what `--dagster-instance` says."""
    return pytestconfig.getoption("--dagster-instance")


@pytest.fixture
def dagster_yaml(dagster_instance: str) -> str:
    """The dagster.yaml a test's DAGSTER_HOME gets: the instance `--dagster-instance` names."""
    return instance_yaml(dagster_instance)


@pytest.fixture(autouse=True)
def _process_as_on_the_instance(dagster_instance: str):
    """The test process as a process of that instance: on the tuned one, with the tuning's patches of
    Dagster, as building its event log applies them; on the stock one, without, even after a test
    built a tuned event log (tests/test_event_log.py does) or applied them itself."""
    if dagster_instance == "tuned":
        from lumos_dagster.resources.tuning import speedups

        speedups.apply()
    yield
    if dagster_instance == "stock" and "lumos_dagster.resources.tuning.speedups" in sys.modules:
        sys.modules["lumos_dagster.resources.tuning.speedups"].revert()


@pytest.fixture(scope="session")
def testdata() -> Path:
    if not TESTDATA.is_dir():
        pytest.fail(f"{TESTDATA} is missing: the real-world test files live in ../shared/testdata")
    return TESTDATA


@pytest.fixture(scope="session")
def spark():
    """One local Spark session for the whole run (Dagster runs pick it up too)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    # Spark's Python workers keep the environment Spark started with: the credentials the S3
    # tests' moto server takes must be there from the start, as an instance role would be
    for key, value in S3_TEST_CREDENTIALS.items():
        os.environ.setdefault(key, value)
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("lumos-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    yield session
    session.stop()


def lite_aspect_versions(path: str) -> dict[tuple[str, str], str]:
    """(urn, aspect) → DataHub Lite's version of the aspect: it rises only when content changes."""
    from lumos_dagster.catalog.datahub_lite import open_lite

    lite = open_lite(path, read_only=True)
    try:
        out = {}
        for urn in list(lite.list_ids()):
            for aspect, value in (lite.get(urn, None, details=True) or {}).items():
                if aspect != "urn":
                    out[urn, aspect] = value["__systemMetadata"]["properties"]["sysVersion"]
        return out
    finally:
        lite.close()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that takes the `spark` fixture is in the spark lane (the session's JVM starts for it)."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
