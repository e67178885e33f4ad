"""Asking Dagster to load a code location again, so that datasets a sensor recorded (or removed)
become (or stop being) assets without anyone clicking "Reload".

Through the webserver's own GraphQL mutation (`reloadRepositoryLocation`), which reloads a code
server started with `dagster code-server start` (`make deploy`, `dagster dev`) and tells the daemon
and the webserver; the new load publishes the registry as the location's defs state (`lumos_dagster.assets.state`).
The webserver is `LUMOS_DAGSTER_URL` (set by `make deploy`), else `dagster dev`'s default
http://127.0.0.1:3000 when running under `dagster dev`. It runs in a thread: a load of thousands
of datasets takes seconds, longer than a tick should.
"""

from __future__ import annotations

import logging
import os
import threading
from urllib.parse import urlparse

log = logging.getLogger(__name__)

URL_ENV = "LUMOS_DAGSTER_URL"
DEV_URL = "http://127.0.0.1:3000"


def webserver_url() -> str | None:
    return os.environ.get(URL_ENV) or (DEV_URL if os.environ.get("DAGSTER_IS_DEV_CLI") else None)


def _reload(url: str, location: str) -> None:
    from dagster_graphql import DagsterGraphQLClient

    parsed = urlparse(url)
    try:
        client = DagsterGraphQLClient(parsed.hostname or "127.0.0.1", parsed.port, use_https=parsed.scheme == "https")
        info = client.reload_repository_location(location)
    except Exception as exc:  # the webserver is down, say: the next change asks again
        log.warning("could not ask %s to reload code location %s: %s", url, location, exc)
        return
    if info.failure_type is not None:
        log.warning("reloading code location %s failed: %s", location, info.message)


def request_reload(location: str | None) -> str:
    """Ask for code location `location` (None: unknown, as in a test) to be loaded again; what the
    tick's or run's log says about it."""
    url = webserver_url()
    if location is None or url is None:
        return f"reload the code location to see them as assets (or set {URL_ENV})"
    threading.Thread(target=_reload, args=(url, location), name="lumos-reload", daemon=True).start()
    return f"code location {location} reloading"
