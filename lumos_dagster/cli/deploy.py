"""`lumos deploy`: Lumos as a Dagster deployment, run the way docs/deploy.md describes one — Dagster's
own PostgreSQL storage, the daemon with queued runs and run monitoring, one code server per code
location (`dagster code-server start`, which the webserver can reload) and the webserver — each a
process that a real supervisor keeps: supervisord on this machine (`up`, `status`, `down`), or the
configuration for systemd or for Dagster's Helm chart (`config`). Everything under one folder:

    <folder>/dagster/dagster.yaml   the instance (DAGSTER_HOME of every process and run worker)
    <folder>/workspace.yaml         one grpc_server per code location
    <folder>/supervisord.conf       the processes, for supervisord (supervisor.sock: its control socket)
    <folder>/logs/<process>.log     what each process prints (supervisord.log: supervisord's own)
    <folder>/deployment.json        the webserver's port and the code locations, for `status` and `down`

What the files say is deploy_config.py; starting and looking at a deployment, deployment.py."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import click
import yaml

from lumos_dagster.cli.deploy_config import (
    DEFAULT_FOLDER,
    DEFAULT_PG_URL,
    LOCATION_NAME,
    PG_URL_ENV,
    DeployError,
    bin_path,
)
from lumos_dagster.cli.deployment import Deployment
from lumos_dagster.cli.output import echo


def _locations(configs: tuple[str, ...]) -> dict[str, str]:
    """`NAME=PATH` or `PATH` (named after the file: sales.yaml → sales) → {name: path}."""
    out: dict[str, str] = {}
    for item in configs or (os.environ.get("LUMOS_CONFIG", "lumos.yaml"),):
        named = re.fullmatch(rf"({LOCATION_NAME})=(.+)", item)
        name, path = named.groups() if named else (Path(item).stem, item)
        if name in out:
            raise click.UsageError(f"two code locations named {name!r}: name them, --config NAME=PATH")
        if not Path(path).is_file():
            raise click.UsageError(f"{path}: no such lumos.yaml")
        out[name] = path
    return out


def _layout(options):
    """The options `up` and `config` share, in front of a command."""
    for option in reversed([
        click.option("--config", "-c", "configs", multiple=True,
                     help="A code location's lumos.yaml, as PATH (named after the file) or NAME=PATH; repeat for "
                     "several (default: $LUMOS_CONFIG or ./lumos.yaml)."),
        folder_option,
        click.option("--port", type=click.IntRange(1, 65535), default=3000, show_default=True,
                     help="The webserver's port."),
        click.option("--code-port", type=click.IntRange(1, 65535), default=None,
                     help="First code server port (default: free)."),
        click.option("--max-concurrent-runs", type=click.IntRange(1), default=2, show_default=True,
                     help="Run workers at once."),
        click.option("--pg-url", envvar=PG_URL_ENV, default=DEFAULT_PG_URL, show_default=True,
                     help="Dagster's database."),
        click.option("--tuned", is_flag=True,
                     help="Lumos' tuning of Dagster (resources/tuning): its grouped PostgreSQL event log."),
    ]):  # fmt: skip
        options = option(options)
    return options


def _deployment(
    configs: tuple[str, ...],
    folder: str,
    port: int,
    code_port: int | None,
    max_concurrent_runs: int,
    pg_url: str,
    tuned: bool,
) -> Deployment:
    try:
        return Deployment(folder, _locations(configs), port, max_concurrent_runs, pg_url, tuned, code_port)
    except DeployError as exc:
        raise click.ClickException(str(exc)) from None


folder_option = click.option(
    "--folder", default=DEFAULT_FOLDER, show_default=True, help="The deployment's folder (DAGSTER_HOME, logs)."
)


@click.group()
def deploy() -> None:
    """A Dagster deployment: PostgreSQL storage, the daemon, queued runs, one code server per code
    location and the webserver, kept by supervisord here, or by systemd or Kubernetes (docs/deploy.md)."""


@deploy.command()
@_layout
@click.option("--timeout", type=float, default=180, show_default=True, help="Seconds to wait for every location.")
@click.option("--reset", is_flag=True, help="Drop Dagster's database first: its runs, ticks and code-location state.")
def up(
    configs: tuple[str, ...],
    folder: str,
    port: int,
    code_port: int | None,
    max_concurrent_runs: int,
    pg_url: str,
    tuned: bool,
    timeout: float,
    reset: bool,
) -> None:
    """Start the deployment under supervisord; return once every code location is loaded."""
    deployment = _deployment(configs, folder, port, code_port, max_concurrent_runs, pg_url, tuned)
    try:
        seconds = deployment.up(timeout, reset)
    except DeployError as exc:
        raise click.ClickException(str(exc)) from None
    names = ", ".join(x.name for x in deployment.locations)
    echo(f"code location(s) {names} loaded in {seconds:.1f} s; logs in {deployment.folder / 'logs'}")
    # nobody needs to materialize anything: sensors/storage.py, first_snapshots
    echo("the sensors' first tick (within a minute) snapshots every dataset never materialized; then the "
         "sensors and schedules keep them")  # fmt: skip
    echo(f"Dagster UI: {deployment.url}   (stop: lumos deploy down --folder {folder})")


@deploy.command()
@folder_option
@click.option("--timeout", type=float, default=60, show_default=True, help="Seconds to wait for supervisord to exit.")
def down(folder: str, timeout: float) -> None:
    """Stop every process of the deployment, their children included, and supervisord."""
    path = Path(folder)
    deployment = Deployment.open(path) if (path / "deployment.json").is_file() else Deployment(path)
    canceled = deployment.cancel_runs()
    stopped = deployment.down(timeout)
    if canceled:
        echo(f"canceled {len(canceled)} run(s) in flight: {', '.join(canceled)}")
    echo(f"stopped {', '.join(stopped)}" if stopped else f"nothing running from {path.absolute()}")


@deploy.command()
@folder_option
def status(folder: str) -> None:
    """supervisord's view of each process (`supervisorctl status`), each one's memory with its
    children, each code location's load status and the daemon's health."""
    try:
        deployment = Deployment.open(folder)
        states = deployment.states()
    except DeployError as exc:
        raise click.ClickException(str(exc)) from None
    if not states:
        raise click.ClickException(f"supervisord is not running from {deployment.folder}: `lumos deploy up`")
    ctl = [bin_path("supervisorctl"), "-c", str(deployment.supervisord_conf), "status"]
    echo(*subprocess.run(ctl, capture_output=True, text=True).stdout.splitlines())
    rss = deployment.rss_mb()
    echo(
        "memory (MB, with children): " + ", ".join(f"{n} {'-' if mb is None else f'{mb:.0f}'}" for n, mb in rss.items())
    )
    try:
        locations = deployment.location_status()
    except Exception as exc:
        echo(f"webserver {deployment.url}: not answering ({type(exc).__name__})")
        sys.exit(1)
    echo(f"{'code location':<32} status")
    for name, (load, error) in locations.items():
        echo(f"{name:<32} {'ERROR: ' + error.splitlines()[0] if error else load}")
    unhealthy = deployment.unhealthy_daemons()
    echo(f"daemons not healthy: {', '.join(unhealthy)}" if unhealthy else "daemons: healthy")
    echo(f"Dagster UI: {deployment.url}")
    if any(s["statename"] != "RUNNING" for s in states.values()) or unhealthy or any(e for _, e in locations.values()):
        sys.exit(1)


@deploy.command()
@_layout
@click.option("--format", "fmt", type=click.Choice(["supervisord", "systemd", "helm"]), default="supervisord",
              show_default=True, help="supervisord or systemd on this machine, or Dagster's Helm chart.")  # fmt: skip
@click.option(
    "--output", "-o", type=click.Path(file_okay=False), help="Where systemd's units go (default: FOLDER/systemd)."
)
@click.option("--image", default="lumos:latest", show_default=True, help="helm: the image Lumos is installed in.")
@click.option("--defs-state", default="s3://your-bucket/lumos-defs-state", show_default=True,
              help="helm: where code locations' state goes (storage every pod shares).")  # fmt: skip
@click.option("--release", default="dagster", show_default=True, help="helm: the chart's release name.")
def config(
    configs: tuple[str, ...],
    folder: str,
    port: int,
    code_port: int | None,
    max_concurrent_runs: int,
    pg_url: str,
    tuned: bool,
    fmt: str,
    output: str | None,
    image: str,
    defs_state: str,
    release: str,
) -> None:
    """Write the deployment's configuration without starting anything: FOLDER's dagster.yaml,
    workspace.yaml and supervisord.conf, plus systemd's units (FOLDER/systemd), or print the values of
    Dagster's Helm chart (`helm install dagster dagster/dagster -f values.yaml`)."""
    deployment = _deployment(configs, folder, port, code_port, max_concurrent_runs, pg_url, tuned)
    try:
        if fmt == "helm":
            values = deployment.helm_values(image, defs_state, release)
            echo("# Dagster's Helm chart (dagster/dagster): a user deployment per code location, its lumos.yaml "
                 "in ConfigMap lumos-config (kubectl create configmap lumos-config --from-file=NAME.yaml=…), "
                 "the database password in the secret global.postgresqlSecretName names")  # fmt: skip
            echo(*yaml.safe_dump(values, sort_keys=False).splitlines())
            return
        deployment.write()
        if fmt == "systemd":
            target = Path(output) if output else deployment.folder / "systemd"
            target.mkdir(parents=True, exist_ok=True)
            for name, text in deployment.systemd_units().items():
                (target / name).write_text(text)
            echo(
                f"systemd units in {target}: copy them to /etc/systemd/system, then systemctl enable --now lumos.target"
            )
        else:
            echo(f"supervisord -c {deployment.supervisord_conf}   (supervisorctl -c … status | shutdown)")
    except DeployError as exc:
        raise click.ClickException(str(exc)) from None
