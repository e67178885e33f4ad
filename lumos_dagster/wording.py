"""Counts in words, for everything Lumos prints: "1 capture", "2 captures", never "1 captures"."""

from __future__ import annotations


def plural(n: int, word: str, many: str | None = None) -> str:
    """`n` and `word`, or its plural (`many`, else `word` + "s") unless `n` is 1."""
    return f"{n} {word if n == 1 else many or word + 's'}"
