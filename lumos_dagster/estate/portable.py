"""The portable Lumos Snapshot: a catalog-independent JSON document of the whole metadata
estate at one time — every dataset's current snapshot (schema, lineage, ownership, tags,
domain, documentation, stats, version, changes, errors) with the snapshots of its earlier
versions, and the releases; the glossary, the environment, who exported it and for which
catalog; and parts derived from the snapshots for readers without Lumos (`estate_parts`).
`estate.schema.json` next to this module describes it; older formats are migrated when read
(`estate_migration`).

Catalogs hold current state, so an export from a catalog has no history; an export from
the Lumos store has it all, and importing it into a store restores it.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cache
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from importlib.resources import files
from typing import Any, Callable, Iterable, Iterator

import jsonschema
import sqlalchemy as sa
from datahub.metadata.urns import DatasetUrn

from lumos_dagster.catalog.base import CatalogAdapter
from lumos_dagster.catalog.ordering import upstream_first
from lumos_dagster.estate import parts as estate_parts
from lumos_dagster.estate.migration import STEPS, migrate_document
from lumos_dagster.floor.errors import LumosError
from lumos_dagster.floor.graphs import first_cycle
from lumos_dagster.floor.limits import MAX_COUNT, MAX_NESTING
from lumos_dagster.floor.masking import shown_url
from lumos_dagster.floor.model import DatasetRecord, Snapshot, dataset_urn
from lumos_dagster.floor.snapshot_json import snapshot_from_json, snapshot_to_json
from lumos_dagster.floor.storable import unstorable_strings
from lumos_dagster.store import Release, SnapshotStore
from lumos_dagster.store.sql_tables import datasets_table, releases_table, snapshots_table

ESTATE_VERSION = "2"
#: each format Lumos reads, with the JSON Schema of its top level
SCHEMA_FILES = {"1": "estate.v1.schema.json", ESTATE_VERSION: "estate.schema.json"}
DEFAULT_MAX_BYTES = 256 * 1024 * 1024


class EstateError(LumosError):
    """A portable snapshot that is unreadable, invalid or inconsistent."""


@dataclass
class Entry:
    snapshot: Snapshot
    history: list[Snapshot] = field(default_factory=list)  # earlier versions, oldest first


@dataclass(frozen=True)
class GlossaryTerm:
    definition: str | None = None
    pii: bool = False  # a column carrying the term holds personal data


def exporter() -> str:
    try:
        return f"lumos {package_version('lumos')}"
    except PackageNotFoundError:  # pragma: no cover  (run from a checkout that was never installed)
        return "lumos"


@dataclass
class Estate:
    entries: list[Entry]
    releases: list[Release] = field(default_factory=list)
    source: str = ""
    exported_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    glossary: dict[str, GlossaryTerm] = field(default_factory=dict)  # what is known of a term beyond its name
    environment: str | None = None  # DataHub's fabric (PROD…)
    target_platform: str | None = None  # the catalog the document is meant for
    exported_by: str | None = field(default_factory=exporter)  # None: migrated from a format that did not say


# ------------------------------------------------------------------ building


def from_store(store: SnapshotStore) -> Estate:
    entries = []
    for rec in store.datasets():
        current = store.latest(rec.urn)
        if current is None:
            continue
        earlier: dict[str, Snapshot] = {}
        for s in store.history(rec.urn):  # oldest first: the last capture of each version wins
            if s.version and s.version != current.version:
                earlier.pop(s.version, None)
                earlier[s.version] = s
        entries.append(Entry(current, list(earlier.values())))
    return Estate(entries, store.releases(), source=f"store:{shown_url(store.url)}")


def from_snapshots(snapshots: Iterable[Snapshot], source: str, environment: str | None = None) -> Estate:
    entries = [Entry(s) for s in sorted(snapshots, key=lambda s: s.dataset.urn)]
    return Estate(entries, source=source, environment=environment)


# ------------------------------------------------------------ serialization


def to_json(estate: Estate) -> dict:
    doc = {
        "lumos_snapshot_version": ESTATE_VERSION,
        "exported_at": estate.exported_at.isoformat(),
        "exported_by": estate.exported_by,
        "source": estate.source,
        "target_platform": estate.target_platform,
        "environment": estate.environment,
        "datasets": [
            {"snapshot": snapshot_to_json(e.snapshot), "history": [snapshot_to_json(h) for h in e.history]}
            for e in sorted(estate.entries, key=lambda e: e.snapshot.dataset.urn)
        ],
        "glossary": [{"term": t, "definition": g.definition, "pii": g.pii} for t, g in estate.glossary.items()],
        "releases": [
            {"name": r.name, "created_at": r.created_at.isoformat(), "versions": r.versions} for r in estate.releases
        ],
    }
    return estate_parts.complete(doc)


def from_json(doc: dict) -> Estate:
    """The estate of a valid document (of an older format too); its derived parts are not read."""
    doc = migrate_document(doc)
    return Estate(
        entries=[
            Entry(snapshot_from_json(d["snapshot"]), [snapshot_from_json(h) for h in d["history"]])
            for d in doc["datasets"]
        ],
        releases=[
            Release(r["name"], datetime.fromisoformat(r["created_at"]), dict(r["versions"])) for r in doc["releases"]
        ],
        source=doc["source"],
        exported_at=datetime.fromisoformat(doc["exported_at"]),
        glossary={g["term"]: GlossaryTerm(g["definition"], g["pii"]) for g in doc["glossary"]},
        environment=doc["environment"],
        target_platform=doc["target_platform"],
        exported_by=doc["exported_by"],
    )


def _schema(version: str = ESTATE_VERSION) -> dict:
    estate = json.loads(files("lumos_dagster").joinpath(SCHEMA_FILES[version]).read_text())
    snapshot = json.loads(files("lumos_dagster").joinpath("snapshot.schema.json").read_text())
    estate["$defs"]["snapshot"] = {k: v for k, v in snapshot.items() if k not in ("$schema", "$id", "$defs")}
    estate["$defs"].update(snapshot["$defs"])
    return estate


# integers as the store and DataHub (longs) hold them; JSON's 1e30 is "integer" to JSON Schema, not to them
_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _, v: type(v) is int and -MAX_COUNT - 1 <= v <= MAX_COUNT
    ),
)
_DATES = jsonschema.FormatChecker(formats=())


@_DATES.checks("date-time", raises=ValueError)
def _date_time(value: Any) -> bool:  # what import reads them with
    return not isinstance(value, str) or bool(datetime.fromisoformat(value))


@cache
def _top_validator(version: str) -> Any:
    """A document of a format, all but its field trees (`_tree_problems` checks them)."""
    schema = _schema(version)
    schema["$defs"]["snapshot"]["properties"]["schema"] = {"type": "array"}
    return _Validator(schema, format_checker=_DATES)


@cache
def _validators() -> tuple[Any, Any, dict[str, Any]]:
    """A field's validator and a type's, each without what nests in it: a schema's field tree is
    checked node by node (`_tree_problems`), so no nesting recurses. And a type's by its kind: one
    branch of the type's `oneOf`, rather than trying all ten."""
    defs = _schema()["$defs"]
    defs["field"]["properties"]["type"] = {}
    for branch in defs["type"]["oneOf"]:
        props = branch.get("properties", {})
        props.update({k: {} for k in ("element", "key", "value") if k in props})
        props.update({k: {"type": "array"} for k in ("fields", "branches") if k in props})
    by_kind = {b.get("properties", {}).get("kind", {}).get("const", ""): b for b in defs["type"]["oneOf"]}
    return (
        *(_Validator(s, format_checker=_DATES) for s in (defs["field"], defs["type"])),
        {kind: _Validator(b, format_checker=_DATES) for kind, b in by_kind.items()},  # "": the primitives
    )


def _path(prefix: str, parts: Iterable[str | int]) -> str:
    """`datasets[3].snapshot.captured_at`"""
    out = prefix
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}" if out else p
    return out or "(top)"


def _problem(prefix: str, e: jsonschema.ValidationError) -> str:
    message = e.message
    if e.validator == "type" and "integer" in e.validator_value and isinstance(e.instance, (int, float)):
        message = f"{e.instance!r} is not an integer within the signed 64-bit range"
    return f"{_path(prefix, e.absolute_path)}: {message}"


def _tree_problems(fields: list, prefix: str) -> Iterator[str]:
    """A snapshot's field tree node by node (no recursion, whatever its depth), at most MAX_NESTING types deep."""
    field_validator, type_validator, by_kind = _validators()
    stack: list[tuple[Any, str, bool, int]] = [(f, f"{prefix}[{i}]", True, 1) for i, f in enumerate(fields)][::-1]
    while stack:
        node, where, is_field, depth = stack.pop()
        top = where[: where.find("]", len(prefix)) + 1]  # the top-level field: a path this deep is unreadable
        kind = "" if isinstance(node, str) else node.get("kind") if isinstance(node, dict) else None
        if is_field:
            validator = field_validator
        else:  # a kind that is not a string (a list, a number) is the type validator's to reject
            validator = by_kind.get(kind, type_validator) if isinstance(kind, str) else type_validator
        errors = list(validator.iter_errors(node))
        if errors:
            yield from (_problem(where, e) for e in errors)
            continue
        if is_field:
            stack.append((node["type"], f"{where}.type", False, depth))
            continue
        if not isinstance(node, dict):
            continue
        inner = [(node[k], f"{where}.{k}", False) for k in ("element", "key", "value") if k in node]
        inner += [(b, f"{where}.branches[{i}]", False) for i, b in enumerate(node.get("branches", ()))]
        inner += [(f, f"{where}.fields[{i}]", True) for i, f in enumerate(node.get("fields", ()))]
        if inner and depth >= MAX_NESTING:
            yield f"{top}: types nested deeper than {MAX_NESTING} levels, more than Lumos keeps"
            continue
        stack.extend((n, w, f, depth + 1) for n, w, f in reversed(inner))


# what import writes each into: a longer value would fail (PostgreSQL) in the middle of an import
_COLUMNS = {
    ("dataset", "urn"): snapshots_table.c.urn,
    ("dataset", "name"): datasets_table.c.name,
    ("dataset", "platform"): datasets_table.c.platform,
    ("dataset", "format"): datasets_table.c.format,
    ("partition_key",): snapshots_table.c.partition_key,
    ("version",): snapshots_table.c.version,
    ("domain",): datasets_table.c.domain,
}


def _max_chars(column: sa.ColumnElement) -> int | None:
    """The characters a column of the store holds; None: any number."""
    return column.type.length if isinstance(column.type, sa.String) else None


def _snapshot_problems(snap: dict, prefix: str) -> Iterator[str]:
    """What the JSON Schema cannot say about one snapshot: identity, lengths, its field tree."""
    ref = snap["dataset"]
    if ref["urn"] != dataset_urn(ref["platform"], ref["name"]):
        yield f"{prefix}.dataset.urn: {ref['urn']} is not the URN of platform {ref['platform']!r}, name {ref['name']!r}"
    platform = DatasetUrn(ref["platform"], ref["name"]).get_data_platform_urn().platform_name
    if platform != ref["platform"]:
        yield f"{prefix}.dataset.platform: {ref['platform']!r} is spelled {platform!r}"
    for keys, column in _COLUMNS.items():
        value = snap
        for k in keys:
            value = value[k]
        limit = _max_chars(column)
        if value is not None and limit is not None and len(value) > limit:
            yield f"{prefix}.{'.'.join(keys)}: {len(value)} characters, more than the store's {limit}"
    yield from _tree_problems(snap["schema"], f"{prefix}.schema")


def load(path: str, max_bytes: int = DEFAULT_MAX_BYTES, notice: Callable[[str], None] = lambda _: None) -> dict:
    """Read a portable snapshot file; refuse it (before anything is written) when it is too
    large, not JSON, truncated, or not a portable snapshot of a version this Lumos reads. An
    older version is read as it is (`validate` and `from_json` migrate it), and `notice` told."""
    too_large = (
        f"more than the limit of {_amount(max_bytes, 0)} (raise --max-bytes if the file is meant to be that large)"
    )
    try:
        size = os.path.getsize(path)  # a pipe or a device says 0: the read below is what is bounded
        if size > max_bytes:
            raise EstateError(f"{path}: {_amount(size, 1)}, {too_large}")
        with open(path, "rb") as fh:
            raw = fh.read(max_bytes + 1)
    except OSError as exc:
        raise EstateError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    if len(raw) > max_bytes:
        raise EstateError(f"{path}: {too_large}")
    try:
        text = raw.decode("utf-8")
        del raw  # a document may be large: hold it once
        doc = json.loads(text)
    except UnicodeDecodeError:
        raise EstateError(f"{path}: not UTF-8 text, so not a portable snapshot") from None
    except RecursionError:
        raise EstateError(f"{path}: JSON nested deeper than the parser allows, so not a portable snapshot") from None
    except json.JSONDecodeError as exc:
        hint = " (the file ends early: truncated?)" if exc.pos >= len(text) - 1 else ""
        raise EstateError(f"{path}: not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}{hint}") from None
    if not isinstance(doc, dict) or "lumos_snapshot_version" not in doc:
        raise EstateError(f"{path}: not a Lumos portable snapshot (no lumos_snapshot_version)")
    version = doc["lumos_snapshot_version"]
    if version not in SCHEMA_FILES:
        readable = ", ".join(map(repr, SCHEMA_FILES))
        raise EstateError(f"{path}: portable snapshot version {version!r}; this Lumos reads {readable}")
    if version != ESTATE_VERSION:
        notice(f"{path}: portable snapshot version {version!r}, migrated to {ESTATE_VERSION!r} as it is read")
    return doc


def _amount(size: int, decimals: int) -> str:
    return f"{size / 2**20:.{decimals}f} MiB" if size >= 2**20 else f"{size:,} bytes"


@dataclass
class Validation:
    problems: list[str]
    datasets: int = 0
    versions: int = 0
    edges: int = 0
    releases: int = 0
    stale: list[str] = field(default_factory=list)  # derived parts that disagree with the rest: recomputed on read

    @property
    def ok(self) -> bool:
        return not self.problems


def validate(doc: dict) -> Validation:
    """Everything import relies on, each problem one line naming its JSON path: the JSON Schema
    (integers within 64 bits, date-times that parse); lengths within the store's columns; each
    dataset once, by its DataHub URN (so no two spellings of one); every reference resolved:
    lineage edges to datasets in the document, history to its dataset, releases (named once) to
    known versions. Derived parts that disagree with the rest (a hand edit) are listed in `stale`,
    not refused: reading a document recomputes them. An older format is checked against its
    own schema: what it holds in common with the current one is checked alike, and migrating it
    derives the rest."""
    version = doc.get("lumos_snapshot_version") if isinstance(doc, dict) else None
    older = version in STEPS
    # first, and alone: the other problems' messages could quote such text, which no terminal prints
    problems = list(_text_problems(doc)) or _schema_problems(_top_validator(version if older else ESTATE_VERSION), doc)
    if problems:
        return Validation(problems)
    names: dict[str, str] = {}  # DataHub URN → name
    versions: dict[str, set[str]] = {}
    for i, d in enumerate(doc["datasets"]):
        snap = d["snapshot"]
        name, key = snap["dataset"]["name"], _identity(snap["dataset"])
        if key in names:
            problems.append(f"datasets[{i}]: {name} appears twice (as {names[key]} before)")
        names[key] = name
        versions[name] = {h["version"] for h in d["history"]} | {snap["version"]}
        problems.extend(_snapshot_problems(snap, f"datasets[{i}].snapshot"))
        for j, h in enumerate(d["history"]):
            if _identity(h["dataset"]) != key:
                problems.append(f"datasets[{i}].history[{j}]: belongs to {h['dataset']['name']}, not {name}")
            problems.extend(_snapshot_problems(h, f"datasets[{i}].history[{j}]"))
    edges, graph = 0, {}
    listed: dict[str, int]
    for i, d in enumerate(doc["datasets"]):
        name, listed = d["snapshot"]["dataset"]["name"], {}  # upstream identity → its first position
        for j, e in enumerate(d["snapshot"]["upstream"]):
            up = _identity(e["upstream"])
            if up in listed:  # one edge counted once, as lumos.yaml and the store count it
                problems.append(f"datasets[{i}].snapshot.upstream[{j}]: {name} lists upstream "
                                f"{e['upstream']['name']} again (as upstream[{listed[up]}])")  # fmt: skip
                continue
            listed[up] = j
            edges += 1
            if up not in names:
                problems.append(
                    f"datasets[{i}].snapshot.upstream[{j}]: {name} has upstream "
                    f"{e['upstream']['name']}, which is not in the document"
                )
        graph[names.get(_identity(d["snapshot"]["dataset"]), name)] = [names[u] for u in listed if u in names]
    order = [d["snapshot"]["dataset"]["name"] for d in doc["datasets"]]
    ring = first_cycle(graph, order)
    if ring is not None:  # lumos.yaml refuses it too; a self-loop is a ring of one
        problems.append(f"datasets[{order.index(ring[0])}].snapshot.upstream: lineage has a cycle: {' → '.join(ring)}")
    seen: set[str] = set()
    for i, r in enumerate(doc["releases"]):
        if r["name"] in seen:
            problems.append(f"releases[{i}].name: release {r['name']} appears twice")
        seen.add(r["name"])
        limit = _max_chars(releases_table.c.name)
        if limit is not None and len(r["name"]) > limit:
            problems.append(f"releases[{i}].name: more than the store's {limit} characters")
        for name, version in r["versions"].items():
            if version not in versions.get(name, ()):
                problems.append(f"releases[{i}]: release {r['name']}: {name} {version} is not in the document")
    stale = [] if problems or older else estate_parts.disagreements(doc)  # derived from what was just checked
    return Validation(
        problems,
        datasets=len(doc["datasets"]),
        versions=sum(len(v - {None}) for v in versions.values()),
        edges=edges,
        releases=len(doc["releases"]),
        stale=stale,
    )


def _text_problems(doc: Any) -> Iterator[str]:
    """Strings holding a NUL character, which PostgreSQL's text columns refuse mid-import, or a lone
    surrogate (JSON's `\\ud800`), which no reader of the store could encode: refused where they enter."""
    return (f"{problem}, which the store cannot keep" for problem in unstorable_strings(doc))


def _schema_problems(validator: Any, doc: Any) -> list[str]:
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))
    return [_problem("", e) for e in errors]


def _identity(ref: dict) -> str:
    """A dataset as DataHub names it: its URN classes parse and re-render each spelling of one dataset alike."""
    return estate_parts.identity(ref["platform"], ref["name"])


# ------------------------------------------------------------------ import


def import_into_store(
    estate: Estate, store: SnapshotStore, progress: Callable[[str], None] = lambda _: None, batch: int = 1000
) -> tuple[int, int]:
    """Restore history and current snapshots into a store (e.g. SQLite → PostgreSQL): all or
    nothing, and again is a no-op. Returns (snapshots written, already there)."""
    total, started = len(estate.entries), time.monotonic()

    def batches() -> Iterator[tuple[list[DatasetRecord], list[Snapshot]]]:
        for start in range(0, total, batch):
            entries = estate.entries[start : start + batch]
            yield (
                [DatasetRecord(e.snapshot.dataset.name, e.snapshot.dataset.platform, "imported",
                               e.snapshot.dataset.location, e.snapshot.dataset.format, e.snapshot.domain)
                 for e in entries],
                [s for e in entries for s in (*e.history, e.snapshot)],
            )  # fmt: skip
            done, seconds = start + len(entries), time.monotonic() - started
            progress(f"{done}/{total} datasets ({done / max(seconds, 1e-9):.0f} datasets/s)")

    return store.import_estate(batches(), estate.releases)


def import_into_catalog(
    estate: Estate, catalog: CatalogAdapter, batch: int = 100, progress: Callable[[str], None] = lambda _: None
) -> int:
    snapshots = upstream_first([e.snapshot for e in estate.entries])
    sent = 0
    for start in range(0, len(snapshots), batch):
        sent += catalog.emit(snapshots[start : start + batch])
        progress(f"{min(start + batch, len(snapshots))}/{len(snapshots)} datasets")
    return sent


# ------------------------------------------------------------------ compare


def normalized(doc: dict) -> dict:
    """The document without the times it was taken (export time, capture times) and where from,
    by what, for what."""
    out = json.loads(json.dumps(doc))
    for key in ("exported_at", "source", "exported_by", "target_platform"):
        out.pop(key, None)
    for d in out["datasets"]:
        for s in [d["snapshot"], *d["history"]]:
            s.pop("captured_at", None)
    return out


@dataclass
class Comparison:
    only_left: list[str]
    only_right: list[str]
    differences: dict[str, list[str]]  # dataset → what differs

    @property
    def same(self) -> bool:
        return not (self.only_left or self.only_right or self.differences)


_COMPARED = {
    "schema": lambda s: s.fingerprint,
    "version": lambda s: s.version,
    "owners": lambda s: sorted((o.id, o.kind, o.type) for o in s.owners),
    "tags": lambda s: sorted(s.tags),
    "upstream": lambda s: sorted(e.upstream.name for e in s.upstream),
    "description": lambda s: s.description,
    "domain": lambda s: s.domain,
    "removed": lambda s: s.removed,
}


def compare(left: Estate, right: Estate) -> Comparison:
    """Migration verification: datasets, edges, owners, tags… present on both sides, and what differs."""
    a = {e.snapshot.dataset.name: e.snapshot for e in left.entries}
    b = {e.snapshot.dataset.name: e.snapshot for e in right.entries}
    differences = {}
    for name in sorted(set(a) & set(b)):
        diff = [
            f"{what}: {get(a[name])!r} ≠ {get(b[name])!r}"
            for what, get in _COMPARED.items()
            if get(a[name]) != get(b[name])
        ]
        if diff:
            differences[name] = diff
    return Comparison(sorted(set(a) - set(b)), sorted(set(b) - set(a)), differences)
