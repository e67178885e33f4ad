"""How Lumos words what it prints: counts ("1 capture", "2 captures", never "1 captures"), a few names
then how many others, and names from storage with their control characters made visible."""

from __future__ import annotations

import logging
import re
from typing import Iterable

# what a terminal, a log reader or a spreadsheet would act on rather than show: C0 and C1 controls
# and DEL (ESC opens the sequences that retitle a window, write the clipboard or clear the screen; a
# newline starts a line of its own), the Unicode line and paragraph separators, and the
# bidirectional controls that reorder what is shown (Trojan Source)
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(m: re.Match) -> str:
    c = m.group()
    if c in _NAMED:
        return _NAMED[c]
    # below 0x20 as Python writes it; the rest as JSON does too, so a JSON line stays JSON
    return f"\\x{ord(c):02x}" if ord(c) < 0x20 else f"\\u{ord(c):04x}"


def visible(text: str) -> str:
    """`text` (a name from storage: a dataset, a file, a field) with each control character written
    out as its escape (`\\x1b`, `\\n`, `\\u202e`): what every face of Lumos shows of a name, on a
    terminal, in a log, a report or Dagster. Other text, and a backslash, are left as they are."""
    return _CONTROL.sub(_escaped, text)


class VisibleLog(logging.Filter):
    """Makes the messages of a log (a Dagster step's `context.log`) visible line by line: what a
    message quotes of storage cannot drive the terminal that shows the run. A message's own lines
    stay lines; a name's newline within one was made visible where the message was put together."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        record.msg, record.args = "\n".join(map(visible, text.split("\n"))), None
        return True


VISIBLE_LOG = VisibleLog()


def plural(n: int, word: str, many: str | None = None) -> str:
    """`n` and `word`, or its plural (`many`, else `word` + "s") unless `n` is 1."""
    return f"{n} {word if n == 1 else many or word + 's'}"


def few(names: Iterable[str], shown: int = 3) -> str:
    """`a, b, c and 4 more`: the first `shown` of `names`, then how many others."""
    names = list(names)
    rest = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {rest} more" if rest > 0 else "")
