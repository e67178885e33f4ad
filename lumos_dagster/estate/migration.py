"""Older portable documents brought up to the current format, so they still validate and import.

Format 1 → 2: what format 1 did not record is null (`exported_by`, `target_platform`,
`environment`) or known only by name (a glossary term used by a column, without definition or
PII flag); the derived parts (statistics, downstream lists, field context, users, groups) are
computed from the snapshots, as an export computes them.
"""

from __future__ import annotations

import copy

from lumos_dagster.estate import parts as estate_parts


def _from_1(doc: dict) -> dict:
    out = copy.deepcopy(doc)
    out.update(lumos_snapshot_version="2", exported_by=None, target_platform=None, environment=None, glossary=[])
    return estate_parts.complete(out)


#: version → the step that brings a document of that version one version up
STEPS = {"1": _from_1}


def migrate_document(doc: dict) -> dict:
    """A document of an older format as the current format has it (a new dict; `doc` is kept)."""
    while doc["lumos_snapshot_version"] in STEPS:
        doc = STEPS[doc["lumos_snapshot_version"]](doc)
    return doc
