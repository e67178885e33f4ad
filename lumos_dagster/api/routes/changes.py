"""Changes: checking a proposed schema, the CI gate, accepting a breaking change, releases (the
writes are audited: access.write)."""

from datetime import datetime
from typing import Annotated

import anyio.to_thread
from fastapi import APIRouter, Body, Depends, Query, Request
from pydantic import BeforeValidator

from lumos_dagster.api import models as m
from lumos_dagster.api.access import Check, Name, Read, Service, iso_time, write, writer
from lumos_dagster.api.auth import Principal
from lumos_dagster.api.errors import ERRORS

router = APIRouter(responses=ERRORS)
#: a write may also conflict with what is recorded
WRITE_ERRORS = {**ERRORS, 409: {"model": m.ErrorBody}}


@router.post("/v1/dataset/check", response_model=m.ChangeSet, tags=["checks"])
async def check(request: Request, _: Check, name: Name, proposal: Annotated[m.CheckRequest, Body()], lumos: Service):
    """Is this proposed schema compatible with the dataset under its policy? The verdict `lumos diff`
    gives (`passed` is its exit code 0), with what breaks downstream."""
    p = proposal
    return await anyio.to_thread.run_sync(lumos.check, name, p.format, p.schema_, p.against, p.policy,
                                          limiter=request.app.state.checking)  # fmt: skip


@router.post("/v1/dataset/acceptances", response_model=m.Acceptance, tags=["writes"], responses=WRITE_ERRORS)
def accept(request: Request, who: Annotated[Principal, Depends(writer("accept"))], name: Name,
           body: Annotated[m.AcceptRequest, Body()], lumos: Service):  # fmt: skip
    """Accept a breaking change of a dataset version: the gate passes it from now on (a write)."""
    b = body
    return write(request, who, "accept", b.model_dump(),
                 lambda: lumos.accept(name, b.version, b.reason, b.path, b.kind, by=who.name))  # fmt: skip


# the former paths, the name in the path: POST ones are unambiguous (one suffix, no detail to clash with)
@router.post("/v1/datasets/{name:path}/check", response_model=m.ChangeSet, include_in_schema=False)
async def check_by_path(request: Request, who: Check, name: str, proposal: Annotated[m.CheckRequest, Body()],
                        lumos: Service):  # fmt: skip
    return await check(request, who, name, proposal, lumos)


@router.post("/v1/datasets/{name:path}/acceptances", response_model=m.Acceptance, include_in_schema=False)
def accept_by_path(request: Request, who: Annotated[Principal, Depends(writer("accept"))], name: str,
                   body: Annotated[m.AcceptRequest, Body()], lumos: Service):  # fmt: skip
    return accept(request, who, name, body, lumos)


@router.get("/v1/gate", response_model=m.ChangeSet, tags=["checks"])
def gate(
    _: Check,
    lumos: Service,
    datasets: Annotated[str | None, Query(max_length=4_000, description="Comma-separated names.")] = None,
    since: Annotated[
        datetime | None, BeforeValidator(iso_time), Query(description="Only versions first seen after this time.")
    ] = None,
):
    """The CI gate (`lumos gate --format json`): `passed` is false on an unaccepted breaking change."""
    names = [n.strip() for n in datasets.split(",") if n.strip()] if datasets else None
    return lumos.gate(names, since)


@router.get("/v1/releases", response_model=list[m.Release], tags=["releases"])
def releases(_: Read, lumos: Service):
    """The releases recorded so far, oldest first."""
    return lumos.releases()


@router.post("/v1/releases", response_model=m.Release, tags=["writes"], responses=WRITE_ERRORS)
def release(request: Request, who: Annotated[Principal, Depends(writer("release"))],
            body: Annotated[m.ReleaseRequest, Body()], lumos: Service):  # fmt: skip
    """Record a release: each dataset's current schema version (`lumos release`; a write)."""
    return write(request, who, "release", body.model_dump(), lambda: lumos.release(body.name, body.datasets))
