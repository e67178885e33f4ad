"""Wall time and peak memory of a command, and the machine the benchmarks ran on.

Peak memory is the largest sum, over ~50 ms samples, of the proportional set sizes (PSS) of
the process and all its descendants: a Spark run's JVM and Python workers count, as do the
processes a CLI starts, and a page that forked workers share with their parent counts once, not
once per process (RSS would count it in each).
"""

import os
import platform
import subprocess
import threading
import time
from dataclasses import dataclass
from importlib import metadata

import psutil

SAMPLE_S = 0.05


@dataclass(frozen=True)
class Measured:
    wall_s: float
    peak_mb: float
    returncode: int
    stdout: str
    stderr: str


def _tree_memory(process: psutil.Process) -> int:
    total = 0
    for p in [process, *process.children(recursive=True)]:
        try:
            total += p.memory_full_info().pss
        except (psutil.NoSuchProcess, psutil.AccessDenied):  # ended between listing and sampling
            pass
    return total


def run_measured(cmd: list[str], cwd=None, env: dict[str, str] | None = None, timeout: float | None = None) -> Measured:
    """Run `cmd` to completion (killed with its descendants after `timeout` seconds), sampling its memory."""
    start = time.perf_counter()
    process = psutil.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            try:
                peak = max(peak, _tree_memory(process))
            except psutil.NoSuchProcess:  # the root process is gone: nothing more to see
                return
            done.wait(SAMPLE_S)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        # communicate() drains both pipes, so a chatty process cannot block on a full one
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        for p in [*process.children(recursive=True), process]:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        stdout, stderr = process.communicate()
    wall = time.perf_counter() - start
    done.set()
    sampler.join()
    return Measured(wall, peak / 2**20, process.returncode, stdout, stderr)


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def machine() -> dict:
    """Cores, memory and the versions that matter, for a report's header."""
    return {
        "cores": len(os.sched_getaffinity(0)),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        **{package: _version(package) for package in ("acryl-datahub", "pyspark", "dagster", "pyarrow")},
    }
