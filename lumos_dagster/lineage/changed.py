"""Which datasets a change to the repository touches: what CI snapshots and gates.

A SQL file builds the datasets its statements write (the code as it is in the working tree); a
file of the dbt project touches every dataset dbt builds (the manifest does not say which file
is which model until dbt compiles it); `lumos.yaml` touches everything. Their consumers follow
through the asset selection (`key:"a/b"+`, with the datasets' asset keys).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from lumos_dagster.floor.config import LumosConfig
from lumos_dagster.lineage.resolve import CodeDoc

EVERYTHING = None


def touched(files: Sequence[str], config: LumosConfig, code: Mapping[str, CodeDoc]) -> set[str] | None:
    """The datasets the changed `files` (paths relative to the working directory) touch, or
    EVERYTHING when the configuration itself changed."""
    out: set[str] = set()
    built_by = {name: set(doc.built_by) for name, doc in code.items()}
    for file in files:
        path = Path(file).resolve()
        if config.source_file != "<memory>" and path == Path(config.source_file).resolve():
            return EVERYTHING
        dbt = config.lineage.dbt
        if dbt is not None and path.is_relative_to(_dbt_project(config, dbt.manifest)):
            out |= {name for name, jobs in built_by.items() if any(j.orchestrator == "dbt" for j in jobs)}
        for sql in config.lineage.sql:
            folder = Path(config.resolve(sql.path))
            if path == folder or path.is_relative_to(folder):
                job = path.name if path == folder else path.relative_to(folder).as_posix()
                out |= {
                    name
                    for name, jobs in built_by.items()
                    if any(j.flow == sql.path and (j.name == job or j.name.startswith(f"{job}#")) for j in jobs)
                }
    return out


def _dbt_project(config: LumosConfig, manifest: str) -> Path:
    return Path(config.resolve(manifest)).parent.parent  # <project>/target/manifest.json


def selection(datasets: set[str] | None, paths: Mapping[str, tuple[str, ...]]) -> str:
    """A Dagster asset selection: the datasets (by their asset key paths, `naming.asset_paths`)
    and everything downstream; `*` for everything."""
    if datasets is EVERYTHING:
        return "*"
    return " or ".join(f'key:"{"/".join(paths[name])}"+' for name in sorted(datasets) if name in paths)
