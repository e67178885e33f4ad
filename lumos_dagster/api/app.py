"""The HTTP API: a FastAPI application over a `Lumos` facade (`lumos serve` runs it with uvicorn).

Every path but `/health` needs a bearer token whose scope covers it (read: the GETs and the OpenAPI
document; check: POST a proposed schema, the gate; write: accept, release, and only with
`api.writes: true`). A request without a valid token is refused before its body is read, costs no
hashing (auth.py) and writes nothing. Bodies are limited in size, requests in time, and a proposed
schema is read in a process killed at the deadline (limits.py). Errors are `{"error": {status,
code, message, request_id}}` and never carry a token, a stack trace, the store's address or the
request's input. docs/api.md describes it all.
"""

import asyncio
import json
import logging
import re
import time
import uuid
from collections import Counter
from collections.abc import MutableMapping
from datetime import datetime
from typing import Annotated, Any

import anyio
import anyio.to_thread
import sqlalchemy as sa
from fastapi import Body, Depends, FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BeforeValidator
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from lumos_dagster.api import audit, limits
from lumos_dagster.api import models as m
from lumos_dagster.api.auth import FAILED_PER_SECOND, Principal, Throttled, TokenVerifier
from lumos_dagster.api.service import UNKNOWN_DATASET, Conflict, Invalid, Lumos, NotFound, _lumos_version
from lumos_dagster.api_config import ApiConfig
from lumos_dagster.errors import LumosError
from lumos_dagster.reports.cost import MONTH

log = logging.getLogger("lumos.api")

API_TITLE = "Lumos API"
CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed",
         409: "conflict", 413: "too_large", 414: "uri_too_long", 415: "unsupported_media_type", 422: "invalid",
         429: "too_many_requests", 500: "internal", 503: "unavailable", 504: "timeout"}  # fmt: skip
#: what any request may be answered, each status documented for every operation: a body that does not
#: parse (400), no valid token (401, 429), a token without the scope (403), what is not there (404), a
#: body or URL past the limits (413, 414), what the schema refuses (422), a store that cannot be read
#: (503), the deadline (504), a bug (500)
ANY = (400, 401, 403, 404, 413, 414, 422, 429, 500, 503, 504)
ERRORS: dict[int | str, dict[str, Any]] = {s: {"model": m.ErrorBody} for s in ANY}
#: paths answered without a token
OPEN = frozenset({"/health"})
#: what the former paths `/v1/datasets/{name}/…` address besides a dataset's detail
SUBRESOURCES = ("history", "diff", "impact")


class ApiError(HTTPException):
    def __init__(self, status: int, message: str, code: str | None = None, headers: dict | None = None):
        super().__init__(status, message, headers)
        self.code = code or CODES.get(status, "error")


def _body(request_id: str, status: int, message: str, code: str | None = None) -> dict:
    return {"error": {"status": status, "code": code or CODES.get(status, "error"), "message": message,
                      "request_id": request_id}}  # fmt: skip


def _rid(request: Request) -> str:
    return request.scope.get("lumos.request_id") or "-"


async def _reply(send, rid: str, status: int, message: str, headers: dict[str, str] | None = None) -> None:
    """An error answer straight from an ASGI layer, before the application has seen the request."""
    body = json.dumps(_body(rid, status, message)).encode()
    extra = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *extra]})  # fmt: skip
    await send({"type": "http.response.body", "body": body})


def _allowed(app: FastAPI, scope: MutableMapping[str, Any]) -> list[str]:
    """The methods the path of `scope` answers, whichever route each is on (a 405's Allow)."""
    methods = {method for route in app.routes if isinstance(route, APIRoute)
               for method in route.methods or () if route.matches(scope)[0] != Match.NONE}  # fmt: skip
    return sorted(methods)


_ISO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?")


def _iso_time(value: Any) -> Any:
    """An ISO 8601 time, as the document says (`format: date-time`): not a number, which pydantic
    would read as seconds since 1970 (`since=0.5`)."""
    if isinstance(value, str) and not _ISO_TIME.fullmatch(value):
        raise ValueError("not an ISO 8601 date-time, e.g. 2026-11-25T00:00:00Z")
    return value


class Guard:
    """The outermost layer: a request id, the body size limit and the time limit (`limits.deadline`)."""

    def __init__(self, app, max_body: int, timeout: float):
        self.app, self.max_body, self.timeout = app, max_body, timeout

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        rid = uuid.uuid4().hex
        scope["lumos.request_id"] = rid
        limits.deadline.set(time.monotonic() + self.timeout)
        started = False

        def reply(status: int, message: str):
            return _reply(send, rid, status, message, {"x-request-id": rid, "connection": "close"})

        if len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"") > limits.MAX_URL_BYTES:
            return await reply(414, f"the request's URL is longer than {limits.MAX_URL_BYTES} bytes")
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None:
            try:
                too_large = int(length) > self.max_body
            except ValueError:
                return await reply(400, "malformed Content-Length")
            if too_large:
                return await reply(413, f"request body larger than {self.max_body} bytes")
        seen = 0

        async def limited_receive():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body:
                    raise ApiError(413, f"request body larger than {self.max_body} bytes")
            return message

        async def tracked_send(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message = {**message, "headers": [*message.get("headers", []), (b"x-request-id", rid.encode())]}
            await send(message)

        try:
            await asyncio.wait_for(self.app(scope, limited_receive, tracked_send), self.timeout)
        except TimeoutError:
            log.warning("request %s %s timed out after %.1f s [%s]", scope.get("method"), scope.get("path"),
                        self.timeout, rid)  # fmt: skip
            if not started:
                await reply(504, f"the request took longer than {self.timeout:g} s")


class Authenticate:
    """Who calls, before anything else is done for the request: its body is not even read. A request
    without a valid token is answered 401 (429 when failed token checks are rationed) from here: it
    reaches no endpoint, takes no worker thread and writes nothing; refusals are logged, a line per
    10 s at most, so that a flood of them does not flood the log either."""

    def __init__(self, app, verify: TokenVerifier):
        self.app, self.verify = app, verify
        self._refused, self._next_line = 0, 0.0

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] in OPEN:
            return await self.app(scope, receive, send)
        rid = scope.get("lumos.request_id") or "-"
        scheme, _, token = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1").partition(" ")
        try:
            who = await self.verify.authenticate(token.strip() if scheme.lower() == "bearer" else None)
        except Throttled:
            self._log(scope, 429, rid)
            return await _reply(send, rid, 429, "too many failed token checks: retry in a second",
                                {"retry-after": "1"})  # fmt: skip
        if who is None:
            self._log(scope, 401, rid)
            return await _reply(send, rid, 401, "a valid bearer token is needed", {"www-authenticate": "Bearer"})
        scope["lumos.principal"] = who
        await self.app(scope, receive, send)

    def _log(self, scope, status: int, rid: str) -> None:
        self._refused += 1
        now = time.monotonic()
        if now >= self._next_line:
            who = (scope.get("client") or ("-",))[0]
            audit.log.warning("refused %s %s from %s: %s, no valid token [%s] (%d since the last such line)",
                              scope.get("method"), scope.get("path"), who, status, rid, self._refused)  # fmt: skip
            self._refused, self._next_line = 0, now + 10


def create_app(lumos: Lumos, api: ApiConfig | None = None) -> FastAPI:
    """The FastAPI application; `build_app` wraps it in the limits (what `lumos serve` runs)."""
    api = api or lumos.config.api
    verify = TokenVerifier(api.tokens)
    bearer = HTTPBearer(auto_error=False, description="A token from lumos.yaml's api.tokens (its hash there).")
    declared: set[str] = set()  # the query parameters of the operations, filled in below

    def single_values(request: Request) -> None:
        """Each query parameter at most once: `top=1&top=2` was taken as 2, silently. Only a parameter
        Lumos declares is named (the others are the client's input, never repeated back)."""
        counts = Counter(key for key, _ in request.query_params.multi_items())
        repeated = sorted(key for key, n in counts.items() if n > 1)
        if repeated:
            named = [key for key in repeated if key in declared]
            raise ApiError(
                422, f"query.{named[0]}: given more than once" if named else "query: a parameter given twice"
            )

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

    # ------------------------------------------------------------ errors

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException):
        code = getattr(exc, "code", None)
        message = exc.detail if isinstance(exc.detail, str) else CODES.get(exc.status_code, "error")
        headers = getattr(exc, "headers", None)
        if exc.status_code == 405:  # every method of the path, not only those of the route that matched
            headers = {**(headers or {}), "Allow": ", ".join(_allowed(app, request.scope))}
        return JSONResponse(_body(_rid(request), exc.status_code, message, code), exc.status_code, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        parts = []
        for e in exc.errors()[:5]:  # never the input itself: it may be anything the client sent
            loc = [str(p) for p in e.get("loc", ()) if p != "body"]
            if e.get("type") == "extra_forbidden":  # the last part is the client's own key
                loc, e = loc[:-1], {"msg": "unknown field"}
            parts.append(f"{'.'.join(loc) or 'body'}: {e.get('msg', 'invalid')}")
        return JSONResponse(_body(_rid(request), 422, "; ".join(parts) or "invalid request"), 422)

    @app.exception_handler(NotFound)
    async def _not_found(request: Request, exc: NotFound):
        return JSONResponse(_body(_rid(request), 404, str(exc)), 404)

    @app.exception_handler(Invalid)
    async def _bad(request: Request, exc: Invalid):
        return JSONResponse(_body(_rid(request), 422, str(exc)), 422)

    @app.exception_handler(Conflict)
    async def _conflict(request: Request, exc: Conflict):
        return JSONResponse(_body(_rid(request), 409, str(exc)), 409)

    @app.exception_handler(limits.Expired)
    async def _expired(request: Request, exc: limits.Expired):
        return JSONResponse(_body(_rid(request), 504, "the request took too long"), 504)

    @app.exception_handler(sa.exc.SQLAlchemyError)
    async def _store(request: Request, exc: sa.exc.SQLAlchemyError):
        text = str(getattr(exc, "orig", exc)).lower()
        if "interrupted" in text or "statement timeout" in text or "canceling statement" in text:
            return JSONResponse(_body(_rid(request), 504, "the request took too long"), 504)
        log.error("store error [%s]: %s", _rid(request), type(exc).__name__)
        return JSONResponse(_body(_rid(request), 503, "the snapshot store cannot be read"), 503)

    @app.exception_handler(LumosError)
    async def _lumos(request: Request, exc: LumosError):
        log.error("error [%s]: %s", _rid(request), type(exc).__name__)
        return JSONResponse(_body(_rid(request), 503, "the snapshot store cannot be read"), 503)

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception):
        log.exception("internal error [%s]", _rid(request))
        return JSONResponse(_body(_rid(request), 500, "internal error"), 500)

    # ------------------------------------------------------------ access

    # declares the bearer scheme in the OpenAPI document; Authenticate has checked the token already
    Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]

    def principal(request: Request) -> Principal:
        who = request.scope.get("lumos.principal")
        if who is None:  # only an application served without Authenticate gets here
            raise ApiError(401, "a valid bearer token is needed", headers={"WWW-Authenticate": "Bearer"})
        return who

    def scope(name: str):
        async def check(request: Request, _: Credentials) -> Principal:
            who = principal(request)
            if name not in who.scopes:
                raise ApiError(403, f"this token lacks the {name!r} scope")
            return who

        return check

    Read = Annotated[Principal, Depends(scope("read"))]
    Check = Annotated[Principal, Depends(scope("check"))]

    def writer(action: str):
        def check(request: Request, _: Credentials) -> Principal:
            who = principal(request)
            try:
                if not api.writes:
                    raise ApiError(403, "writes are disabled (api.writes: false)", code="writes_disabled")
                if "write" not in who.scopes:
                    raise ApiError(403, "this token lacks the 'write' scope")
            except ApiError as exc:
                _audit(request, who.name, action, "refused", exc.status_code)
                raise
            return who

        return check

    def _audit(request: Request, who: str, action: str, outcome: str, status: int, detail: dict | None = None):
        target = request.query_params.get("name") or request.path_params.get("name") or request.url.path
        client = request.client.host if request.client else None
        audit.record(lumos._writer.engine, who, action, target, outcome, status, client, _rid(request), detail)

    def write(request: Request, who: Principal, action: str, detail: dict, do):
        try:
            result = do()
        except (NotFound, Invalid, Conflict) as exc:
            status = {NotFound: 404, Invalid: 422, Conflict: 409}[type(exc)]
            _audit(request, who.name, action, CODES[status], status, detail)
            raise
        except Exception:
            _audit(request, who.name, action, "error", 500, detail)
            raise
        _audit(request, who.name, action, "ok", 200, detail)
        return result

    Name = Annotated[str, Query(min_length=1, max_length=1024, description="Dataset name, e.g. `sales/orders`.")]
    Old = Annotated[str, Query(max_length=64, description="A version, e.g. 1.0.0, or `latest`.")]
    New = Annotated[str, Query(max_length=64)]
    Depth = Annotated[int | None, Query(ge=1, le=1000)]

    # ------------------------------------------------------------ endpoints

    health_thread = anyio.CapacityLimiter(1)  # /health never waits for the request workers

    # without a token: no 401, 403 or 429; nothing to be missing (404)
    health_answers = {
        **{s: v for s, v in ERRORS.items() if s not in (401, 403, 404, 429)},
        503: {"model": m.Health},
    }

    @app.get("/health", response_model=m.Health, tags=["health"], responses=health_answers)
    async def health():
        """Whether the store can be read. No token needed. HEAD answers the same, without a body."""
        h = await anyio.to_thread.run_sync(lumos.health, limiter=health_thread)
        return h if h.status == "ok" else JSONResponse(h.model_dump(), 503)

    app.add_api_route("/health", health, methods=["HEAD"], response_model=m.Health, tags=["health"],
                      responses=health_answers, operation_id="health_head")  # fmt: skip

    @app.get("/v1/datasets", response_model=m.DatasetPage, tags=["datasets"], responses=ERRORS)
    def datasets(
        _: Read,
        q: Annotated[str | None, Query(max_length=256, description="Name contains (case-insensitive).")] = None,
        platform: Annotated[str | None, Query(max_length=128)] = None,
        domain: Annotated[str | None, Query(max_length=256)] = None,
        offset: Annotated[int, Query(ge=0)] = 0,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 50,
    ):
        """Datasets by name, filtered, a page at a time, with their current version."""
        return lumos.datasets(q, platform, domain, offset, min(limit, api.limits.page_size))

    @app.get("/v1/dataset", response_model=m.DatasetDetail, tags=["datasets"], responses=ERRORS)
    def dataset(_: Read, name: Name):
        """A dataset: current schema, version, owners, tags, quality, cost, and its latest capture."""
        return lumos.dataset(name)

    @app.get("/v1/dataset/history", response_model=list[m.VersionInfo], tags=["datasets"], responses=ERRORS)
    def history(_: Read, name: Name):
        """The version timeline (`lumos history`)."""
        return lumos.history(name)

    @app.get("/v1/dataset/diff", response_model=m.ChangeSet, tags=["datasets"], responses=ERRORS)
    def diff(_: Read, name: Name, old: Old, new: New = "latest", policy: m.PolicyName | None = None):
        """The changes between two versions, judged under the policy (`lumos diff NAME@OLD NAME@NEW`)."""
        return lumos.diff(name, old, new, policy)

    @app.get("/v1/dataset/impact", response_model=m.Impact, tags=["datasets"], responses=ERRORS)
    def impact(_: Read, name: Name, depth: Depth = None):
        """Who is downstream, and which breaking changes reach them (`lumos impact NAME`)."""
        return lumos.impact(name, depth)

    # checks wait for a worker process on threads of their own: a flood of them keeps no read waiting
    checking = anyio.CapacityLimiter(limits.WORKERS)

    @app.post("/v1/dataset/check", response_model=m.ChangeSet, tags=["checks"], responses=ERRORS)
    async def check(_: Check, name: Name, proposal: Annotated[m.CheckRequest, Body()]):
        """Is this proposed schema compatible with the dataset under its policy? The verdict `lumos diff`
        gives (`passed` is its exit code 0), with what breaks downstream."""
        p = proposal
        return await anyio.to_thread.run_sync(lumos.check, name, p.format, p.schema_, p.against, p.policy,
                                              limiter=checking)  # fmt: skip

    @app.post("/v1/dataset/acceptances", response_model=m.Acceptance, tags=["writes"],
              responses={**ERRORS, 409: {"model": m.ErrorBody}})  # fmt: skip
    def accept(request: Request, who: Annotated[Principal, Depends(writer("accept"))], name: Name,
               body: Annotated[m.AcceptRequest, Body()]):  # fmt: skip
        """Accept a breaking change of a dataset version: the gate passes it from now on (a write)."""
        b = body
        return write(request, who, "accept", b.model_dump(),
                     lambda: lumos.accept(name, b.version, b.reason, b.path, b.kind, by=who.name))  # fmt: skip

    # the former paths, the name in the path: POST ones are unambiguous (one suffix, no detail to clash with)
    @app.post("/v1/datasets/{name:path}/check", response_model=m.ChangeSet, include_in_schema=False)
    async def check_by_path(who: Check, name: str, proposal: Annotated[m.CheckRequest, Body()]):
        return await check(who, name, proposal)

    @app.post("/v1/datasets/{name:path}/acceptances", response_model=m.Acceptance, include_in_schema=False)
    def accept_by_path(request: Request, who: Annotated[Principal, Depends(writer("accept"))], name: str,
                       body: Annotated[m.AcceptRequest, Body()]):  # fmt: skip
        return accept(request, who, name, body)

    @app.get("/v1/datasets/{path:path}", include_in_schema=False)
    def by_path(_: Read, path: str, old: Annotated[str | None, Query(max_length=64)] = None, new: New = "latest",
                policy: m.PolicyName | None = None, depth: Depth = None):  # fmt: skip
        """The former paths, `/v1/datasets/NAME[/history|/diff|/impact]`, where they are unambiguous: where
        both a dataset `a/history` and the history of `a` would answer, neither does (409)."""
        readings = [(None, path)] + [(s, path[: -len(s) - 1]) for s in SUBRESOURCES if path.endswith(f"/{s}")]
        found = [(sub, name) for sub, name in readings if name and lumos.exists(name)]
        if len(found) > 1:
            raise ApiError(409, "this path names a dataset and a part of another: use /v1/dataset?name=… (or "
                           "/v1/dataset/history?name=…)", code="ambiguous")  # fmt: skip
        if not found:
            raise NotFound(UNKNOWN_DATASET)
        sub, name = found[0]
        if sub is None:
            return lumos.dataset(name)
        if sub == "history":
            return lumos.history(name)
        if sub == "impact":
            return lumos.impact(name, depth)
        if old is None:
            raise ApiError(422, "query.old: Field required")
        return lumos.diff(name, old, new, policy)

    @app.get("/v1/impact", response_model=list[m.FanOut], tags=["datasets"], responses=ERRORS)
    def fan_out(_: Read, top: Annotated[int, Query(ge=1, le=10_000)] = 10):
        """The riskiest datasets by downstream fan-out (`lumos impact`)."""
        return lumos.fan_out(top)

    @app.get("/v1/search", response_model=list[m.SearchHit], tags=["datasets"], responses=ERRORS)
    def search(
        _: Read,
        q: Annotated[str, Query(max_length=1024)] = "",
        platform: Annotated[str | None, Query(max_length=128)] = None,
        owner: Annotated[str | None, Query(max_length=256)] = None,
        tag: Annotated[str | None, Query(max_length=256)] = None,
        min_quality: Annotated[float | None, Query(ge=0, le=1)] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 20,
    ):
        """Datasets ranked by name, field, description, tag or owner (`lumos search`)."""
        return lumos.search(q, platform, owner, tag, min_quality, limit)

    @app.get("/v1/cost", response_model=m.CostReport, tags=["reports"], responses=ERRORS)
    def cost(_: Read, month: Annotated[str | None, Query(pattern=MONTH)] = None):
        """The cost report (`lumos cost --format json`)."""
        return lumos.cost(month)

    @app.get("/v1/export", response_model=dict[str, Any], tags=["reports"], responses=ERRORS)
    def export(_: Read):
        """The whole estate as a portable document (`lumos export`; lumos_dagster/estate.schema.json)."""
        return lumos.export()

    @app.get("/v1/gate", response_model=m.ChangeSet, tags=["checks"], responses=ERRORS)
    def gate(
        _: Check,
        datasets: Annotated[str | None, Query(max_length=4_000, description="Comma-separated names.")] = None,
        since: Annotated[
            datetime | None, BeforeValidator(_iso_time), Query(description="Only versions first seen after this time.")
        ] = None,
    ):
        """The CI gate (`lumos gate --format json`): `passed` is false on an unaccepted breaking change."""
        names = [n.strip() for n in datasets.split(",") if n.strip()] if datasets else None
        return lumos.gate(names, since)

    @app.get("/v1/releases", response_model=list[m.Release], tags=["releases"], responses=ERRORS)
    def releases(_: Read):
        """The releases recorded so far, oldest first."""
        return lumos.releases()

    @app.post("/v1/releases", response_model=m.Release, tags=["writes"],
              responses={**ERRORS, 409: {"model": m.ErrorBody}})  # fmt: skip
    def release(request: Request, who: Annotated[Principal, Depends(writer("release"))],
                body: Annotated[m.ReleaseRequest, Body()]):  # fmt: skip
        """Record a release: each dataset's current schema version (`lumos release`; a write)."""
        return write(request, who, "release", body.model_dump(), lambda: lumos.release(body.name, body.datasets))

    declared.update(p.alias for r in app.routes if isinstance(r, APIRoute) for p in r.dependant.query_params)
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
