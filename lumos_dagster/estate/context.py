"""What a portable snapshot takes from lumos.yaml rather than from the snapshots: the glossary's
definitions and PII flags, and the environment its datasets live in."""

from __future__ import annotations

from lumos_dagster.estate.portable import GlossaryTerm
from lumos_dagster.floor.config import LumosConfig


def glossary(config: LumosConfig) -> dict[str, GlossaryTerm]:
    """Each term of `governance.glossary`: several rules may name one term (one per column
    pattern), so a definition any of them gives and PII any of them flags are the term's."""
    out: dict[str, GlossaryTerm] = {}
    for rule in config.governance.glossary:
        known = out.get(rule.term, GlossaryTerm())
        out[rule.term] = GlossaryTerm(known.definition or rule.definition, known.pii or rule.pii)
    return out


def environment(config: LumosConfig) -> str | None:
    """The environment (DataHub's fabric) of the first catalog that names one."""
    return next((c.env for c in config.catalogs if isinstance(getattr(c, "env", None), str)), None)
