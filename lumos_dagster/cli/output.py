"""How `lumos` prints: statuses in colour on a terminal (click drops the colour elsewhere; NO_COLOR
drops it everywhere) and errors as one "Error: …" line, the same prefix as click's own."""

from __future__ import annotations

import os
import sys
from typing import NoReturn

import click

from lumos_dagster.governance.status import FAILED, HELD_BACK, NOT_MATERIALIZED, OK, WARNING

COLOURS = {OK: "green", WARNING: "yellow", FAILED: "red", HELD_BACK: "red", NOT_MATERIALIZED: "yellow"}


def paint(text: str, colour: str | None, bold: bool = False) -> str:
    """`text` styled for click.echo, which strips the style when stdout is not a terminal."""
    if colour is None or os.environ.get("NO_COLOR"):  # https://no-color.org: set and not empty
        return text
    return click.style(text, fg=colour, bold=bold)


def status(word: str, text: str | None = None) -> str:
    """`text` (default `word`) in the colour of the status `word`."""
    return paint(text or word, COLOURS.get(word))


def error(message: str) -> None:
    """`Error: message` on stderr: click's prefix for its own errors (ClickException, usage)."""
    click.echo(f"{paint('Error:', 'red')} {message}", err=True)


def fail(message: str, code: int = 1) -> NoReturn:
    """`Error: message`, then exit with `code` (2: bad input, as click's usage errors)."""
    error(message)
    sys.exit(code)
