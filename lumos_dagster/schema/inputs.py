"""What `lumos diff` compares: snapshot files, Avro schemas, data files, or DATASET@VERSION."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Callable

from lumos_dagster.floor.datatypes import Schema
from lumos_dagster.floor.errors import LumosError, SchemaReadError, UnknownDataset
from lumos_dagster.floor.model import Snapshot, dataset_urn
from lumos_dagster.floor.snapshot_json import snapshot_from_json
from lumos_dagster.formats import read_file_schema
from lumos_dagster.formats.avro import read_avsc
from lumos_dagster.store import SnapshotStore
from lumos_dagster.store.roles import RegistryAndHistory


class InputError(LumosError):
    """A diff input that is neither a readable file nor DATASET@VERSION."""


@dataclass(frozen=True)
class Side:
    label: str
    schema: Schema
    snapshot: Snapshot | None = None  # when the input was a whole snapshot (dataset-level changes too)
    dataset: str | None = None


def _snapshot_file(path: str) -> Snapshot | None:
    try:
        with open(path) as fh:
            doc = json.load(fh)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None  # not one JSON document: maybe JSON lines data
    if isinstance(doc, dict) and "format_version" in doc:
        try:
            return snapshot_from_json(doc)
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"{path}: not a valid Lumos snapshot ({exc})") from None
    return None


def _urn_of(store: RegistryAndHistory, name: str) -> str:
    """The dataset's URN from the registry, whichever source (file, s3, postgres…) it came from."""
    if name.startswith("urn:lumos:dataset:"):
        return name
    records = store.datasets(include_removed=True)
    urns = sorted({r.urn for r in records if r.name == name})
    if len(urns) > 1:
        raise InputError(f"{name} names several datasets: give the URN instead ({' or '.join(urns)})")
    if not urns and store.latest(dataset_urn("file", name)) is None:  # nor in a store without its registry
        raise UnknownDataset([name], (r.name for r in records))
    return urns[0] if urns else dataset_urn("file", name)


def load_side(spec: str, open_store: Callable[[], SnapshotStore] | None) -> Side:
    if os.path.isfile(spec):
        if spec.endswith(".avsc"):
            try:
                return Side(spec, read_avsc(spec))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise InputError(f"{spec}: not a valid Avro schema ({exc})") from None
        if spec.endswith(".json") and (snap := _snapshot_file(spec)) is not None:
            return Side(spec, snap.schema, snap, snap.dataset.name)
        try:
            return Side(spec, read_file_schema(spec).schema)
        except SchemaReadError as exc:
            raise InputError(str(exc)) from None
    name, at, version = spec.rpartition("@")
    if not at or not name:
        raise InputError(f"{spec}: no such file, and not DATASET@VERSION (e.g. sales/orders@1.2.0 or @latest)")
    if open_store is None:
        raise InputError(f"{spec}: reading a version from the store needs a lumos.yaml (--config)")
    store = open_store()
    try:
        urn = _urn_of(store, name)
        snap = store.latest(urn) if version == "latest" else store.at_version(urn, version)
        known = sorted({s.version for s in store.history(urn) if s.version}) if snap is None else []
    finally:
        store.close()
    if snap is None:
        hint = f"known versions: {', '.join(known)}" if known else "the store has no snapshot of it"
        raise InputError(f"{spec}: {name} has no version {version} ({hint})")
    return Side(spec, snap.schema, snap, name)
