"""The snapshot store and the catalogs as Dagster resources, with typed configuration. Credentials
are never in it: `${VAR}` in the store URL and each catalog's token variable are read from the
environment when a run opens them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Callable

from dagster import Config, ConfigurableResource, Failure, InitResourceContext
from pydantic import PrivateAttr

from lumos_dagster.catalog.base import CatalogAdapter
from lumos_dagster.delivery.catalogs import catalogs_from_entries
from lumos_dagster.delivery.worker import Delivery
from lumos_dagster.floor.config import LumosConfig
from lumos_dagster.floor.errors import StoreError
from lumos_dagster.floor.masking import shown_url
from lumos_dagster.resources.ownership import claim_run
from lumos_dagster.store import SnapshotStore
from lumos_dagster.store.faults import fault_message

# Each value Dagster is shown (the store's URL, a catalog server's) by the one it stands for, its
# credentials masked: Dagster keeps every resource's configuration in its run storage, where a password
# written in lumos.yaml must not go. Every process that runs the resources loaded the code location,
# which fills this in (`SnapshotStoreResource.of`, `CatalogsResource.from_config`).
_WITHHELD: dict[str, str] = {}


def _withheld(value: str) -> str:
    """What Dagster is shown of a URL: `shown_url`, the URL itself kept here (a path stays as it is)."""
    shown = shown_url(value) if "://" in value else value
    if shown != value:
        _WITHHELD[shown] = value
    return shown


def _restored(value: Any) -> Any:
    return _WITHHELD.get(value, value) if isinstance(value, str) else value


class SnapshotStoreResource(ConfigurableResource):
    """SQLAlchemy URL of the snapshot store (sqlite:///… by default, postgresql+psycopg://… in deployments)."""

    url: str

    @classmethod
    def of(cls, url: str) -> "SnapshotStoreResource":
        return cls(url=_withheld(url))

    @property
    def store_url(self) -> str:
        """The URL the store opens (`url` is what Dagster shows and keeps)."""
        return _restored(self.url)

    def open(self) -> SnapshotStore:
        return SnapshotStore(self.store_url)

    @contextmanager
    def faults(self) -> Iterator[None]:
        """A fault of the store while a step uses it (a statement timeout, a lost connection, a full disk)
        as a Failure of one line, which Dagster's retries apply to, not the SQL and its parameters."""
        try:
            yield
        except Failure:
            raise
        except Exception as exc:
            fault = str(exc) if isinstance(exc, StoreError) else fault_message(exc, self.store_url)
            if fault is None:
                raise
            raise Failure(description=fault, allow_retries=True) from None

    def setup_for_execution(self, context: InitResourceContext) -> None:
        # a run that opens the store is Lumos' (a run of the implicit asset job has no Lumos job tag) and
        # says which process it runs in (resources/ownership.py)
        if context.instance is not None and context.run is not None:
            claim_run(context.instance, context.run.run_id)


class CatalogEntry(Config):
    """One `catalog:` entry of lumos.yaml: its type and settings (paths absolute). Dagster's config
    holds no nulls, so settings that are null (`token_env: null`: no token) are named apart."""

    type: str
    settings: dict[str, Any]
    nulls: list[str] = []


class CatalogsResource(ConfigurableResource):
    """The catalogs, and the run's delivery to them: one delivery worker for all the steps of a run,
    finished when the run ends."""

    catalogs: list[CatalogEntry]
    _delivery: Delivery | None = PrivateAttr(default=None)

    @classmethod
    def from_config(cls, config: LumosConfig) -> "CatalogsResource":
        entries = []
        for cat in config.catalogs:
            values = {k: v for k, v in cat.model_dump().items() if k != "type"}
            settings = {k: _withheld(v) if isinstance(v, str) else v for k, v in values.items() if v is not None}
            if settings.get("path"):
                settings["path"] = config.resolve(settings["path"])
            entries.append(
                CatalogEntry(type=cat.type, settings=settings, nulls=sorted(values.keys() - settings.keys()))
            )
        return cls(catalogs=entries)

    def delivery(self, store_url: str, warn: Callable[[str], None]) -> Delivery:
        if self._delivery is None:
            self._delivery = Delivery(store_url, self.adapters, warn)
        self._delivery.warn = warn  # the step now delivering
        return self._delivery

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        if self._delivery is not None:
            if context.log is not None:
                self._delivery.warn = context.log.warning
            self._delivery.finish()

    def adapters(self) -> list[CatalogAdapter]:
        return catalogs_from_entries(
            [
                {"type": c.type, **{k: _restored(v) for k, v in c.settings.items()}, **dict.fromkeys(c.nulls)}
                for c in self.catalogs
            ]
        )
