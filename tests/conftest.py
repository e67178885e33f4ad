import os
import sys
import tempfile
from pathlib import Path

import pytest

# DataHub's golden-file flags (--update-golden-files) and its UTC pin for the test process
from datahub.testing.pytest_hooks import (  # noqa: F401
    load_golden_flags,
    local_timezone,
    pytest_addoption,
    pytest_configure,
)

ROOT = Path(__file__).resolve().parents[1]
S3_TEST_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "lumos",
    "AWS_SECRET_ACCESS_KEY": "lumos-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}
TESTDATA = ROOT.parent / "shared" / "testdata"
# moto's request recorder writes into the working directory unless told otherwise (read at import)
os.environ.setdefault("MOTO_RECORDER_FILEPATH", os.path.join(tempfile.mkdtemp(prefix="lumos-moto-"), "recording"))


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
