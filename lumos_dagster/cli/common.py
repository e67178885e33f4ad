"""What every `lumos` command shares: the --config option and clean error exits."""

from __future__ import annotations

import click

from lumos_dagster.floor.config import CONFIG_ENV, LumosConfig, load_config
from lumos_dagster.floor.errors import LumosError
from lumos_dagster.store import SnapshotStore

config_option = click.option(
    "--config",
    "-c",
    "config_file",
    default=None,
    envvar=CONFIG_ENV,
    help=f"lumos.yaml to use (default: ${CONFIG_ENV} or ./lumos.yaml).",
)


#: `--format text|json`, the output of most commands
text_or_json = click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)


def load(config_file: str | None) -> LumosConfig:
    try:
        return load_config(config_file)
    except LumosError as exc:
        raise click.ClickException(str(exc)) from None


def open_store(config: LumosConfig) -> SnapshotStore:
    try:
        return SnapshotStore(config.store_url, f"{config.source_file}: store.url")
    except LumosError as exc:
        raise click.ClickException(str(exc)) from None
