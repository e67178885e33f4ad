"""The HTTP API: a FastAPI application over a `Lumos` facade (`lumos serve` runs it with uvicorn).

Every path but `/health` needs a bearer token whose scope covers it (read: the GETs and the OpenAPI
document; check: POST a proposed schema, the gate; write: accept, release, and only with
`api.writes: true`). A request without a valid token is refused before its body is read, costs no
hashing (auth.py) and writes nothing. Bodies are limited in size, requests in time, and a proposed
schema is read in a process killed at the deadline (limits.py). Errors are `{"error": {status,
code, message, request_id}}` and never carry a token, a stack trace, the store's address or the
request's input. docs/api.md describes it all.
"""

import logging

import anyio
from fastapi import Depends, FastAPI
from fastapi.routing import APIRoute

from lumos_dagster.api import limits
from lumos_dagster.api.access import single_values
from lumos_dagster.api.auth import FAILED_PER_SECOND, TokenVerifier
from lumos_dagster.api.errors import add_error_handlers
from lumos_dagster.api.middleware import Authenticate, Guard
from lumos_dagster.api.routes import changes, datasets, health, reports
from lumos_dagster.api.service import Lumos, _lumos_version
from lumos_dagster.floor.api_config import ApiConfig

log = logging.getLogger("lumos.api")

API_TITLE = "Lumos API"
#: the routers of the API's areas, in the order their routes are matched
AREAS = (health, datasets, changes, reports)


def create_app(lumos: Lumos, api: ApiConfig | None = None) -> FastAPI:
    """The FastAPI application; `build_app` wraps it in the limits (what `lumos serve` runs)."""
    api = api or lumos.config.api
    verify = TokenVerifier(api.tokens)
    app = FastAPI(
        dependencies=[Depends(single_values)],
        title=API_TITLE,
        version=_lumos_version(),
        description="Ask Lumos' snapshot store: datasets, versions, compatibility, impact, cost, search. "
        "See docs/api.md.",
        docs_url=None,  # the Swagger page loads its scripts from a CDN: docs/openapi.json is the reference
        redoc_url=None,
    )
    app.add_middleware(Authenticate, verify=verify)
    if verify.without_id:
        log.warning("api.tokens %s carry no id (older --new-token, or --hash-token of a token of your own): a "
                    "token presented without an id is checked against each of them, rationed to %s failed "
                    "checks a second; re-issue them with `lumos serve --new-token`", ", ".join(verify.without_id),
                    FAILED_PER_SECOND)  # fmt: skip
    add_error_handlers(app)
    for area in AREAS:
        app.include_router(area.router)
    # what the endpoints depend on (access.py): the service, its settings, the limiters of /health (one
    # thread: it never waits for the request workers) and of checks (a flood of them keeps no read
    # waiting), the operations (FastAPI includes a router lazily: app.routes does not list them) and
    # the query parameters they declare
    app.state.lumos, app.state.api = lumos, api
    app.state.health_thread, app.state.checking = anyio.CapacityLimiter(1), anyio.CapacityLimiter(limits.WORKERS)
    app.state.routes = [route for area in AREAS for route in area.router.routes if isinstance(route, APIRoute)]
    app.state.declared = {p.alias for route in app.state.routes for p in route.dependant.query_params}
    return app


def build_app(lumos: Lumos, api: ApiConfig | None = None):
    """The ASGI application `lumos serve` runs: the API inside its limits, the process that reads
    proposed schemas started."""
    api = api or lumos.config.api
    limits.start("lumos_dagster.api.service")
    return Guard(create_app(lumos, api), api.limits.max_body_bytes, api.limits.request_timeout)


def openapi_document(api: ApiConfig | None = None) -> dict:
    """The OpenAPI document, without a store (docs/openapi.json is this)."""

    class _Offline:
        config = None

    app = create_app(_Offline(), api or ApiConfig())  # type: ignore[arg-type]
    return app.openapi()
