"""The API's errors: `{"error": {status, code, message, request_id}}`, from an endpoint, FastAPI's
validation, the service, the store or a bug alike, registered on an application once
(`add_error_handlers`). None carries a token, a stack trace, the store's address or the request's input."""

import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import sqlalchemy as sa
from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import Send

from lumos_dagster.api import limits
from lumos_dagster.api import models as m
from lumos_dagster.api.service import Conflict, Invalid, NotFound
from lumos_dagster.floor.errors import LumosError

log = logging.getLogger("lumos.api")

CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed",
         409: "conflict", 413: "too_large", 414: "uri_too_long", 415: "unsupported_media_type", 422: "invalid",
         429: "too_many_requests", 500: "internal", 503: "unavailable", 504: "timeout"}  # fmt: skip
#: what any request may be answered, each status documented for every operation: a body that does not
#: parse (400), no valid token (401, 429), a token without the scope (403), what is not there (404), a
#: body or URL past the limits (413, 414), what the schema refuses (422), a store that cannot be read
#: (503), the deadline (504), a bug (500)
ANY = (400, 401, 403, 404, 413, 414, 422, 429, 500, 503, 504)
ERRORS: dict[int | str, dict[str, Any]] = {s: {"model": m.ErrorBody} for s in ANY}
#: the service's refusals: their status
REFUSALS: dict[type[LumosError], int] = {NotFound: 404, Invalid: 422, Conflict: 409}


class HttpProblem(HTTPException):
    """An error the API answers with: its status, message and machine-readable `code` (the SDK raises
    `lumos_dagster.client.ApiError` from it)."""

    def __init__(self, status: int, message: str, code: str | None = None, headers: dict | None = None):
        super().__init__(status, message, headers)
        self.code = code or CODES.get(status, "error")


def error_body(request_id: str, status: int, message: str, code: str | None = None) -> dict:
    return {"error": {"status": status, "code": code or CODES.get(status, "error"), "message": message,
                      "request_id": request_id}}  # fmt: skip


def request_id(request: Request) -> str:
    return request.scope.get("lumos.request_id") or "-"


async def reply(send: Send, rid: str, status: int, message: str, headers: dict[str, str] | None = None) -> None:
    """An error answer straight from an ASGI layer, before the application has seen the request."""
    body = json.dumps(error_body(rid, status, message)).encode()
    extra = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *extra]})  # fmt: skip
    await send({"type": "http.response.body", "body": body})


def allowed(routes: list[APIRoute], scope: MutableMapping[str, Any]) -> list[str]:
    """The methods the path of `scope` answers, whichever route each is on (a 405's Allow)."""
    methods = {method for route in routes for method in route.methods or () if route.matches(scope)[0] != Match.NONE}
    return sorted(methods)


def _answer(request: Request, status: int, message: str, code: str | None = None, headers=None) -> JSONResponse:
    return JSONResponse(error_body(request_id(request), status, message, code), status, headers=headers)


async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    message = exc.detail if isinstance(exc.detail, str) else CODES.get(exc.status_code, "error")
    headers = getattr(exc, "headers", None)
    if exc.status_code == 405:  # every method of the path, not only those of the route that matched
        headers = {**(headers or {}), "Allow": ", ".join(allowed(request.app.state.routes, request.scope))}
    return _answer(request, exc.status_code, message, getattr(exc, "code", None), headers)


async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
    parts = []
    for e in exc.errors()[:5]:  # never the input itself: it may be anything the client sent
        loc = [str(p) for p in e.get("loc", ()) if p != "body"]
        if e.get("type") == "extra_forbidden":  # the last part is the client's own key
            loc, e = loc[:-1], {"msg": "unknown field"}
        parts.append(f"{'.'.join(loc) or 'body'}: {e.get('msg', 'invalid')}")
    return _answer(request, 422, "; ".join(parts) or "invalid request")


async def _refused(request: Request, exc: LumosError) -> JSONResponse:
    return _answer(request, REFUSALS[type(exc)], str(exc))


async def _expired(request: Request, exc: Exception) -> JSONResponse:
    return _answer(request, 504, "the request took too long")


async def _store(request: Request, exc: Exception) -> JSONResponse:
    text = str(getattr(exc, "orig", exc)).lower()
    if "interrupted" in text or "statement timeout" in text or "canceling statement" in text:
        return _answer(request, 504, "the request took too long")
    log.error("store error [%s]: %s", request_id(request), type(exc).__name__)
    return _answer(request, 503, "the snapshot store cannot be read")


async def _lumos(request: Request, exc: Exception) -> JSONResponse:
    log.error("error [%s]: %s", request_id(request), type(exc).__name__)
    return _answer(request, 503, "the snapshot store cannot be read")


async def _internal(request: Request, exc: Exception) -> JSONResponse:
    log.exception("internal error [%s]", request_id(request))
    return _answer(request, 500, "internal error")


def add_error_handlers(app: FastAPI) -> None:
    """Every error `app` may meet answered as an error body (the most specific handler of an
    exception's classes answers it)."""
    handlers: list[tuple[type[Exception], Callable[..., Awaitable[JSONResponse]]]] = [
        (StarletteHTTPException, _http),
        (RequestValidationError, _invalid),
        *((refusal, _refused) for refusal in REFUSALS),
        (limits.Expired, _expired),
        (sa.exc.SQLAlchemyError, _store),
        (LumosError, _lumos),
        (Exception, _internal),
    ]
    for kind, handler in handlers:
        app.add_exception_handler(kind, handler)
