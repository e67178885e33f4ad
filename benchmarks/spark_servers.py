"""Spark's servers started from the jars pyspark ships, as a team runs them: a standalone master and its
workers (`spark-class org.apache.spark.deploy.master.Master` / `…worker.Worker`) and a Spark Connect
server (`SparkConnectServer`, as `sbin/start-connect-server.sh` starts it). The tests'
fixtures (tests/test_spark_connect.py) and the engines benchmark (benchmarks/engines.py) start them here.
Their Python workers are this interpreter with the repository on their path, as a team's executors must
have Lumos."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Mapping

ROOT = Path(__file__).resolve().parents[1]
START_SECONDS = 120


class NotStarted(RuntimeError):
    """A server that did not come up: its log's tail in the message."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spark_env(extra: Mapping[str, str]) -> dict[str, str]:
    import pyspark

    home = os.path.dirname(pyspark.__file__)
    return {**os.environ, **extra, "SPARK_HOME": home, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}


def wait_for_port(port: int, process: subprocess.Popen, logs: Path, what: str) -> None:
    deadline = time.monotonic() + START_SECONDS
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise NotStarted(f"{what} did not start: {logs.read_text()[-3000:]}") from None
            time.sleep(0.5)


def _stop(processes: list[subprocess.Popen]) -> None:
    for process in reversed(processes):
        process.terminate()
    for process in processes:
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()


@contextmanager
def standalone_cluster(folder: Path, workers: int = 2, cores: int = 1, memory: str = "512m",
                       env: Mapping[str, str] = {}) -> Iterator[tuple[str, Path]]:  # fmt: skip
    """A master and `workers` workers (`cores` and `memory` each) on 127.0.0.1, their logs in `folder`
    (`env`: more of the workers' environment, which their executors inherit): (the master's URL, its log).
    Stopped on exit."""
    full = _spark_env({**env, "SPARK_WORKER_DIR": str(folder / "work")})
    home = full["SPARK_HOME"]
    port = _free_port()
    master = f"spark://127.0.0.1:{port}"
    commands = [
        ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port), "--webui-port", "0"],
        *[["org.apache.spark.deploy.worker.Worker", master, "--host", "127.0.0.1", "--cores", str(cores),
           "--memory", memory, "--webui-port", "0"]] * workers,
    ]  # fmt: skip
    started: list[subprocess.Popen] = []
    try:
        for i, args in enumerate(commands):
            with open(folder / f"{i}.log", "w") as log:
                started.append(subprocess.Popen([f"{home}/bin/spark-class", *args], stdout=log,
                                                stderr=subprocess.STDOUT, env=full))  # fmt: skip
            if i == 0:
                wait_for_port(port, started[0], folder / "0.log", "the Spark master")
        deadline = time.monotonic() + START_SECONDS
        logs = [folder / f"{i}.log" for i in range(1, workers + 1)]
        while sum("Successfully registered with master" in log.read_text() for log in logs) < workers:
            if time.monotonic() > deadline:
                raise NotStarted(f"the workers did not register: {logs[0].read_text()[-2000:]}")
            time.sleep(0.5)
        yield master, folder / "0.log"
    finally:
        _stop(started)


@contextmanager
def connect_server(logs: Path, master: str = "local[2]", env: Mapping[str, str] = {}) -> Iterator[str]:
    """A Spark Connect server on a free port running on `master`, its output in `logs` (`env`: more of
    its environment, e.g. an object store's credentials as an instance role's would be): its `sc://`
    address. Stopped on exit."""
    full = _spark_env(env)
    port = _free_port()
    command = [
        f"{full['SPARK_HOME']}/bin/spark-submit", "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
        "--name", "lumos-connect", "--master", master,
        "--conf", f"spark.connect.grpc.binding.port={port}", "--conf", "spark.ui.enabled=false",
        "--conf", f"spark.pyspark.python={sys.executable}", "--conf", "spark.sql.session.timeZone=UTC",
    ]  # fmt: skip
    with open(logs, "w") as log:
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=full)
    try:
        wait_for_port(port, server, logs, "the Spark Connect server")
        yield f"sc://127.0.0.1:{port}"
    finally:
        _stop([server])
