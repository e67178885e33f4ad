"""Datasets and their versions: the list, a dataset, its history, a diff, its impact, the fan-out,
and the former paths with the name in the path."""

from typing import Annotated

from fastapi import APIRouter, Query

from lumos_dagster.api import models as m
from lumos_dagster.api.access import Depth, Name, New, Old, Read, Service, Settings
from lumos_dagster.api.errors import ERRORS, HttpProblem
from lumos_dagster.api.service import UNKNOWN_DATASET, NotFound

router = APIRouter(tags=["datasets"], responses=ERRORS)
#: what the former paths `/v1/datasets/{name}/…` address besides a dataset's detail
SUBRESOURCES = ("history", "diff", "impact")


@router.get("/v1/datasets", response_model=m.DatasetPage)
def datasets(
    _: Read,
    lumos: Service,
    api: Settings,
    q: Annotated[str | None, Query(max_length=256, description="Name contains (case-insensitive).")] = None,
    platform: Annotated[str | None, Query(max_length=128)] = None,
    domain: Annotated[str | None, Query(max_length=256)] = None,
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 50,
):
    """Datasets by name, filtered, a page at a time, with their current version."""
    return lumos.datasets(q, platform, domain, offset, min(limit, api.limits.page_size))


@router.get("/v1/dataset", response_model=m.DatasetDetail)
def dataset(_: Read, lumos: Service, name: Name):
    """A dataset: current schema, version, owners, tags, quality, cost, and its latest capture."""
    return lumos.dataset(name)


@router.get("/v1/dataset/history", response_model=list[m.VersionInfo])
def history(_: Read, lumos: Service, name: Name):
    """The version timeline (`lumos history`)."""
    return lumos.history(name)


@router.get("/v1/dataset/diff", response_model=m.ChangeSet)
def diff(_: Read, lumos: Service, name: Name, old: Old, new: New = "latest", policy: m.PolicyName | None = None):
    """The changes between two versions, judged under the policy (`lumos diff NAME@OLD NAME@NEW`)."""
    return lumos.diff(name, old, new, policy)


@router.get("/v1/dataset/impact", response_model=m.Impact)
def impact(_: Read, lumos: Service, name: Name, depth: Depth = None):
    """Who is downstream, and which breaking changes reach them (`lumos impact NAME`)."""
    return lumos.impact(name, depth)


@router.get("/v1/datasets/{path:path}", include_in_schema=False)
def by_path(_: Read, lumos: Service, path: str, old: Annotated[str | None, Query(max_length=64)] = None,
            new: New = "latest", policy: m.PolicyName | None = None, depth: Depth = None):  # fmt: skip
    """The former paths, `/v1/datasets/NAME[/history|/diff|/impact]`, where they are unambiguous: where
    both a dataset `a/history` and the history of `a` would answer, neither does (409)."""
    readings = [(None, path)] + [(s, path[: -len(s) - 1]) for s in SUBRESOURCES if path.endswith(f"/{s}")]
    found = [(sub, name) for sub, name in readings if name and lumos.exists(name)]
    if len(found) > 1:
        raise HttpProblem(409, "this path names a dataset and a part of another: use /v1/dataset?name=… (or "
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
        raise HttpProblem(422, "query.old: Field required")
    return lumos.diff(name, old, new, policy)


@router.get("/v1/impact", response_model=list[m.FanOut])
def fan_out(_: Read, lumos: Service, top: Annotated[int, Query(ge=1, le=10_000)] = 10):
    """The riskiest datasets by downstream fan-out (`lumos impact`)."""
    return lumos.fan_out(top)
