"""The Python SDK of the Lumos API (`lumos serve`): typed answers, the API's own models.

    from lumos_dagster.client import LumosClient

    with LumosClient("http://127.0.0.1:8765", token=os.environ["LUMOS_TOKEN"]) as lumos:
        orders = lumos.dataset("sales/orders")              # DatasetDetail
        print(orders.version, [f.path for f in orders.fields])
        verdict = lumos.check("sales/orders", "avro", open("orders.avsc").read())
        if not verdict.passed:
            print(verdict.downstream_affected)

Every method mirrors one endpoint (docs/api.md) and one method of the in-process facade
(`lumos_dagster.api.service.Lumos`), with the same arguments and results. An error answer raises
`ApiError` carrying the server's status, code, message and request id.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter

from lumos_dagster.api import models as m
from lumos_dagster.floor.extras import needs

with needs("api", "the Lumos API client"):
    import httpx

T = TypeVar("T")


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, request_id: str | None = None):
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message, self.request_id = status, code, message, request_id


class LumosClient:
    """A client of one Lumos API server. Thread-safe; reuses connections (close it, or use `with`)."""

    def __init__(self, base_url: str, token: str | None = None, timeout: float = 30.0,
                 transport: httpx.BaseTransport | None = None):  # fmt: skip
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout, transport=transport)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> LumosClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _call(self, method: str, path: str, result: Any, params: dict | None = None, body: Any = None):
        params = {k: v for k, v in (params or {}).items() if v is not None}
        response = self._http.request(method, path, params=params, json=body)
        if response.status_code >= 400 and not (path == "/health" and response.status_code == 503):
            try:
                e = response.json()["error"]
                raise ApiError(e["status"], e["code"], e["message"], e.get("request_id"))
            except (ValueError, KeyError, TypeError):
                raise ApiError(response.status_code, "error", response.text[:200]) from None
        data = response.json()
        if isinstance(result, type) and issubclass(result, BaseModel):
            return result.model_validate(data)
        return TypeAdapter(result).validate_python(data)

    # ------------------------------------------------------------ reads

    def health(self) -> m.Health:
        return self._call("GET", "/health", m.Health)

    def datasets(self, q: str | None = None, platform: str | None = None, domain: str | None = None,
                 offset: int = 0, limit: int = 50) -> m.DatasetPage:  # fmt: skip
        params = dict(q=q, platform=platform, domain=domain, offset=offset, limit=limit)
        return self._call("GET", "/v1/datasets", m.DatasetPage, params)

    def all_datasets(self, **filters) -> list[m.DatasetSummary]:
        """Every page of `datasets`."""
        out: list[m.DatasetSummary] = []
        while True:
            page = self.datasets(offset=len(out), limit=filters.pop("limit", 100), **filters)
            out += page.items
            if not page.items or len(out) >= page.total:
                return out

    # one dataset: its name in the query, so that any name is reachable (`sales/history` too)
    def dataset(self, name: str) -> m.DatasetDetail:
        return self._call("GET", "/v1/dataset", m.DatasetDetail, dict(name=name))

    def history(self, name: str) -> list[m.VersionInfo]:
        return self._call("GET", "/v1/dataset/history", list[m.VersionInfo], dict(name=name))

    def diff(self, name: str, old: str, new: str = "latest", policy: str | None = None) -> m.ChangeSet:
        params = dict(name=name, old=old, new=new, policy=policy)
        return self._call("GET", "/v1/dataset/diff", m.ChangeSet, params)

    def impact(self, name: str, depth: int | None = None) -> m.Impact:
        return self._call("GET", "/v1/dataset/impact", m.Impact, dict(name=name, depth=depth))

    def fan_out(self, top: int = 10) -> list[m.FanOut]:
        return self._call("GET", "/v1/impact", list[m.FanOut], dict(top=top))

    def search(self, q: str = "", platform: str | None = None, owner: str | None = None, tag: str | None = None,
               min_quality: float | None = None, limit: int = 20) -> list[m.SearchHit]:  # fmt: skip
        params = dict(q=q, platform=platform, owner=owner, tag=tag, min_quality=min_quality, limit=limit)
        return self._call("GET", "/v1/search", list[m.SearchHit], params)

    def cost(self, month: str | None = None) -> m.CostReport:
        return self._call("GET", "/v1/cost", m.CostReport, dict(month=month))

    def export(self) -> dict[str, Any]:
        return self._call("GET", "/v1/export", dict[str, Any])

    def releases(self) -> list[m.Release]:
        return self._call("GET", "/v1/releases", list[m.Release])

    # ------------------------------------------------------------ checks

    def check(self, name: str, fmt: str, schema: str | dict | list, against: str | None = None,
              policy: str | None = None) -> m.ChangeSet:  # fmt: skip
        """Judge a proposed schema (fmt: avro | json-schema | spark-ddl | lumos) for a dataset."""
        body = {"format": fmt, "schema": schema, "against": against, "policy": policy}
        return self._call("POST", "/v1/dataset/check", m.ChangeSet, dict(name=name), body)

    def gate(self, datasets: list[str] | None = None, since: datetime | None = None) -> m.ChangeSet:
        params = dict(datasets=",".join(datasets) if datasets else None, since=since.isoformat() if since else None)
        return self._call("GET", "/v1/gate", m.ChangeSet, params)

    # ------------------------------------------------------------ writes

    def accept(self, name: str, version: str, reason: str, path: str = "*", kind: str | None = None) -> m.Acceptance:
        body = {"version": version, "reason": reason, "path": path, "kind": kind}
        return self._call("POST", "/v1/dataset/acceptances", m.Acceptance, dict(name=name), body)

    def release(self, name: str | None = None, datasets: list[str] | None = None) -> m.Release:
        return self._call("POST", "/v1/releases", m.Release, body={"name": name, "datasets": datasets})
