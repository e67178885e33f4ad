"""Lumos beside DataHub's own ingestion on one lake: the same entities.

DataHub's `s3` source (platform `file`) and `delta-lake` source, acryl-datahub's own code run by its
own CLI from `.venv-datahub` (their extras pin libraries older than Lumos', `make test` builds it), read
the lake of tests/datahub_lake.py into file sinks; Lumos snapshots the same lake into DataHub Lite.
Every dataset URN DataHub emits must be one Lumos emits, in the same container with the same browse
path; every container DataHub emits must be Lumos' too, with the same properties and browse path;
every field path DataHub emits for a dataset must be among Lumos'."""

import os
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from datahub.ingestion.source.file import read_metadata_file

from lumos_dagster.catalog.datahub import dataset_urn, snapshot_proposals
from lumos_dagster.catalog.datahub_lite import open_lite
from lumos_dagster.catalog.patch_apply import state_of
from lumos_dagster.cli import main
from lumos_dagster.store import SnapshotStore
from tests import datahub_lake
from tests.lake import ROOT, backdate

pytestmark = [pytest.mark.servers, pytest.mark.slow]

DATAHUB = ROOT / ".venv-datahub" / "bin" / "datahub"


#: where DataHub's delta-lake source wrote (its operations: timeseries, each kept)
DELTA_OUT: list[Path] = []


def _datahub(recipe: dict, workdir: Path, name: str) -> dict:
    """Run DataHub's own source into a file sink; what it emitted, as a catalog would hold it."""
    if not DATAHUB.exists():
        pytest.fail(f"{DATAHUB} is missing: `make datahub-venv` installs DataHub's own sources beside Lumos")
    out = workdir / f"{name}.json"
    recipe = {**recipe, "sink": {"type": "file", "config": {"filename": str(out)}}}
    (workdir / f"{name}.yml").write_text(yaml.safe_dump(recipe))
    env = {**os.environ, "HOME": str(workdir), "DATAHUB_TELEMETRY_ENABLED": "false"}
    done = subprocess.run([DATAHUB, "ingest", "-c", workdir / f"{name}.yml"], capture_output=True, text=True,
                          env=env, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    if name == "delta":
        DELTA_OUT[:] = [out]
    return state_of(read_metadata_file(out))


def _by_entity(state: dict) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for (urn, name), aspect in state.items():
        out.setdefault(urn, {})[name] = aspect
    return out


def _paths(aspects: dict) -> set[str]:
    schema = aspects.get("schemaMetadata")
    return {f.fieldPath for f in schema.fields} if schema else set()


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    """(what DataHub's sources emitted, what Lumos wrote into DataHub Lite), entity → aspects."""
    tmp = tmp_path_factory.mktemp("parity")
    lake = datahub_lake.build(tmp / "lake")
    backdate(lake / "files" / "sales" / "returns", lake / "files" / "ref")  # undated: in every window
    files = lake / "files"
    theirs = _datahub({"source": {"type": "s3", "config": {
        "platform": "file", "env": "PROD",
        "path_specs": [{"include": f"{files}/{{dept}}/{{table}}/dt={{partition[0]}}/*.*"},
                       {"include": f"{files}/{{dept}}/{{table}}/*.*"}]}}}, tmp, "s3")  # fmt: skip
    theirs |= _datahub({"source": {"type": "delta-lake", "config": {
        "base_path": str(lake / "delta"), "version_history_lookback": -1}}}, tmp, "delta")  # fmt: skip
    config = tmp / "lumos.yaml"
    config.write_text(yaml.safe_dump({
        "sources": [{"name": "lake", "type": "local", "root": str(lake)}],
        "store": {"url": f"sqlite:///{tmp}/store.db"},
        "catalog": {"type": "datahub-lite", "path": str(tmp / "catalog.db")},
    }))  # fmt: skip
    # the files of two days, and the Delta table as its commits of today left it
    for args in (["discover"], ["snapshot", "--partition-range", "2026-11-01...2026-11-02", "--select", "files/*"],
                 ["snapshot", "--select", "delta/*"]):  # fmt: skip
        out = CliRunner().invoke(main, [*args, "-c", str(config)])
        assert out.exit_code == 0, out.output
    with SnapshotStore(f"sqlite:///{tmp}/store.db") as store:
        delta = store.latest(next(d.urn for d in store.datasets() if d.name.startswith("delta/")))
    lite = open_lite(str(tmp / "catalog.db"), read_only=True)
    try:
        ours = {next(iter(e)): {k: v for k, v in next(iter(e.values())).items() if k != "urn"}
                for e in lite.get_all_entities(typed=True)}  # fmt: skip
    finally:
        lite.close()
    return _by_entity(theirs), ours, delta


def test_every_dataset_datahub_emits_is_lumos_in_the_same_place(both):
    theirs, ours, _ = both
    datasets = sorted(u for u, a in theirs.items() if u.startswith("urn:li:dataset:") and "schemaMetadata" in a)
    assert len(datasets) == 6  # five file datasets, one Delta table
    missing = [u for u in datasets if u not in ours]
    assert not missing, f"{len(missing)} of {len(datasets)} DataHub datasets have no Lumos entity: {missing}"
    for urn in datasets:
        assert ours[urn]["container"] == theirs[urn]["container"], urn
        assert ours[urn]["browsePathsV2"] == theirs[urn]["browsePathsV2"], urn
    print(f"datasets: {len(datasets)} of {len(datasets)} DataHub URNs are Lumos', same container and browse path")


def test_every_container_datahub_emits_is_lumos_with_the_same_properties(both):
    theirs, ours, _ = both
    containers = sorted(u for u in theirs if u.startswith("urn:li:container:"))
    assert containers
    for urn in containers:
        assert urn in ours, urn
        for aspect in ("containerProperties", "subTypes", "container", "browsePathsV2", "dataPlatformInstance"):
            assert ours[urn].get(aspect) == theirs[urn].get(aspect), (urn, aspect)
    print(f"containers: {len(containers)} of {len(containers)}")


def test_every_field_path_datahub_emits_is_lumos(both):
    theirs, ours, _ = both
    total = matched = 0
    for urn, aspects in theirs.items():
        if not urn.startswith("urn:li:dataset:") or "schemaMetadata" not in aspects:
            continue
        paths = _paths(aspects)
        extra = _paths(ours[urn]) - paths
        total += len(paths)
        matched += len(paths & _paths(ours[urn]))
        assert paths <= _paths(ours[urn]), (urn, sorted(paths - _paths(ours[urn])), sorted(extra))
    print(f"field paths: {matched} of {total} DataHub field paths are Lumos'")
    assert total > 40 and matched == total


def test_each_delta_commit_is_an_operation_as_datahubs_delta_lake_source_gives_it(both, tmp_path):
    theirs, _, delta = both
    urn = dataset_urn(delta.dataset)
    operations = [m.aspect for m in read_metadata_file(DELTA_OUT[0]) if getattr(m, "aspectName", None) == "operation"
                  and m.entityUrn == urn]  # fmt: skip
    ours = [p.aspect for p in snapshot_proposals(delta) if p.aspectName == "operation"]
    key = lambda o: (o.customProperties["version"], o.operationType, o.customOperationType)  # noqa: E731
    assert sorted(map(key, ours)) == sorted(map(key, operations)) and len(ours) == 6
    assert theirs[urn]["datasetProperties"].customProperties["version"] == delta.table.version == "5"
