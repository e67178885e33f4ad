"""The Spark resource: dagster-pyspark's session, started lazily so runs that need no Spark
(and code-location loads) never pay for a JVM, nor for importing pyspark (~0.2 s)."""

import os
import sys
from typing import Any

from dagster import ConfigurableResource
from pydantic import PrivateAttr

from lumos_dagster.config import SparkConfig

PYTHON_CONF = "spark.pyspark.python"
DEFAULT_CONF = {
    # executors' Python workers must be this interpreter to import pyarrow, fastavro, lumos
    PYTHON_CONF: sys.executable,
    "spark.sql.session.timeZone": "UTC",
    "spark.app.name": "lumos",
}


class LumosSparkResource(ConfigurableResource):
    """dagster-pyspark's `LazyPySparkResource`, but importing dagster-pyspark (and pyspark) only when
    a session is first asked for, and with the Python workers pinned to this interpreter."""

    spark_config: dict[str, Any]
    _spark_session = PrivateAttr(default=None)

    @property
    def spark_session(self) -> Any:
        if self._spark_session is None:
            from dagster_pyspark.resources import spark_session_from_config

            # PySpark launches workers with $PYSPARK_PYTHON (default `python3`); the
            # spark.pyspark.python conf alone only reaches spark-submit.
            os.environ.setdefault("PYSPARK_PYTHON", self.spark_config.get(PYTHON_CONF, sys.executable))
            self._spark_session = spark_session_from_config(self.spark_config)
        return self._spark_session


def spark_resource(config: SparkConfig) -> LumosSparkResource:
    return LumosSparkResource(spark_config={**DEFAULT_CONF, "spark.master": config.master, **config.conf})


def schema_reader(spark: LumosSparkResource, config: SparkConfig):
    """How a run reads file schemas: a process pool below a measured number of files, Spark above
    it (the session starts only then; never for a local master, see lumos_dagster.formats.readers)."""
    from dataclasses import replace

    from lumos_dagster.formats.readers import THRESHOLDS
    from lumos_dagster.spark.schemas import spark_auto_reader

    thresholds = THRESHOLDS
    if config.read_from_files is not None:
        thresholds = replace(
            thresholds, spark_from_local=config.read_from_files, spark_from_cluster=config.read_from_files
        )
    return spark_auto_reader(lambda: spark.spark_session, master=config.master, thresholds=thresholds)
