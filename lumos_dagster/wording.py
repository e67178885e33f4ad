"""Counts in words, for everything Lumos prints: "1 capture", "2 captures", never "1 captures"; a few
names, then how many others."""

from __future__ import annotations

from typing import Iterable


def plural(n: int, word: str, many: str | None = None) -> str:
    """`n` and `word`, or its plural (`many`, else `word` + "s") unless `n` is 1."""
    return f"{n} {word if n == 1 else many or word + 's'}"


def few(names: Iterable[str], shown: int = 3) -> str:
    """`a, b, c and 4 more`: the first `shown` of `names`, then how many others."""
    names = list(names)
    rest = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {rest} more" if rest > 0 else "")
