"""Starting the Spark session a run reads with: on a master (`spark.master`, through dagster-pyspark) or
on a Spark Connect server (`spark.remote`, `sc://host:port`), and failing once, with the key and the
address, when neither can be had.

An address that does not answer is found before any JVM starts: a standalone master (`spark://`) or a
Connect server that is down would otherwise keep the driver retrying for minutes. Any other failure
to start (no Java, a master that refuses the application) is said with Spark's own first line.
"""

from __future__ import annotations

import socket
from typing import Any, Mapping
from urllib.parse import urlsplit

from lumos_dagster.floor.errors import SparkUnavailable

#: the port a Spark Connect server listens on unless told otherwise (Spark's `spark.connect.grpc.binding.port`)
CONNECT_PORT = 15002
#: how long an address may take to accept a connection before it counts as unreachable
REACH_SECONDS = 5.0
#: what a Connect session takes of the run's conf: settings of the session, not of a JVM it does not start
_CONNECT_CONF = ("spark.sql.session.timeZone",)


def engine_name(master: str | None, remote: str | None) -> str:
    """How the run's log names Spark: `Spark (master local[2])`, `Spark Connect (sc://host:15002)`."""
    return f"Spark Connect ({remote})" if remote else f"Spark (master {master or 'local[*]'})"


def is_connect(session: Any) -> bool:
    """A Spark Connect session: no SparkContext, no RDDs; DataFrames only."""
    return type(session).__module__.startswith("pyspark.sql.connect")


def _addresses(url: str, default_port: int) -> list[tuple[str, int]]:
    """(host, port) of each address in `spark://h1:7077,h2:7077` or `sc://host:port/;token=…`."""
    rest = url.split("://", 1)[1].split("/", 1)[0].split(";", 1)[0]
    out = []
    for part in rest.split(","):
        parsed = urlsplit(f"//{part}")
        out.append((parsed.hostname or "localhost", parsed.port or default_port))
    return out


def _unreachable(addresses: list[tuple[str, int]]) -> str | None:
    """Why none of `addresses` accepts a connection (None: one does)."""
    reasons = []
    for host, port in addresses:
        try:
            with socket.create_connection((host, port), timeout=REACH_SECONDS):
                return None
        except OSError as exc:
            reasons.append(f"{host}:{port}: {exc.strerror or exc}")
    return "; ".join(reasons)


def start_session(conf: Mapping[str, Any], remote: str | None = None, key: str = "spark.remote") -> Any:
    """The session `conf` (with its `spark.master`) or `remote` gives (`key`: where `remote` was set);
    raises `SparkUnavailable`."""
    if remote:
        why = _unreachable(_addresses(remote, CONNECT_PORT))
        if why is not None:
            raise SparkUnavailable(f"{key} {remote}: no Spark Connect server answers ({why}); start one "
                                   f"(sbin/start-connect-server.sh) or correct {key}")  # fmt: skip
        from pyspark.sql import SparkSession

        try:
            builder = SparkSession.builder.remote(remote)
            for key in _CONNECT_CONF:
                if key in conf:
                    builder = builder.config(key, conf[key])
            return builder.getOrCreate()
        except Exception as exc:
            raise SparkUnavailable(f"{key} {remote}: cannot open a Spark Connect session: {_line(exc)}") from exc
    master = str(conf.get("spark.master") or "local[*]")
    if master.startswith("spark://"):
        why = _unreachable(_addresses(master, 7077))
        if why is not None:
            raise SparkUnavailable(f"spark.master {master}: no Spark master answers ({why}); start it or correct "
                                   "spark.master in lumos.yaml")  # fmt: skip
    from dagster_pyspark.resources import spark_session_from_config

    try:
        return spark_session_from_config(dict(conf))
    except Exception as exc:  # no Java, a JVM that dies, a master that refuses the application
        raise SparkUnavailable(f"spark.master {master}: Spark cannot start: {_line(exc)}") from exc


def _line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")
