"""Text that no store keeps: NUL and lone UTF-16 surrogates, found (`unstorable`, `unstorable_strings`)
and replaced where a file's own schema text holds them (`storable_json`)."""

from __future__ import annotations

import json
import re
from typing import Any, Iterator

#: characters that no text column keeps: NUL (PostgreSQL refuses it), and a lone UTF-16 surrogate,
#: which JSON's `\ud800` escape gives Python (a valid pair is one character) and no UTF-8 encoder
#: takes: a database's, an HTTP response's, a terminal's
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
#: how they are spelt in JSON text, where they can only be escapes (a false match costs a check)
_ESCAPED = re.compile(r"\\u(?:0000|d[89a-f])", re.IGNORECASE)
NUL, SURROGATE = "a NUL character", "a lone UTF-16 surrogate"


def unstorable(text: str) -> str | None:
    """What `text` holds that no store keeps (NUL, SURROGATE), or None."""
    found = _UNSTORABLE.search(text)
    return None if found is None else NUL if found.group() == "\x00" else SURROGATE


def unstorable_strings(doc: Any) -> Iterator[str]:
    """`where: holds what` (or `where: a key holds what`) for each string of a parsed JSON document
    that `unstorable` finds, where being its path (`datasets[0].snapshot.description`, `$` the top).
    Iterative: a document may nest deeper than Python recurses."""
    try:  # most documents hold none: the JSON encoder (in C) says so many times faster than the walk
        text = json.dumps(doc, ensure_ascii=False, default=str)
        if "\\u0000" not in text and _UNSTORABLE.search(text) is None:  # the encoder escapes NUL
            return
    except (RecursionError, ValueError):  # too deep for the encoder, or a circular reference
        pass
    stack: list[tuple[Any, str]] = [(doc, "")]
    while stack:
        node, where = stack.pop()
        if isinstance(node, str):
            if what := unstorable(node):
                yield f"{where or '$'}: holds {what}"
        elif isinstance(node, dict):
            inner = []
            for key, value in node.items():
                if what := unstorable(key):
                    yield f"{where or '$'}: a key holds {what}"
                else:
                    inner.append((value, f"{where}.{key}" if where else key))
            stack.extend(reversed(inner))  # in document order
        elif isinstance(node, list):
            stack.extend((value, f"{where}[{i}]") for i, value in reversed(list(enumerate(node))))


def _storable(doc: Any) -> Any:
    if isinstance(doc, str):
        return _UNSTORABLE.sub("\ufffd", doc)
    if isinstance(doc, dict):
        return {_storable(k): _storable(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_storable(v) for v in doc]
    return doc


def storable_json(text: str | bytes) -> Any:
    """The parsed JSON of a file's schema (UTF-8), with what `unstorable` finds replaced by U+FFFD: a file
    is read as it is, but a doc or name no store can keep must not make its dataset unreadable later."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    doc = json.loads(text)
    return _storable(doc) if _ESCAPED.search(text) else doc
