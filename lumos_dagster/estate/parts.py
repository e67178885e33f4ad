"""The parts of the portable document (format 2) that are derived from the rest of it: each
dataset's statistics, downstream list and field context, and the top-level glossary, users and
groups. They are there for whoever reads the document without Lumos (another catalog, a
script); Lumos computes them from the snapshots and never reads them back: export and migration
compute them here, and validation lists where a (hand-edited) document disagrees with them.

They work on the JSON, not the model: validation checks them before anything is parsed.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from datahub.metadata.urns import DatasetUrn


@lru_cache(maxsize=65536)
def identity(platform: str, name: str) -> str:
    """A dataset as DataHub names it: each spelling of one dataset's platform renders alike."""
    return DatasetUrn(platform, name).urn()


def statistics(snap: dict) -> dict:
    """Size, rows and quality, flat, from the snapshot's stats and quality."""
    stats, quality = snap["stats"], snap.get("quality")
    return {
        "row_count": stats["row_count"],
        "size_bytes": stats["total_bytes"],
        "file_count": stats["file_count"],
        "last_modified": stats["last_modified"],
        "quality_score": quality["score"] if quality else None,
        "freshness": quality["freshness"] if quality else None,
    }


def _struct_inside(t: Any) -> list | None:
    while isinstance(t, dict) and t.get("kind") in ("array", "map"):
        t = t["element"] if t["kind"] == "array" else t["value"]
    return t["fields"] if isinstance(t, dict) and t.get("kind") == "struct" else None


def fields(snap: dict, pii_terms: set[str]) -> list[dict]:
    """Every field with business context (a description or glossary terms), by its flat path
    (`Schema.flatten`'s), PII when one of its terms is a PII term of the glossary."""
    out = []
    stack = [(f, "") for f in reversed(snap["schema"])]
    while stack:  # no recursion: schemas may nest 64 deep
        f, prefix = stack.pop()
        path, terms = prefix + f["name"], f.get("terms", [])
        if terms or "description" in f:
            pii = any(t in pii_terms for t in terms)
            out.append({"path": path, "description": f.get("description"), "terms": terms, "pii": pii})
        stack.extend((g, path + ".") for g in reversed(_struct_inside(f["type"]) or ()))
    return out


def downstream(datasets: list[dict]) -> list[list[str]]:
    """Per dataset, the URNs of the datasets whose current snapshot lists it upstream."""
    index = {identity(d["snapshot"]["dataset"]["platform"], d["snapshot"]["dataset"]["name"]): i
             for i, d in enumerate(datasets)}  # fmt: skip
    out: list[set[str]] = [set() for _ in datasets]
    for d in datasets:
        for e in d["snapshot"]["upstream"]:
            i = index.get(identity(e["upstream"]["platform"], e["upstream"]["name"]))
            if i is not None:
                out[i].add(d["snapshot"]["dataset"]["urn"])
    return [sorted(s) for s in out]


def owners(datasets: list[dict], kind: str) -> list[dict]:
    """Each user (or group) that owns a dataset, with the URNs of what it owns."""
    found: dict[str, set[str]] = {}
    for d in datasets:
        for o in d["snapshot"]["owners"]:
            if o["kind"] == kind:
                found.setdefault(o["id"], set()).add(d["snapshot"]["dataset"]["urn"])
    return [{"id": k, "datasets": sorted(v)} for k, v in sorted(found.items())]


def glossary(datasets: list[dict], known: list[dict], field_lists: list[list[dict]]) -> list[dict]:
    """Every term a current snapshot uses (the dataset's or a field's), with what the document
    knows of it (definition, PII)."""
    known_terms = {g["term"]: g for g in known}
    used: set[str] = set()
    for d, fs in zip(datasets, field_lists, strict=True):
        used.update(d["snapshot"].get("terms", ()), (t for f in fs for t in f["terms"]))
    return [known_terms.get(t, {"term": t, "definition": None, "pii": False}) for t in sorted(used)]


def derived(datasets: list[dict], known_glossary: list[dict]) -> dict:
    """Every derived part of a document of these datasets and this glossary: `{"datasets":
    [{statistics, downstream, fields}…], "glossary", "users", "groups"}`."""
    pii = {g["term"] for g in known_glossary if g["pii"]}
    field_lists = [fields(d["snapshot"], pii) for d in datasets]
    return {
        "datasets": [
            {"statistics": statistics(d["snapshot"]), "downstream": down, "fields": fs}
            for d, down, fs in zip(datasets, downstream(datasets), field_lists, strict=True)
        ],
        "glossary": glossary(datasets, known_glossary, field_lists),
        "users": owners(datasets, "user"),
        "groups": owners(datasets, "group"),
    }


def complete(doc: dict) -> dict:
    """`doc` with its derived parts (re)computed, in place."""
    parts = derived(doc["datasets"], doc["glossary"])
    for d, p in zip(doc["datasets"], parts["datasets"], strict=True):
        d.update(p)
    doc.update({k: parts[k] for k in ("glossary", "users", "groups")})
    return doc


def disagreements(doc: dict) -> list[str]:
    """Where a (schema-valid) document's derived parts are not what the rest of it gives, each
    one line naming its path."""
    parts = derived(doc["datasets"], doc["glossary"])
    out = []
    for i, (d, p) in enumerate(zip(doc["datasets"], parts["datasets"], strict=True)):
        out += [_line(f"datasets[{i}].{k}", d[k], v) for k, v in p.items() if d[k] != v]
    return out + [_line(k, doc[k], parts[k]) for k in ("glossary", "users", "groups") if doc[k] != parts[k]]


def _line(where: str, got: Any, want: Any, width: int = 120) -> str:
    def short(v: Any) -> str:
        text = repr(v)
        return text if len(text) <= width else text[: width - 1] + "…"

    return f"{where}: {short(got)}, but the rest of the document gives {short(want)}"
