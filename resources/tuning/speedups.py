"""The tuning's process-wide patches: three of Dagster's per-output costs that a code location of
thousands of datasets pays, cut without changing what Dagster builds (written against Dagster
1.13; the upstream report's reproduction is benchmarks/dagster_outputs.py).

Applied only by building a tuned event log (the switch: resources/tuning/__init__.py), so only
in a process whose instance is tuned; never on Dagster's stock instance.

* `resolve_dagster_type` runs every typing check on each output's type, yet nearly every output
  of a Lumos op is typed with a DagsterType (`Any`, `Nothing`) or None: 35,000 calls, ~0.6 s, for
  a code location of 5,000 datasets. A DagsterType resolves to itself and None to `Any` — what
  Dagster's function returns for them — without the checks.
* Each check spec of a multi-asset is checked to target one of its assets by searching a list:
  checks × assets comparisons, ~0.5 s for a lineage group of 5,000. The same check, on a set.
* `AssetsDefinition.asset_and_check_keys` builds a new set of every key of a multi-asset each time
  it is read, and building an execution plan (twice a run) reads it for each output: outputs²
  set elements, ~0.35 s for one op of 1,000 datasets. An `AssetsDefinition` never changes (a
  subset is a new one), so the set is built once per instance, frozen.

Each is replaced only where the function found is the one it was written for (its qualified
name); tests compare the replacements with Dagster's own functions. `revert` puts Dagster's own
back (a test process that built a tuned event log, when the suite runs on the stock instance).
"""

from __future__ import annotations

import functools
import inspect
from types import ModuleType

import dagster._core.definitions.decorators.decorator_assets_definition_builder as builder
import dagster._core.definitions.input as input_module
import dagster._core.definitions.output as output_module
import dagster._core.types.dagster_type as types
from dagster import AssetsDefinition
from dagster._core.types.dagster_type import Any, DagsterType


def _replace(name: str, make, home: ModuleType, *importers: ModuleType) -> None:
    """Replace `home.name` (and the copies modules imported by name) with `make(original)`."""
    original = getattr(home, name)
    if getattr(original, "__qualname__", None) != name:  # replaced already, or Dagster changed it
        return
    replacement = functools.wraps(original)(make(original))
    replacement.__qualname__ = f"lumos.{name}"
    for module in (home, *importers):
        if getattr(module, name, None) is original:
            setattr(module, name, replacement)


def _resolve_dagster_type(original):
    def resolve(dagster_type: object) -> DagsterType:
        if isinstance(dagster_type, DagsterType):
            return dagster_type
        if dagster_type is None:
            return Any
        return original(dagster_type)

    return resolve


def _validate_check_specs(original):
    def validate(check_specs, valid_asset_keys) -> None:
        return original(check_specs, frozenset(valid_asset_keys))

    return validate


_KEYS = "asset_and_check_keys"


def _cache_keys() -> None:
    original = AssetsDefinition.__dict__.get(_KEYS)
    if not isinstance(original, property) or original.fget.__qualname__ != f"AssetsDefinition.{_KEYS}":
        return

    def keys(self: AssetsDefinition) -> frozenset:
        found = self.__dict__.get(_KEYS)
        if found is None:
            found = self.__dict__[_KEYS] = frozenset(original.fget(self))
        return found

    keys.__qualname__ = f"lumos.{_KEYS}"
    setattr(AssetsDefinition, _KEYS, property(keys, doc=original.__doc__))


_REPLACED = (
    ("resolve_dagster_type", _resolve_dagster_type, types, (input_module, output_module)),
    ("_validate_check_specs_target_relevant_asset_keys", _validate_check_specs, builder, ()),
)


def apply() -> None:
    """Idempotent: building a tuned event log calls it, before the process builds its definitions
    (Dagster builds the instance first in a code server, a run worker and `dagster asset materialize`)."""
    _cache_keys()
    for name, make, home, importers in _REPLACED:
        _replace(name, make, home, *importers)


def applied() -> bool:
    """Whether any of the patches is in place in this process."""
    keys = AssetsDefinition.__dict__.get(_KEYS)
    return (isinstance(keys, property) and keys.fget.__qualname__ == f"lumos.{_KEYS}") or any(
        getattr(getattr(home, name), "__qualname__", None) == f"lumos.{name}" for name, _, home, _ in _REPLACED
    )


def revert() -> None:
    """Dagster's own functions back, wherever `apply` put a replacement."""
    keys = AssetsDefinition.__dict__.get(_KEYS)
    if isinstance(keys, property) and keys.fget.__qualname__ == f"lumos.{_KEYS}":
        original = inspect.getclosurevars(keys.fget).nonlocals["original"]
        setattr(AssetsDefinition, _KEYS, original)
    for name, _, home, importers in _REPLACED:
        replacement = getattr(home, name)
        if getattr(replacement, "__qualname__", None) != f"lumos.{name}":
            continue
        for module in (home, *importers):
            if getattr(module, name, None) is replacement:
                setattr(module, name, replacement.__wrapped__)
