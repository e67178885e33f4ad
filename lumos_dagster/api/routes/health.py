"""`/health`: whether the store can be read, without a token."""

import anyio.to_thread
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from lumos_dagster.api import models as m
from lumos_dagster.api.access import Service
from lumos_dagster.api.errors import ERRORS

router = APIRouter(tags=["health"])

# without a token: no 401, 403 or 429; nothing to be missing (404)
ANSWERS = {**{s: v for s, v in ERRORS.items() if s not in (401, 403, 404, 429)}, 503: {"model": m.Health}}


@router.get("/health", response_model=m.Health, responses=ANSWERS)
async def health(request: Request, lumos: Service):
    """Whether the store can be read. No token needed. HEAD answers the same, without a body."""
    h = await anyio.to_thread.run_sync(lumos.health, limiter=request.app.state.health_thread)
    return h if h.status == "ok" else JSONResponse(h.model_dump(), 503)


router.add_api_route("/health", health, methods=["HEAD"], response_model=m.Health, responses=ANSWERS,
                     operation_id="health_head")  # fmt: skip
