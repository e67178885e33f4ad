import textwrap
from pathlib import Path

import pytest

from lumos_dagster.floor.config import load_config, parse_config
from lumos_dagster.floor.errors import ConfigError

BAD = [
    ("missing root", {"sources": [{"type": "local", "name": "lake"}]}, "sources[0].root: Field required"),
    (
        "typo in a key",
        {"sources": [{"root": "x", "templat": "{dataset}/*"}]},
        "sources[0].templat: unknown key (did you mean 'template'?)",
    ),
    ("unknown top-level key", {"sorces": []}, "sorces: unknown key (did you mean 'sources'?)"),
    (
        "template names no dataset",
        {"sources": [{"root": "x", "template": "dt={date}/*"}]},
        "sources[0].template: path template 'dt={date}/*' names no dataset",
    ),
    (
        "unknown catalog",
        {"catalog": {"type": "gms"}},
        "catalog[0].type: unknown type 'gms' (known: 'datahub-lite', 'datahub-rest'",
    ),
    ("unknown format", {"sources": [{"root": "x", "formats": ["xlsx"]}]}, "sources[0].formats[0]: Input should be"),
    (
        "bad time zone",
        {"partitions": {"timezone": "Mars/Olympus"}},
        "partitions.timezone: unknown time zone 'Mars/Olympus'",
    ),
    ("bad cadence", {"partitions": {"cadence": "fortnightly"}}, "partitions.cadence: Input should be"),
    (
        "bad ownership type",
        {"datasets": [{"name": "a", "owners": [{"id": "x", "type": "OWNER"}]}]},
        "datasets[0].owners[0].type: Input should be 'DATAOWNER'",
    ),
    ("duplicate dataset", {"datasets": [{"name": "a"}, {"name": "a"}]}, "datasets: names must be unique, repeated: a"),
    ("duplicate source", {"sources": [{"root": "x"}, {"root": "y"}]}, "sources: names must be unique, repeated: local"),
    ("not a mapping", ["sources"], "the top level must be a mapping"),
    (
        "unset variable",
        {"sources": [{"root": "${LUMOS_TEST_UNSET}"}]},
        "sources[0].root: environment variable LUMOS_TEST_UNSET is not set",
    ),
]


@pytest.mark.parametrize("title,data,message", BAD, ids=[b[0] for b in BAD])
def test_errors_name_the_file_and_the_key(title, data, message):
    with pytest.raises(ConfigError) as err:
        parse_config(data, file="conf/lumos.yaml", env={})
    assert str(err.value).startswith("conf/lumos.yaml: ")
    assert message in str(err.value)


def test_environment_interpolation_with_defaults_and_escapes():
    cfg = parse_config(
        {"sources": [{"root": "${LAKE}/raw", "name": "${NAME:-lake}", "exclude": ["$${literal}"]}]},
        env={"LAKE": "/data"},
    )
    src = cfg.sources[0]
    assert (src.root, src.name, src.exclude) == ("/data/raw", "lake", ["${literal}"])


def test_credentials_keep_their_variables_until_used():
    cfg = parse_config(
        {
            "sources": [
                {"root": "${LAKE}"},
                {"type": "postgres", "dsn": "postgresql://lumos:${PG_PASSWORD}@db:5432/app"},
                {"type": "mongodb", "uri": "${MONGO_URI:-mongodb://localhost}", "databases": ["${DB}"]},
            ],
            "store": {"url": "postgresql+psycopg://lumos:${STORE_PASSWORD}@db/lumos?x=$$"},
        },
        env={"LAKE": "/data", "DB": "shop"},
    )
    assert (cfg.sources[0].root, cfg.sources[2].databases) == ("/data", ["shop"])
    assert cfg.sources[1].dsn == "postgresql://lumos:${PG_PASSWORD}@db:5432/app"
    assert cfg.sources[2].uri == "${MONGO_URI:-mongodb://localhost}"
    assert cfg.store_url == "postgresql+psycopg://lumos:${STORE_PASSWORD}@db/lumos?x=$$"


def test_defaults_work_on_a_laptop(tmp_path):
    cfg = parse_config({}, base_dir=str(tmp_path))
    assert [c.type for c in cfg.catalogs] == ["datahub-lite"]
    assert cfg.store_url == f"sqlite:///{tmp_path}/.lumos/store.db"
    assert cfg.lite_path == f"{tmp_path}/.lumos/catalog.db"
    assert (cfg.spark.master, cfg.partitions.cadence, cfg.partitions.timezone) == ("local[*]", "daily", "UTC")


def test_owner_shorthands():
    cfg = parse_config({"datasets": [{"name": "a", "owners": ["ann@x.io", "group:data-eng", "user:bob"]}]})
    assert [(o.id, o.kind, o.type) for o in cfg.datasets[0].owners] == [
        ("ann@x.io", "user", "DATAOWNER"),
        ("data-eng", "group", "DATAOWNER"),
        ("bob", "user", "DATAOWNER"),
    ]


def test_relative_paths_are_relative_to_the_file(tmp_path):
    (tmp_path / "sub").mkdir()
    path = tmp_path / "sub" / "lumos.yaml"
    path.write_text("sources:\n  - root: lake\n")
    cfg = load_config(str(path))
    assert cfg.resolve(cfg.sources[0].root) == str(tmp_path / "sub" / "lake")


def test_missing_file_says_how_to_fix_it(tmp_path):
    with pytest.raises(ConfigError, match="nope.yaml: configuration file not found .*LUMOS_CONFIG"):
        load_config(str(tmp_path / "nope.yaml"))


def test_yaml_syntax_errors_give_the_line(tmp_path):
    path = tmp_path / "lumos.yaml"
    path.write_text(
        textwrap.dedent("""\
        sources:
          - root: lake
            name: [unclosed
        """)
    )
    with pytest.raises(ConfigError, match=r"lumos.yaml: line \d+, column \d+: not valid YAML"):
        load_config(str(path))


def test_the_shipped_demo_config_is_valid():
    cfg = load_config(str(Path(__file__).parents[1] / "lumos.yaml"))
    assert cfg.sources[0].name == "demo-lake"
    assert cfg.declaration("analytics/daily_revenue").upstream == ["clean/orders", "clean/events"]
