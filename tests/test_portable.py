"""Portable Lumos Snapshots: export, validate, import, compare; and `lumos sync`."""

import json

import pytest
from click.testing import CliRunner

from lumos_dagster.cli import main
from lumos_dagster.estate import portable
from lumos_dagster.floor.config import load_config
from lumos_dagster.store import SnapshotStore
from tests.test_catalogs import estate as three_datasets
from tests.test_catalogs import held
from tests.test_cli_changes import project  # noqa: F401  (fixture: a store with history)


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def read(path):
    return json.loads(path.read_text())


def test_export_validate_import_and_back_is_identical(project, tmp_path):  # noqa: F811
    store_doc = tmp_path / "store.json"
    result = invoke("export", "-c", project, "--from", "store", "-o", store_doc)
    assert result.exit_code == 0, result.output
    assert "2 datasets, 3 versions, 1 lineage edge, 0 releases" in result.stdout
    assert invoke("validate", store_doc).exit_code == 0

    lite_a, lite_b = tmp_path / "a.db", tmp_path / "b.db"
    assert invoke("import", store_doc, "--to", f"datahub-lite:{lite_a}").exit_code == 0
    first = tmp_path / "first.json"
    second = tmp_path / "second.json"
    assert invoke("export", "--from", f"datahub-lite:{lite_a}", "-o", first).exit_code == 0
    assert invoke("import", first, "--to", f"datahub-lite:{lite_b}").exit_code == 0
    assert invoke("export", "--from", f"datahub-lite:{lite_b}", "-o", second).exit_code == 0
    # export → import into a fresh DataHub Lite → export: identical, but for when it was taken
    assert portable.normalized(read(first)) == portable.normalized(read(second))
    # and what the catalog holds of the store's current state is exactly it; history, and what only the
    # store keeps of a snapshot (its changes, errors, cost), stay in the store
    from_store = portable.normalized(read(store_doc))
    assert [held(d["snapshot"]) for d in portable.normalized(read(first))["datasets"]] == [
        held(d["snapshot"]) for d in from_store["datasets"]
    ]
    assert invoke("compare", store_doc, f"datahub-lite:{lite_b}").exit_code == 0


def test_a_store_moves_to_another_store_with_its_history(project, tmp_path):  # noqa: F811
    doc = tmp_path / "estate.json"
    invoke("release", "-c", project)
    invoke("export", "-c", project, "-o", doc)
    target = tmp_path / "target.yaml"
    target.write_text(f"store:\n  path: {tmp_path / 'new-store.db'}\n")
    result = invoke("import", doc, "--to", "store", "-c", target)
    assert result.exit_code == 0 and "2 datasets, 3 snapshots, 1 release written" in result.stdout
    again = tmp_path / "again.json"
    invoke("export", "-c", target, "-o", again)
    assert portable.normalized(read(doc)) == portable.normalized(read(again))
    history = json.loads(invoke("history", "raw/orders", "-c", target, "--format", "json").stdout)
    assert [h["version"] for h in history] == ["1.0.0", "2.0.0"] and history[1]["releases"] == ["S-1"]


def test_compare_reports_what_differs(project, tmp_path):  # noqa: F811
    doc = tmp_path / "estate.json"
    invoke("export", "-c", project, "-o", doc)
    edited = read(doc)
    edited["datasets"][0]["snapshot"]["tags"] = ["gold"]
    edited["datasets"][0]["snapshot"]["upstream"] = []
    edited["datasets"] = edited["datasets"][:1]
    (tmp_path / "edited.json").write_text(json.dumps(edited))
    result = invoke("compare", doc, tmp_path / "edited.json", "--format", "json")
    assert result.exit_code == 1
    out = json.loads(result.stdout)
    assert out["only_left"] == ["raw/orders"]
    assert out["differences"] == {"clean/orders": ["tags: [] ≠ ['gold']", "upstream: ['raw/orders'] ≠ []"]}


@pytest.mark.parametrize(
    "mutate,message",
    [
        (lambda text: text[: len(text) // 2], "not valid JSON at line"),
        (lambda text: text.replace(f'"lumos_snapshot_version": "{portable.ESTATE_VERSION}"',
                                   '"lumos_snapshot_version": "9"'), "portable snapshot version '9'"),
        (lambda text: "[1, 2, 3]", "not a Lumos portable snapshot"),
        (lambda text: text.replace('"format_version": "lumos.snapshot/1"', '"format_version": "other"', 1),
         "format_version"),
    ],
)  # fmt: skip
def test_malformed_or_truncated_input_is_refused_before_anything_is_written(project, tmp_path, mutate, message):  # noqa: F811
    doc = tmp_path / "estate.json"
    invoke("export", "-c", project, "-o", doc)
    bad = tmp_path / "bad.json"
    bad.write_text(mutate(doc.read_text()))
    result = invoke("import", bad, "--to", f"datahub-lite:{tmp_path / 'lite.db'}")
    assert result.exit_code == 1 and message in result.output, result.output
    assert not (tmp_path / "lite.db").exists()


def test_dangling_references_and_huge_files_are_refused(project, tmp_path):  # noqa: F811
    doc = tmp_path / "estate.json"
    invoke("export", "-c", project, "-o", doc)
    broken = read(doc)
    broken["datasets"] = [d for d in broken["datasets"] if d["snapshot"]["dataset"]["name"] != "raw/orders"]
    (tmp_path / "broken.json").write_text(json.dumps(broken))
    result = invoke("validate", tmp_path / "broken.json")
    assert result.exit_code == 1
    assert "clean/orders has upstream raw/orders, which is not in the document" in result.stderr
    huge = invoke("import", doc, "--to", f"datahub-lite:{tmp_path / 'lite.db'}", "--max-bytes", 100)
    assert huge.exit_code == 1 and "more than the limit" in huge.output
    assert not (tmp_path / "lite.db").exists()


def test_sync_delivers_what_an_earlier_run_could_not(tmp_path):
    lite = tmp_path / "lite.db"
    (tmp_path / "lumos.yaml").write_text(f"catalog:\n  type: datahub-lite\n  path: {lite}\nstore:\n  path: store.db\n")
    config = load_config(str(tmp_path / "lumos.yaml"))
    store = SnapshotStore(config.store_url)
    store.put(three_datasets(), catalogs=[f"datahub-lite:{lite}"])
    store.close()
    status = invoke("sync", "-c", tmp_path / "lumos.yaml", "--status")
    assert f"datahub-lite:{lite}: 3 pending" in status.stdout
    result = invoke("sync", "-c", tmp_path / "lumos.yaml")
    assert result.exit_code == 0 and "3 delivered, 0 unchanged" in result.stdout
    assert "3 delivered" in invoke("sync", "-c", tmp_path / "lumos.yaml", "--status").stdout
    exported = portable.from_json(json.loads(_export(tmp_path, f"datahub-lite:{lite}")))
    assert {e.snapshot.dataset.name for e in exported.entries} == {"raw/orders", "sales/orders", "marts/revenue"}


def _export(tmp_path, source):
    out = tmp_path / "out.json"
    assert invoke("export", "--from", source, "-o", out).exit_code == 0
    return out.read_text()
