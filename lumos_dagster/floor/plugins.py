"""Plug-ins: the contract sources, catalogs and formats share, and the registry that finds them.

The registries of sources and catalogs live here, on the floor, so that lumos.yaml's models know
the contract and not the implementations: their built-ins are registered by the module each
registry names (`provider`), imported on first use, and an installed package adds its own
through an entry point in the group `lumos.sources`, `lumos.catalogs` or `lumos.formats`, named
after its type and pointing at the plug-in object, e.g. `[project.entry-points."lumos.catalogs"] acme =
"acme_lumos:plugin"`. A plug-in that fails to load, or takes a type already taken, is
skipped with a warning: someone else's broken package must not stop Lumos.
"""

from __future__ import annotations

import builtins
import functools
import importlib
import logging
import os
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib.metadata import SelectableGroups, entry_points
from pathlib import Path
from typing import Annotated, Any, Callable, Generic, Iterator, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, Field

from lumos_dagster.floor.errors import ConfigError
from lumos_dagster.floor.extras import needs

log = logging.getLogger(__name__)


def _installed() -> tuple[tuple[str, int], ...]:
    """`sys.path` with each folder's modification time: what changes when a package is installed."""
    return tuple((p, os.stat(p).st_mtime_ns if os.path.isdir(p) else 0) for p in sys.path)


@functools.lru_cache(maxsize=4)
def _entry_points(installed: tuple[tuple[str, int], ...]) -> SelectableGroups:
    """Every installed package's entry points, read once per state of `sys.path` (`_installed`): each
    registry asking for its group would otherwise read the metadata of every installed package (~20 ms)."""
    return entry_points()


class ConfigModel(BaseModel):
    """Base of every lumos.yaml section and plug-in entry: unknown keys are errors, values never change."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class SourceEntry(ConfigModel):
    """What every `sources` entry may say besides its type's own keys."""

    platform_instance: str | None = Field(
        None,
        description="The platform instance of the datasets found here, as DataHub's source for the platform "
        "takes it (`platform_instance`): a prefix of their URNs and the top of their browse path in DataHub.",
    )


class _SecretMarker:
    def __repr__(self) -> str:
        return "SECRET"


SECRET = _SecretMarker()
#: a credential-carrying string (DSN, URI): its `${VAR}`s are expanded by `expand_secrets` when it is
#: used, so the secret is read by the run that needs it, not by whatever loads lumos.yaml
Secret = Annotated[str, SECRET]


def secret_fields(model: type[BaseModel]) -> frozenset[str]:
    return frozenset(name for name, f in model.model_fields.items() if SECRET in f.metadata or _marked(f.annotation))


def _marked(annotation: Any) -> bool:
    """Whether `Secret` is inside, e.g. in `Secret | None`."""
    return SECRET in getattr(annotation, "__metadata__", ()) or any(_marked(a) for a in get_args(annotation))


_ENV = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand_secrets(text: str, where: str, env: Mapping[str, str] | None = None) -> str:
    """`text` with `${VAR}`, `${VAR:-default}` filled from `env` (default: the process environment)
    and `$$` made `$`: lumos.yaml's interpolation, for the credential fields it leaves as written.
    `where` names the value in the error, e.g. `lumos.yaml: sources[0].dsn`."""
    env = os.environ if env is None else env

    def sub(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        name, default = m.group(1), m.group(2)
        if name in env:
            return env[name]
        if default is not None:
            return default
        raise ConfigError(f"{where}: environment variable {name} is not set (set it, or write ${{{name}:-default}})")

    return _ENV.sub(sub, text)


def resolve_path(base_dir: str, path: str) -> str:
    """`path` (`~` expanded) relative to `base_dir`, made absolute."""
    return str((Path(base_dir) / os.path.expanduser(path)).resolve())


@dataclass(frozen=True)
class BuildContext:
    """What a builder knows besides its entry."""

    where: str  # the entry in messages, e.g. `lumos.yaml: sources[0]`
    base_dir: str  # the folder of lumos.yaml: relative paths start there

    def resolve(self, path: str) -> str:
        return resolve_path(self.base_dir, path)


@dataclass(frozen=True)
class Plugin:
    """A source or catalog type: its `type:` in lumos.yaml, the model its entries validate
    against, and `build(entry, context)`, which turns a validated entry into the source or
    catalog adapter. The model must declare `type: Literal["<type>"] = "<type>"`."""

    type: str
    config: builtins.type[ConfigModel]  # `type` here is the field above
    build: Callable[[Any, BuildContext], Any]
    extra: str | None = None  # the extra of the package whose libraries `build` imports (lumos_dagster.floor.extras)

    def built(self, entry: Any, context: BuildContext) -> Any:
        """`build(entry, context)`, a library of the plug-in's extra that is not installed said as the extra
        to install."""
        with needs(self.extra, f"{context.where} (type {self.type})"):
            return self.build(entry, context)

    def __post_init__(self) -> None:
        is_config = isinstance(self.config, type) and issubclass(self.config, ConfigModel)
        declared = self.config.model_fields.get("type") if is_config else None
        if declared is None or declared.default != self.type:
            raise TypeError(
                f"plug-in {self.type!r}: its config must be a lumos_dagster.floor.plugins.ConfigModel "
                f"with `type: Literal[{self.type!r}] = {self.type!r}`"
            )


P = TypeVar("P")


class PluginRegistry(Generic[P]):
    """Plug-ins of one kind by their `type`: the built-ins in the order registered, then those
    of the entry point group, which are loaded on first use, once."""

    def __init__(self, group: str, kind: type, builtins: Iterable[P] = (), provider: str | None = None):
        """`kind`: the class of the plug-ins, or a runtime-checkable protocol they follow; `provider`: a
        module that registers the built-ins when imported, before the entry points load."""
        self.group = group
        self.kind = kind
        self.provider = provider
        self._plugins: dict[str, P] = {}
        self._loaded = False
        for plugin in builtins:
            self.register(plugin)

    def register(self, plugin: P) -> None:
        if not isinstance(plugin, self.kind):
            raise TypeError(f"{plugin!r} is not a {self.kind.__module__}.{self.kind.__name__}")
        name = plugin.type  # type: ignore[attr-defined]
        if name in self._plugins:
            raise ValueError(f"{self.group}: type {name!r} is already registered")
        self._plugins[name] = plugin

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        if self.provider is not None:
            importlib.import_module(self.provider)
        for ep in _entry_points(_installed()).select(group=self.group):
            try:
                self.register(ep.load())
            except Exception as exc:  # whatever a third-party package does wrong, Lumos runs without it
                log.warning(
                    "skipped the plug-in %s = %s (entry point group %s): %s: %s",
                    ep.name, ep.value, self.group, type(exc).__name__, exc,
                )  # fmt: skip

    def get(self, name: str) -> P | None:
        self._load()
        return self._plugins.get(name)

    def __getitem__(self, name: str) -> P:
        """The plug-in of a type known to be registered, e.g. an entry's that validated against the registry."""
        self._load()
        return self._plugins[name]

    def names(self) -> tuple[str, ...]:
        self._load()
        return tuple(self._plugins)

    def __iter__(self) -> Iterator[P]:
        self._load()
        return iter(tuple(self._plugins.values()))


#: source types (lumos_dagster.sources.builtins registers the built-ins)
SOURCES: PluginRegistry[Plugin] = PluginRegistry("lumos.sources", Plugin, provider="lumos_dagster.sources.builtins")
#: catalog types (lumos_dagster.catalog.builtins registers the built-ins)
CATALOGS: PluginRegistry[Plugin] = PluginRegistry("lumos.catalogs", Plugin, provider="lumos_dagster.catalog.builtins")
