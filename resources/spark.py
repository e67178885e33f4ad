"""The Spark resource: a session on `spark.master` (dagster-pyspark's) or on a Spark Connect server
(`spark.remote`), started lazily so runs that need no Spark (and code-location loads) never pay for a
JVM, nor for importing pyspark (~0.2 s). A session that cannot be had fails the run once, naming the key
and the address (`lumos_dagster.spark.session`): every later ask raises the same error at once, never
trying the JVM again per dataset."""

import os
import sys
from typing import Any

from dagster import ConfigurableResource
from pydantic import PrivateAttr

from lumos_dagster.floor.config import SparkConfig

PYTHON_CONF = "spark.pyspark.python"
DEFAULT_CONF = {
    # executors' Python workers must be this interpreter to import pyarrow, fastavro, lumos
    PYTHON_CONF: sys.executable,
    "spark.sql.session.timeZone": "UTC",
    "spark.app.name": "lumos",
}


class LumosSparkResource(ConfigurableResource):
    """dagster-pyspark's `LazyPySparkResource`, but importing dagster-pyspark (and pyspark) only when
    a session is first asked for, with the Python workers pinned to this interpreter; or a Spark Connect
    session when `remote` is set."""

    spark_config: dict[str, Any]
    remote: str | None = None
    _spark_session = PrivateAttr(default=None)
    _failure = PrivateAttr(default=None)

    @property
    def spark_session(self) -> Any:
        if self._failure is not None:
            raise self._failure
        if self._spark_session is None:
            from lumos_dagster.floor.errors import SparkUnavailable
            from lumos_dagster.spark.session import start_session

            # PySpark launches workers with $PYSPARK_PYTHON (default `python3`); the
            # spark.pyspark.python conf alone only reaches spark-submit.
            os.environ.setdefault("PYSPARK_PYTHON", self.spark_config.get(PYTHON_CONF, sys.executable))
            remote, key = self._remote()
            try:
                self._spark_session = start_session(self.spark_config, remote, key)
            except SparkUnavailable as exc:
                self._failure = exc
                raise
        return self._spark_session

    def _remote(self) -> tuple[str | None, str]:
        """The Spark Connect address and where it was set: `spark.remote`, else the environment's
        `SPARK_REMOTE` (as pyspark itself takes it), read when the session starts."""
        if self.remote:
            return self.remote, "spark.remote"
        return os.environ.get("SPARK_REMOTE") or None, "SPARK_REMOTE"

    @property
    def engine(self) -> str:
        """How the run's log names this Spark: `Spark (master local[2])`, `Spark Connect (sc://…)`."""
        from lumos_dagster.spark.session import engine_name

        return engine_name(self.spark_config.get("spark.master"), self._remote()[0])


def spark_resource(config: SparkConfig) -> LumosSparkResource:
    return LumosSparkResource(
        spark_config={**DEFAULT_CONF, "spark.master": config.master, **config.conf}, remote=config.remote
    )


def schema_reader(spark: LumosSparkResource, config: SparkConfig):
    """How a run reads file schemas: a process pool below a measured number of files, Spark above
    it (the session starts only then; never for a local master, see lumos_dagster.formats.readers).
    A Spark Connect server counts as a cluster: it brings cores of its own."""
    from dataclasses import replace

    from lumos_dagster.formats.readers import THRESHOLDS
    from lumos_dagster.spark.schemas import spark_auto_reader

    thresholds = THRESHOLDS
    if config.read_from_files is not None:
        n = config.read_from_files
        thresholds = replace(thresholds, spark_from_local=n, spark_from_cluster=n, spark_from_cluster_remote=n)
    return spark_auto_reader(lambda: spark.spark_session, master=config.remote or config.master,
                             thresholds=thresholds, name=spark.engine)  # fmt: skip
