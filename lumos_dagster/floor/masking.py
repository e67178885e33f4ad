"""Secrets out of what Lumos shows: one rule for every URL, DSN and message that may quote one.

Lumos prints, logs and stores where things are (the store, a catalog server, a webhook), never
their credentials. A URL is read the way the client that gets it reads it, since a password
ends where the client thinks it does:

* a database URL (SQLAlchemy's and libpq's: `postgresql+psycopg://user:pass@host/db`) by
  SQLAlchemy's `make_url`: the password runs from the user's `:` to the first `@`, `/` and `?`
  included. A host holding an `@` still is what the user meant as password (`pa@ss` unescaped),
  so it is masked to the host's last `@` (`ambiguous_password` refuses such a URL before use);
  the user is kept, as SQLAlchemy's `hide_password` keeps it;
* an HTTP (or MongoDB) URL by `urllib.parse`, as requests and pymongo read it: the user
  information runs to the authority's last `@`, and all of it goes (a token is often the user
  part: `https://TOKEN@host`);
* in either, the value of a query key that names a credential (`?token=`, `&password=`,
  `sig=`, `X-Amz-Signature=`); and in a libpq string, `password=…` however it is quoted.

`shown_url` gives one URL's safe form, `mask_secrets` applies it to every URL in a text (a
driver's message) and masks credential keys; what either removes reads `***`.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

MASK = "***"

# a URL in free text: a scheme where a word starts (the look-behind keeps the search linear: tried from
# every character, a long word without `://` cost quadratic time), then up to a space or a quote
_URL = re.compile(r"(?<![\w+.-])[A-Za-z][\w+.-]*://[^\s'\"<>]*")
#: the punctuation of a sentence around a URL, not part of it (`… at mongodb://h:1: refused`)
_AFTER_URL = ".,;:!?)]"
# a credential's `key=value` in libpq strings, URL queries and messages: a key ending in a credential
# word (`sslpassword`, `access_token`, `X-Amz-Signature`), or `key`/`sig` alone or after `_ . -`
# (`key=`, `api_key=`, `sig=`, not `monkey=`); the value quoted (libpq's `\` escapes, maybe cut off) or
# up to a space or `&`, backslash escapes included (libpq's unquoted `a\ b` is one value)
_KEY_SECRET = re.compile(
    r"(?<![\w.-])([\w.-]*(?:password|passwd|pwd|token|secret|api_?key|signature|credential)s?|(?:[\w.-]*[_.-])?"
    r"(?:key|sig))(\s*=\s*)('(?:[^'\\]|\\.)*(?:'|$)|\"(?:[^\"\\]|\\.)*(?:\"|$)|(?:\\.|[^\s&\\])+)",
    re.IGNORECASE,
)
#: schemes whose clients read a URL as RFC 3986 does (urllib.parse): HTTP's (requests, urllib3) and
#: MongoDB's (pymongo); any other is a database URL, read as SQLAlchemy and libpq read it
_RFC3986 = frozenset({"http", "https", "ws", "wss", "mongodb", "mongodb+srv"})
#: why a database URL whose host holds an `@` is refused (never quoting it: that is the password)
AMBIGUOUS_PASSWORD = (
    "its host holds an '@': the driver ends the password at its first '@' and would take the rest of it "
    "for the host. Write each '@' of the password as %40"
)


def _keys(text: str) -> str:
    return _KEY_SECRET.sub(rf"\1\2{MASK}", text)


def shown_url(url: str) -> str:
    """`url` as Lumos shows and stores it: where it points, without its credentials (see the module).
    Text that is no URL has only its credential keys masked (a libpq `host=… password=…` string)."""
    scheme, sep, rest = url.partition("://")
    if not sep or not re.fullmatch(r"[A-Za-z][\w+.-]*", scheme):
        return _keys(url)
    if scheme.lower() in _RFC3986:
        return _rfc3986(scheme, rest)
    return _database(scheme, rest)


def _rfc3986(scheme: str, rest: str) -> str:
    try:
        parts = urlsplit(f"{scheme}://{rest}")
        parts.port  # noqa: B018  raises on a port that is no number (`u:pa/ss@h`: a password cut at its `/`)
    except ValueError:  # how a client reads it is anyone's guess: nothing of it shown
        return f"{scheme}://{MASK}"
    host = parts.netloc.rpartition("@")[2]
    tail = rest[len(parts.netloc) :]  # path, query and fragment as written
    return f"{scheme}://{host}{_keys(tail)}"


def _database(scheme: str, rest: str) -> str:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        url = make_url(f"{scheme}://{rest}")
    except (ArgumentError, ValueError):  # not SQLAlchemy's (a port that is no number…): mask to the last `@`
        user, at, after = rest.rpartition("@")
        return f"{scheme}://{MASK}@{_keys(after)}" if at else f"{scheme}://{_keys(rest)}"
    if url.username is None:  # no user information
        return f"{scheme}://{_keys(rest)}"
    end = rest.index("@")  # where make_url ends the user information
    user = rest[: rest.index(":")] if url.password is not None else rest[:end]
    host = url.host or ""
    end += 1 + (host.rindex("@") + 1 if "@" in host else 0)
    hidden = url.password is not None or "@" in host
    return f"{scheme}://{user}{':' + MASK if hidden else ''}@{_keys(rest[end:])}"


def ambiguous_password(url: str) -> bool:
    """Whether a database URL's host holds an `@`: its password then reaches the driver cut at its
    first `@`, the rest taken for the host (which the driver's errors quote). Such a URL never
    connects; `AMBIGUOUS_PASSWORD` says what to write instead."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() in _RFC3986:
        return False
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return "@" in (make_url(url).host or "")
    except (ArgumentError, ValueError):
        return False


def mask_secrets(text: str) -> str:
    """`text` (a message quoting a URL or a DSN, a store URL) with each URL in it as `shown_url`
    shows it and every other credential key's value masked: what Lumos prints or writes where it
    shows where something is."""

    def shown(m: re.Match) -> str:
        url = m.group().rstrip(_AFTER_URL)
        return shown_url(url) + m.group()[len(url) :]

    return _keys(_URL.sub(shown, text))


def webhook_shown(url: str) -> str:
    """Where a webhook posts, for messages, logs and tables: its scheme, host and port, and `/…` when
    there is more. Its user, password and query are credentials, and so is the path of Slack's and
    Teams' hooks: none of them is shown."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  raises on a port that is not a number
    except ValueError:
        return "(a URL that does not parse)"
    if not parts.scheme or not parts.hostname:
        return "(a URL that does not parse)"
    more = parts.path.strip("/") or parts.query or parts.fragment
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}" + ("/…" if more else "")
