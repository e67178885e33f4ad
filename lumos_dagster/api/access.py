"""What the endpoints depend on (FastAPI `Depends`), from the application's state (`create_app` sets
`lumos`, `api`, `declared` and the limiters there): the service, who calls and what they may do,
the audit of writes, and the query parameters the operations share."""

import re
from collections import Counter
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from lumos_dagster.api import audit
from lumos_dagster.api.auth import Principal
from lumos_dagster.api.errors import CODES, REFUSALS, HttpProblem, request_id
from lumos_dagster.api.service import Conflict, Invalid, Lumos, NotFound
from lumos_dagster.floor.api_config import ApiConfig

T = TypeVar("T")


async def service(request: Request) -> Lumos:
    return request.app.state.lumos


Service = Annotated[Lumos, Depends(service)]


async def settings(request: Request) -> ApiConfig:
    return request.app.state.api


Settings = Annotated[ApiConfig, Depends(settings)]


def single_values(request: Request) -> None:
    """Each query parameter at most once: `top=1&top=2` was taken as 2, silently. Only a parameter
    Lumos declares is named (the others are the client's input, never repeated back)."""
    counts = Counter(key for key, _ in request.query_params.multi_items())
    repeated = sorted(key for key, n in counts.items() if n > 1)
    if repeated:
        named = [key for key in repeated if key in request.app.state.declared]
        raise HttpProblem(422, f"query.{named[0]}: given more than once" if named else "query: a parameter given twice")


# declares the bearer scheme in the OpenAPI document; Authenticate has checked the token already
bearer = HTTPBearer(auto_error=False, description="A token from lumos.yaml's api.tokens (its hash there).")
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]


def principal(request: Request) -> Principal:
    who = request.scope.get("lumos.principal")
    if who is None:  # only an application served without Authenticate gets here
        raise HttpProblem(401, "a valid bearer token is needed", headers={"WWW-Authenticate": "Bearer"})
    return who


def scope(name: str):
    async def check(request: Request, _: Credentials) -> Principal:
        who = principal(request)
        if name not in who.scopes:
            raise HttpProblem(403, f"this token lacks the {name!r} scope")
        return who

    return check


Read = Annotated[Principal, Depends(scope("read"))]
Check = Annotated[Principal, Depends(scope("check"))]


def writer(action: str):
    def check(request: Request, _: Credentials) -> Principal:
        who = principal(request)
        try:
            if not request.app.state.api.writes:
                raise HttpProblem(403, "writes are disabled (api.writes: false)", code="writes_disabled")
            if "write" not in who.scopes:
                raise HttpProblem(403, "this token lacks the 'write' scope")
        except HttpProblem as exc:
            _audit(request, who.name, action, "refused", exc.status_code)
            raise
        return who

    return check


def _audit(request: Request, who: str, action: str, outcome: str, status: int, detail: dict | None = None):
    target = request.query_params.get("name") or request.path_params.get("name") or request.url.path
    client = request.client.host if request.client else None
    engine = request.app.state.lumos._writer.engine
    audit.record(engine, who, action, target, outcome, status, client, request_id(request), detail)


def write(request: Request, who: Principal, action: str, detail: dict, do: Callable[[], T]) -> T:
    """`do()`, the write `action`, recorded in the audit log whatever its outcome."""
    try:
        result = do()
    except (NotFound, Invalid, Conflict) as exc:
        status = REFUSALS[type(exc)]
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

_ISO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?")


def iso_time(value: Any) -> Any:
    """An ISO 8601 time, as the document says (`format: date-time`): not a number, which pydantic
    would read as seconds since 1970 (`since=0.5`)."""
    if isinstance(value, str) and not _ISO_TIME.fullmatch(value):
        raise ValueError("not an ISO 8601 date-time, e.g. 2026-11-25T00:00:00Z")
    return value
