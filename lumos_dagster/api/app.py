"""The HTTP API: a FastAPI application over a `Lumos` facade (`lumos serve` runs it with uvicorn).

Every path but `/health` needs a bearer token whose scope covers it (read: the GETs; check: POST a
proposed schema, the gate; write: accept, release, and only with `api.writes: true`). Bodies are
limited in size, requests in time; errors are `{"error": {status, code, message, request_id}}` and
never carry a token, a stack trace or the store's address. docs/api.md describes it all.
"""

import asyncio
import json
import logging
import uuid
from datetime import datetime
from typing import Annotated, Any

import sqlalchemy as sa
from fastapi import Body, Depends, FastAPI, HTTPException, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException

from lumos_dagster.api import audit
from lumos_dagster.api import models as m
from lumos_dagster.api.auth import Principal, TokenVerifier
from lumos_dagster.api.service import Conflict, Invalid, Lumos, NotFound, _lumos_version
from lumos_dagster.api_config import ApiConfig
from lumos_dagster.errors import LumosError

log = logging.getLogger("lumos.api")

API_TITLE = "Lumos API"
CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed",
         409: "conflict", 413: "too_large", 415: "unsupported_media_type", 422: "invalid", 500: "internal",
         503: "unavailable", 504: "timeout"}  # fmt: skip
ERRORS: dict[int | str, dict[str, Any]] = {s: {"model": m.ErrorBody} for s in (401, 403, 404, 413, 422, 504)}


class ApiError(HTTPException):
    def __init__(self, status: int, message: str, code: str | None = None, headers: dict | None = None):
        super().__init__(status, message, headers)
        self.code = code or CODES.get(status, "error")


def _body(request_id: str, status: int, message: str, code: str | None = None) -> dict:
    return {"error": {"status": status, "code": code or CODES.get(status, "error"), "message": message,
                      "request_id": request_id}}  # fmt: skip


def _rid(request: Request) -> str:
    return request.scope.get("lumos.request_id") or "-"


class Guard:
    """The outermost layer: a request id, the body size limit and the time limit."""

    def __init__(self, app, max_body: int, timeout: float):
        self.app, self.max_body, self.timeout = app, max_body, timeout

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        rid = uuid.uuid4().hex
        scope["lumos.request_id"] = rid
        started = False

        async def reply(status: int, message: str) -> None:
            body = json.dumps(_body(rid, status, message)).encode()
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                       (b"x-request-id", rid.encode()), (b"connection", b"close")]  # fmt: skip
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body})

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


def create_app(lumos: Lumos, api: ApiConfig | None = None) -> FastAPI:
    """The FastAPI application; `build_app` wraps it in the limits (what `lumos serve` runs)."""
    api = api or lumos.config.api
    verify = TokenVerifier(api.tokens)
    bearer = HTTPBearer(auto_error=False, description="A token from lumos.yaml's api.tokens (its hash there).")
    app = FastAPI(
        title=API_TITLE,
        version=_lumos_version(),
        description="Ask Lumos' snapshot store: datasets, versions, compatibility, impact, cost, search. "
        "See docs/api.md.",
        docs_url="/docs",
        redoc_url=None,
    )

    # ------------------------------------------------------------ errors

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException):
        code = getattr(exc, "code", None)
        message = exc.detail if isinstance(exc.detail, str) else CODES.get(exc.status_code, "error")
        return JSONResponse(_body(_rid(request), exc.status_code, message, code), exc.status_code,
                            headers=getattr(exc, "headers", None))  # fmt: skip

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        parts = []
        for e in exc.errors()[:5]:  # never the input itself: it may be anything the client sent
            where = ".".join(str(p) for p in e.get("loc", ()) if p != "body") or "body"
            parts.append(f"{where}: {e.get('msg', 'invalid')}")
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

    Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]

    def principal(credentials: HTTPAuthorizationCredentials | None) -> Principal:
        found = verify(credentials.credentials) if credentials is not None else None
        if found is None:
            raise ApiError(401, "a valid bearer token is needed", headers={"WWW-Authenticate": "Bearer"})
        return found

    def scope(name: str):
        def check(credentials: Credentials) -> Principal:
            who = principal(credentials)
            if name not in who.scopes:
                raise ApiError(403, f"this token lacks the {name!r} scope")
            return who

        return check

    Read = Annotated[Principal, Depends(scope("read"))]
    Check = Annotated[Principal, Depends(scope("check"))]

    def writer(action: str):
        def check(request: Request, credentials: Credentials) -> Principal:
            who: Principal | None = None
            try:
                who = principal(credentials)
                if not api.writes:
                    raise ApiError(403, "writes are disabled (api.writes: false)", code="writes_disabled")
                if "write" not in who.scopes:
                    raise ApiError(403, "this token lacks the 'write' scope")
            except ApiError as exc:
                _audit(request, who.name if who else "-", action, "refused", exc.status_code)
                raise
            return who

        return check

    def _audit(request: Request, who: str, action: str, outcome: str, status: int, detail: dict | None = None):
        target = request.path_params.get("name") or request.url.path
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

    Name = Annotated[str, Path(description="Dataset name, e.g. `sales/orders` (slashes as they are).")]

    # ------------------------------------------------------------ endpoints

    @app.get("/health", response_model=m.Health, tags=["health"], responses={503: {"model": m.Health}})
    def health():
        """Whether the store can be read. No token needed."""
        h = lumos.health()
        return h if h.status == "ok" else JSONResponse(h.model_dump(), 503)

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

    @app.get("/v1/datasets/{name:path}/history", response_model=list[m.VersionInfo], tags=["datasets"],
             responses=ERRORS)  # fmt: skip
    def history(_: Read, name: Name):
        """The version timeline (`lumos history`)."""
        return lumos.history(name)

    @app.get("/v1/datasets/{name:path}/diff", response_model=m.ChangeSet, tags=["datasets"], responses=ERRORS)
    def diff(
        _: Read,
        name: Name,
        old: Annotated[str, Query(max_length=64, description="A version, e.g. 1.0.0, or `latest`.")],
        new: Annotated[str, Query(max_length=64)] = "latest",
        policy: m.PolicyName | None = None,
    ):
        """The changes between two versions, judged under the policy (`lumos diff NAME@OLD NAME@NEW`)."""
        return lumos.diff(name, old, new, policy)

    @app.get("/v1/datasets/{name:path}/impact", response_model=m.Impact, tags=["datasets"], responses=ERRORS)
    def impact(_: Read, name: Name, depth: Annotated[int | None, Query(ge=1, le=1000)] = None):
        """Who is downstream, and which breaking changes reach them (`lumos impact NAME`)."""
        return lumos.impact(name, depth)

    @app.post("/v1/datasets/{name:path}/check", response_model=m.ChangeSet, tags=["checks"], responses=ERRORS)
    def check(_: Check, name: Name, proposal: Annotated[m.CheckRequest, Body()]):
        """Is this proposed schema compatible with the dataset under its policy? The verdict `lumos diff`
        gives (`passed` is its exit code 0), with what breaks downstream."""
        return lumos.check(name, proposal.format, proposal.schema_, proposal.against, proposal.policy)

    @app.post("/v1/datasets/{name:path}/acceptances", response_model=m.Acceptance, tags=["writes"],
              responses={**ERRORS, 409: {"model": m.ErrorBody}})  # fmt: skip
    def accept(request: Request, who: Annotated[Principal, Depends(writer("accept"))], name: Name,
               body: Annotated[m.AcceptRequest, Body()]):  # fmt: skip
        """Accept a breaking change of a dataset version: the gate passes it from now on (a write)."""
        b = body
        return write(request, who, "accept", b.model_dump(),
                     lambda: lumos.accept(name, b.version, b.reason, b.path, b.kind, by=who.name))  # fmt: skip

    @app.get("/v1/datasets/{name:path}", response_model=m.DatasetDetail, tags=["datasets"], responses=ERRORS)
    def dataset(_: Read, name: Name):
        """A dataset: current schema, version, owners, tags, quality, cost, and its latest capture."""
        return lumos.dataset(name)

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
    def cost(_: Read, month: Annotated[str | None, Query(pattern=r"^\d{4}-\d{2}$")] = None):
        """The cost report (`lumos cost --format json`)."""
        return lumos.cost(month)

    @app.get("/v1/export", response_model=dict[str, Any], tags=["reports"], responses=ERRORS)
    def export(_: Read):
        """The whole estate as a portable document (`lumos export`; lumos_dagster/estate.schema.json)."""
        return lumos.export()

    @app.get("/v1/gate", response_model=m.ChangeSet, tags=["checks"], responses=ERRORS)
    def gate(
        _: Check,
        datasets: Annotated[str | None, Query(max_length=100_000, description="Comma-separated names.")] = None,
        since: Annotated[datetime | None, Query(description="Only versions first seen after this time.")] = None,
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

    return app


def build_app(lumos: Lumos, api: ApiConfig | None = None):
    """The ASGI application `lumos serve` runs: the API inside its limits."""
    api = api or lumos.config.api
    return Guard(create_app(lumos, api), api.limits.max_body_bytes, api.limits.request_timeout)


def openapi_document(api: ApiConfig | None = None) -> dict:
    """The OpenAPI document, without a store (docs/openapi.json is this)."""

    class _Offline:
        config = None

    app = create_app(_Offline(), api or ApiConfig())  # type: ignore[arg-type]
    return app.openapi()
