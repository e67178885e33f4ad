"""How `lumos` prints: line by line, every control character made visible (`wording.visible`: a
name from storage can hold ESC sequences or a newline), statuses in colour on a terminal (click drops
the colour elsewhere; NO_COLOR drops it everywhere) and errors as one "Error: …" line, the same prefix
as click's own."""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any, NoReturn

import click

from lumos_dagster.floor.wording import visible
from lumos_dagster.governance.status import FAILED, HELD_BACK, NOT_MATERIALIZED, OK, WARNING

COLOURS = {OK: "green", WARNING: "yellow", FAILED: "red", HELD_BACK: "red", NOT_MATERIALIZED: "yellow"}

# `paint` marks its text with private-use characters and a secret of this process; `echo` makes the
# rest of the line visible, then turns the marks into colour. A name cannot forge a mark it cannot
# know, so no escape sequence but Lumos' own reaches the terminal.
_MARK = f"\ue000{os.urandom(8).hex()}"
_PAINTED = re.compile(f"{_MARK}([a-z]*)(!?)\ue001(.*?){_MARK}\ue001")


def paint(text: str, colour: str | None, bold: bool = False) -> str:
    """`text` styled for `echo`, which drops the style when stdout is not a terminal."""
    if colour is None or os.environ.get("NO_COLOR"):  # https://no-color.org: set and not empty
        return text
    return f"{_MARK}{colour}{'!' if bold else ''}\ue001{text}{_MARK}\ue001"


def status(word: str, text: str | None = None) -> str:
    """`text` (default `word`) in the colour of the status `word`."""
    return paint(text or word, COLOURS.get(word))


def shown(line: str) -> str:
    """One line as `echo` prints it: visible, in its colours."""
    return _PAINTED.sub(lambda m: click.style(m[3], fg=m[1], bold=bool(m[2])), visible(line))


def echo(*lines: str, err: bool = False) -> None:
    """Each of `lines` on a line of its own, as `shown` (a line holding a newline shows it as `\\n`):
    a text of several lines is given split, e.g. `echo(*report.render().split("\n"))`."""
    click.echo("\n".join(map(shown, lines)), err=err)


def echo_json(doc: Any, **dumps: Any) -> None:
    """`doc` as indented JSON, a line each (JSON writes a name's control characters as escapes already)."""
    echo(*json.dumps(doc, indent=2, **dumps).split("\n"))


def error(message: str) -> None:
    """`Error: message` on stderr: click's prefix for its own errors (ClickException, usage)."""
    echo(f"{paint('Error:', 'red')} {message}", err=True)


def fail(message: str, code: int = 1) -> NoReturn:
    """`Error: message`, then exit with `code` (2: bad input, as click's usage errors)."""
    error(message)
    sys.exit(code)
