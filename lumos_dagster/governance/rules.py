"""Governance rules on snapshots: quality (test results, profile, freshness), required
documentation, and what each owner must fill in. Pure, except reading the test tools' files."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence
from urllib.parse import quote

from lumos_dagster.code_lineage import normalize_table_name
from lumos_dagster.floor.config import LumosConfig, RequiredConfig
from lumos_dagster.floor.errors import LumosError
from lumos_dagster.floor.masking import webhook_shown
from lumos_dagster.floor.model import AssertionResult, Profile, Quality, Snapshot
from lumos_dagster.floor.wording import visible
from lumos_dagster.governance.quality import Assertion, freshness, quality_score, read_dbt, read_great_expectations
from lumos_dagster.lineage.resolve import TableNames


def has_quality_sources(config: LumosConfig) -> bool:
    dbt = config.lineage.dbt
    return bool(config.quality.great_expectations or (dbt and dbt.run_results))


def read_assertions(config: LumosConfig, datasets: Iterable[str]) -> tuple[dict[str, list[AssertionResult]], list[str]]:
    """The latest dbt test and Great Expectations results, by dataset name, and the problems met
    (an unreadable file, a table no dataset matches) — a bad file never hides the others."""
    found: list[Assertion] = []
    problems: list[str] = []
    dbt = config.lineage.dbt
    if dbt and dbt.run_results:
        try:
            found += read_dbt(config.resolve(dbt.manifest), config.resolve(dbt.run_results))
        except (OSError, ValueError) as e:
            problems.append(f"lineage.dbt.run_results: {e}")
    for i, location in enumerate(config.quality.great_expectations):
        path = Path(config.resolve(location))
        files = sorted(path.rglob("*.json")) if path.is_dir() else [path]
        for file in files:
            try:
                found += read_great_expectations(file)
            except (OSError, ValueError) as e:
                problems.append(f"quality.great_expectations[{i}]: {e}")
    names = TableNames(datasets, config.lineage.names)
    out: dict[str, list[AssertionResult]] = {}
    unmatched: set[str] = set()
    for a in found:
        dataset, problem = names.resolve(normalize_table_name(a.relation))
        if dataset is None:
            unmatched.add(problem or f"{a.source} results for {a.relation}: no dataset by that name")
            continue
        result = AssertionResult(a.name, a.status, a.dimension, a.column, a.source, a.message, a.observed_at)
        out.setdefault(dataset, []).append(result)
    return out, problems + sorted(unmatched)


def uniqueness(snapshot: Snapshot, profile: Profile) -> float | None:
    """Distinct share of the key columns (1: no duplicate keys seen), when the dataset has keys."""
    keys = {p for p, f in snapshot.schema.flatten() if f.is_key}
    shares = [
        min(1.0, c.distinct / profile.row_count)
        for c in profile.columns
        if c.path in keys and c.distinct is not None and profile.row_count
    ]
    return min(shares) if shares else None


def assess(
    snapshot: Snapshot, assertions: Sequence[AssertionResult], profile: Profile | None, now: datetime
) -> Snapshot:
    """The snapshot with its profile and quality: the test results, the profile's completeness
    and key uniqueness, and freshness against the dataset's SLA."""
    if snapshot.removed:
        return snapshot
    profile = profile or snapshot.profile
    score = quality_score(
        assertions,
        completeness=profile.completeness if profile else None,
        uniqueness=uniqueness(snapshot, profile) if profile else None,
    )
    verdict, age = freshness(snapshot.stats.last_modified, snapshot.sla, now)
    if score is None and not assertions and snapshot.sla is None:
        return replace(snapshot, profile=profile)  # nothing to say about its quality
    quality = Quality(score, verdict, None if age is None else round(age, 2), tuple(assertions))
    return replace(snapshot, profile=profile, quality=quality)


# ------------------------------------------------------------------ required documentation


def _missing(snapshot: Snapshot, field: str) -> str | None:
    if field == "column_descriptions":
        bare = [p for p, f in snapshot.schema.flatten() if not f.description]
        if not bare:
            return None
        shown = ", ".join(bare[:5]) + (f" and {len(bare) - 5} more" if len(bare) > 5 else "")
        return f"column descriptions ({shown})"
    present = {
        "description": snapshot.description,
        "owner": snapshot.owners,
        "domain": snapshot.domain,
        "tags": snapshot.tags,
        "sla": snapshot.sla,
    }[field]
    return None if present else field


def required_of(name: str, required: RequiredConfig) -> bool:
    """Whether `governance.required` applies to the dataset (some fields, no exempting pattern)."""
    return bool(required.fields) and not any(fnmatch.fnmatchcase(name, p) for p in required.except_)


def missing_context(snapshot: Snapshot, required: RequiredConfig) -> list[str] | None:
    """What the dataset lacks of `governance.required.fields`; None when none apply to it."""
    if not required_of(snapshot.dataset.name, required):
        return None
    return [m for f in required.fields if (m := _missing(snapshot, f))]


@dataclass(frozen=True)
class Todo:
    dataset: str
    missing: tuple[str, ...]
    links: tuple[tuple[str, str], ...]  # (label, URL): where to fill it in


def catalog_link(base: str, urn: str) -> str:
    return f"{base.rstrip('/')}/dataset/{quote(urn, safe='')}"


def missing_by_owner(
    snapshots: Iterable[Snapshot], required: RequiredConfig, links: Callable[[Snapshot], tuple[tuple[str, str], ...]]
) -> dict[str, list[Todo]]:
    """Each owner's datasets that lack required context; unowned datasets under "(unowned)"."""
    out: dict[str, list[Todo]] = {}
    for s in sorted(snapshots, key=lambda s: s.dataset.name):
        missing = missing_context(s, required)
        if not missing:
            continue
        todo = Todo(s.dataset.name, tuple(missing), links(s))
        for owner in [o.id for o in s.owners] or ["(unowned)"]:
            out.setdefault(owner, []).append(todo)
    return dict(sorted(out.items()))


def todo_line(t: Todo) -> str:
    where = " · ".join(f"[{label}]({url})" for label, url in t.links)
    return visible(f"- `{t.dataset}`: {', '.join(t.missing)}" + (f" — {where}" if where else ""))


def todo_markdown(todos: Mapping[str, Sequence[Todo]], required: RequiredConfig) -> str:
    if not todos and not required.fields:  # not "all is well" beside owners at 20 %: nothing was asked
        return "Nothing is required of datasets (governance.required.fields is empty), so nothing is missing."
    if not todos:
        return f"Every dataset has what governance.required asks for: {', '.join(required.fields)}."
    lines = []
    for owner, items in todos.items():
        lines += [f"## {owner} ({len(items)})", ""]
        lines += [todo_line(t) for t in items]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def todo_json(todos: Mapping[str, Sequence[Todo]]) -> dict:
    return {
        owner: [{"dataset": t.dataset, "missing": list(t.missing), "links": dict(t.links)} for t in items]
        for owner, items in todos.items()
    }


def post_webhook(url: str, payload: dict, timeout: float = 10, setting: str = "governance.webhook") -> None:
    """POST the payload as JSON; a failure is an error naming the setting, the webhook by its host
    (`webhook_shown`) and why, never requests' own message: it quotes the whole URL."""
    import requests

    try:
        requests.post(url, json=payload, timeout=timeout).raise_for_status()
    except requests.RequestException as e:
        raise LumosError(f"{setting}: could not post to {webhook_shown(url)}: {_why(e, timeout)}") from None


def _why(error, timeout: float) -> str:
    """Why a post failed, in words that cannot quote the URL: the HTTP status, or the operating
    system's reason (refused, name not known), or the kind of failure."""
    import requests

    if error.response is not None:
        return f"HTTP {error.response.status_code} {error.response.reason or ''}".rstrip()
    if isinstance(error, requests.Timeout):
        return f"no answer within {timeout:g} s"
    if isinstance(error, (requests.exceptions.InvalidURL, requests.exceptions.InvalidSchema,
                          requests.exceptions.MissingSchema)):  # fmt: skip
        return "not an http(s) URL"
    cause: BaseException | None = error
    for _ in range(8):  # requests → urllib3 → the socket's error
        if cause is None:
            break
        if isinstance(cause, OSError) and cause.strerror:
            return cause.strerror
        nested = cause.args[0] if cause.args and isinstance(cause.args[0], BaseException) else None
        cause = cause.__cause__ or cause.__context__ or nested
    return type(error).__name__
