"""`lumos docs`: this Lumos' documentation, installed with it (package data: lumos_dagster/docs), which the
messages and lumos.yaml's comments name as `lumos docs TOPIC`. A copy that goes with the code, offline, and
never a page of another version."""

from __future__ import annotations

import difflib
from importlib.resources import files
from pathlib import Path

import click

from lumos_dagster.cli.output import echo
from lumos_dagster.floor.wording import few


def pages() -> dict[str, Path]:
    """Topic → its installed page."""
    folder = Path(str(files("lumos_dagster") / "docs"))
    return {p.stem: p for p in sorted(folder.glob("*.md"))}


@click.command()
@click.argument("topic", required=False)
@click.option("--path", "path_only", is_flag=True, help="Print where the page is, not the page.")
def docs(topic: str | None, path_only: bool) -> None:
    """Print the documentation page TOPIC (configuration, sources, compatibility…: docs/TOPIC.md), or list
    the pages and where they are installed."""
    found = pages()
    if topic is None:
        for name, path in found.items():
            echo(f"{name:<14} {path}")
        return
    name = Path(topic).stem  # `configuration`, `configuration.md` and `docs/configuration.md` alike
    if name not in found:
        close = difflib.get_close_matches(name, list(found), n=3, cutoff=0.5)
        hint = f"did you mean {' or '.join(close)}?" if close else f"the pages: {few(list(found), len(found))}"
        raise click.ClickException(f"no documentation page {topic} ({hint})")
    echo(*([str(found[name])] if path_only else found[name].read_text().removesuffix("\n").split("\n")))
