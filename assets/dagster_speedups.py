"""Two of Dagster's per-output costs that a code location of thousands of datasets pays, cut
without changing what Dagster builds (written against Dagster 1.13; the upstream report's
reproduction is benchmarks/dagster_outputs.py).

* `resolve_dagster_type` runs every typing check on each output's type, yet nearly every output
  of a Lumos op is typed with a DagsterType (`Any`, `Nothing`) or None: 35,000 calls, ~0.6 s, for
  a code location of 5,000 datasets. A DagsterType resolves to itself and None to `Any` — what
  Dagster's function returns for them — without the checks.
* Each check spec of a multi-asset is checked to target one of its assets by searching a list:
  checks × assets comparisons, ~0.5 s for a lineage group of 5,000. The same check, on a set.

Each is replaced only where the function found is the one it was written for (its qualified
name); tests compare the replacements with Dagster's own functions.
"""

from __future__ import annotations

import functools
from types import ModuleType

import dagster._core.definitions.decorators.decorator_assets_definition_builder as builder
import dagster._core.definitions.input as input_module
import dagster._core.definitions.output as output_module
import dagster._core.types.dagster_type as types
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


def apply() -> None:
    """Idempotent: the code location calls it before building its assets."""
    _replace("resolve_dagster_type", _resolve_dagster_type, types, input_module, output_module)
    _replace("_validate_check_specs_target_relevant_asset_keys", _validate_check_specs, builder)
