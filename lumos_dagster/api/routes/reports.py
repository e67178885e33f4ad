"""Reports: search, the cost report, the estate as a portable document."""

from typing import Annotated, Any

from fastapi import APIRouter, Query

from lumos_dagster.api import models as m
from lumos_dagster.api.access import Read, Service
from lumos_dagster.api.errors import ERRORS
from lumos_dagster.reports.cost import MONTH

router = APIRouter(responses=ERRORS)


@router.get("/v1/search", response_model=list[m.SearchHit], tags=["datasets"])
def search(
    _: Read,
    lumos: Service,
    q: Annotated[str, Query(max_length=1024)] = "",
    platform: Annotated[str | None, Query(max_length=128)] = None,
    owner: Annotated[str | None, Query(max_length=256)] = None,
    tag: Annotated[str | None, Query(max_length=256)] = None,
    min_quality: Annotated[float | None, Query(ge=0, le=1)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 20,
):
    """Datasets ranked by name, field, description, tag or owner (`lumos search`)."""
    return lumos.search(q, platform, owner, tag, min_quality, limit)


@router.get("/v1/cost", response_model=m.CostReport, tags=["reports"])
def cost(_: Read, lumos: Service, month: Annotated[str | None, Query(pattern=MONTH)] = None):
    """The cost report (`lumos cost --format json`)."""
    return lumos.cost(month)


@router.get("/v1/export", response_model=dict[str, Any], tags=["reports"])
def export(_: Read, lumos: Service):
    """The whole estate as a portable document (`lumos export`; lumos_dagster/estate.schema.json)."""
    return lumos.export()
