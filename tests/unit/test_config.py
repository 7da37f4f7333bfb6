from pathlib import Path

import pytest
import yaml

from lakehouse.catalog_client import catalog_settings
from lakehouse.config import load_config, parse_config
from lakehouse.errors import ConfigError


@pytest.mark.parametrize(
    ("document", "key"),
    [
        ({"views": [{"name": "v.a", "sql": "select 1", "every": "sometimes"}]}, "views.0.every"),
        ({"sources": {"f": {"iceberg": "no_namespace"}}}, "sources.f.iceberg"),
        ({"catalog": {"listen": "8181"}}, "catalog.listen"),
        ({"spark": {"mastr": "local"}}, "spark.mastr"),
        ({"views": [{"name": "v.a", "sql": "s", "refresh": "sometimes"}]}, "views.0.refresh"),
        ({"views": [{"name": "v.a", "sql": "s", "engine": "duckdb"}]}, "views.0.engine"),
        ({"engine": "gpu"}, "engine"),
        ({"history_table": "no_namespace"}, "history_table"),
    ],
)
def test_invalid_config_names_the_key(document: dict, key: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(document)
    assert raised.value.key == key
    assert str(raised.value).startswith(key)


def test_cadences_and_defaults(tmp_path: Path) -> None:
    path = tmp_path / "lakehouse.yaml"
    path.write_text(
        "sources:\n  airlines: {delta: data/airlines}\n"
        "views:\n"
        "  - {name: v.a, sql: select 1, every: 30s}\n"
        "  - {name: v.b, sql: select 1, every: '*/5 * * * *'}\n"
        "  - {name: v.c, sql: select 1}\n"
    )
    config = load_config(path)
    assert [v.interval_s for v in config.views] == [30.0, None, None]
    assert config.views[2].every == "on_change"
    assert config.sources["airlines"].delta == str(tmp_path / "data" / "airlines")
    assert config.database_url == f"sqlite:///{tmp_path / 'warehouse' / 'catalog.db'}"
    assert config.catalog_uri == "http://127.0.0.1:8181/iceberg"


def test_a_view_takes_the_top_level_engine_unless_it_sets_its_own() -> None:
    config = parse_config({"engine": "spark", "views": [
        {"name": "v.a", "sql": "s"}, {"name": "v.b", "sql": "s", "engine": "local"}]})
    assert [config.view_engine(v) for v in config.views] == ["spark", "local"]
    assert parse_config({"views": [{"name": "v.a", "sql": "s"}]}).view_engine(
        config.views[0]) == "auto"


def test_duplicate_views_rejected() -> None:
    view = {"name": "v.a", "sql": "select 1"}
    with pytest.raises(ConfigError, match="unique"):
        parse_config({"views": [view, view]})


def test_the_history_table_is_not_a_view_and_may_be_turned_off() -> None:
    with pytest.raises(ConfigError, match="history_table 'v.a' is also a view's name"):
        parse_config({"history_table": "v.a", "views": [{"name": "v.a", "sql": "select 1"}]})
    assert parse_config({}).history_table == "pipeline.refresh_history"
    assert parse_config({"history_table": None}).history_table is None


@pytest.mark.parametrize(("source", "key"), [
    ({"iceberg": "v.a"}, "sources.own.iceberg"),
    ({"delta": "wh/delta/v/a/"}, "sources.own.delta"),
    ({"delta": "file://{tmp}/wh/delta/v/a"}, "sources.own.delta"),
    ({"delta": "file:{tmp}/wh/delta/v/./a"}, "sources.own.delta"),
    ({"delta": "FILE://localhost{tmp}/wh/delta/v/a/"}, "sources.own.delta"),
])
def test_a_view_table_read_as_a_plain_table_is_refused(tmp_path: Path, source: dict,
                                                       key: str) -> None:
    """It would not be refreshed first, and maintenance would not keep its readers' snapshots."""
    path = tmp_path / "lakehouse.yaml"
    source = {kind: where.format(tmp=tmp_path) for kind, where in source.items()}
    path.write_text(yaml.safe_dump({"warehouse": "wh", "sources": {"own": source}, "views": [
        {"name": "v.a", "sql": "select 1"}]}))
    with pytest.raises(ConfigError, match="declare the source as `view: v.a`") as error:
        load_config(path)
    assert error.value.key == key
    other = {"iceberg": "v.b"} if "iceberg" in source else {"delta": "wh/delta/v/b"}
    path.write_text(yaml.safe_dump({"warehouse": "wh", "sources": {"own": other}, "views": [
        {"name": "v.a", "sql": "select 1"}]}))
    assert load_config(path).sources["own"] == parse_config({"sources": {"own": other}},
                                                            base_dir=tmp_path).sources["own"]


def test_a_view_table_on_s3_is_refused_in_any_spelling() -> None:
    """Hadoop's ``s3a://`` names the same object as ``s3://``; a final slash changes nothing."""
    views = [{"name": "v.a", "sql": "select 1"}]
    for spelling in ("s3a://bucket/wh/delta/v/a/", "S3://bucket/wh/delta/v/a"):
        with pytest.raises(ConfigError, match="view: v.a") as error:
            parse_config({"warehouse": "s3://bucket/wh", "views": views,
                          "sources": {"own": {"delta": spelling}}})
        assert error.value.key == "sources.own.delta"
    parse_config({"warehouse": "s3://bucket/wh", "views": views,
                  "sources": {"own": {"delta": "s3a://other/wh/delta/v/a"}}})


def test_missing_file_and_bad_yaml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "absent.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("views: [\n")
    with pytest.raises(ConfigError, match="YAML"):
        load_config(bad)


def test_source_keys_survive_path_resolution(tmp_path: Path) -> None:
    path = tmp_path / "lakehouse.yaml"
    path.write_text("sources:\n  a: {delta: data/a, key: [carrier]}\n"
                    "  f: {iceberg: raw.flights, key: [id, leg]}\n")
    config = load_config(path)
    assert config.sources["a"].key == ["carrier"]  # type: ignore[union-attr]
    assert config.sources["a"].delta == str(tmp_path / "data" / "a")  # type: ignore[union-attr]
    assert config.sources["f"].key == ["id", "leg"]  # type: ignore[union-attr]


@pytest.mark.parametrize("source", [{"delta": "d", "key": []}, {"view": "v.a", "key": ["k"]}])
def test_a_source_key_is_a_non_empty_list_of_a_table_source(source: dict) -> None:
    with pytest.raises(ConfigError, match="sources.f"):
        parse_config({"sources": {"f": source}})


@pytest.mark.parametrize(("source", "where"), [
    ({"delta": "d", "key": []}, "sources.f.key"),
    ({"view": "v.a", "ref": "main"}, "sources.f.ref"),
    ({"iceberg": "flights"}, "sources.f.iceberg"),
    ({"table": "raw.flights"}, "sources.f"),
])
def test_a_bad_source_is_reported_under_its_own_kind(source: dict, where: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config({"sources": {"f": source}})
    assert raised.value.key == where
    if where == "sources.f":
        assert "one of the keys iceberg, delta or view" in str(raised.value)


def test_catalog_auth_and_storage_reach_the_served_catalog(tmp_path: Path) -> None:
    config = parse_config({
        "warehouse": "s3://lake/wh",
        "catalog": {
            "database_url": "sqlite:///c.db",
            "auth": {"enabled": True, "clients": {"pipeline": {"secret_env": "S"}},
                     "grants": {"pipeline": [{"role": "admin"}],
                                "bi": [{"role": "reader", "namespace": "views"}]}},
            "credential": {"client_id": "pipeline", "secret_env": "S"},
            "s3": {"endpoint": "http://127.0.0.1:9000", "role_arn": "arn:aws:iam::1:role/r",
                   "remote_signing": False},
        },
    })
    settings = catalog_settings(config)
    assert settings.auth.enabled and settings.auth.grants_of("bi")[0].namespace == ("views",)
    assert settings.s3 is not None and settings.s3.role_arn == "arn:aws:iam::1:role/r"
    assert not settings.s3.remote_signing and settings.s3.vend_credentials
    with pytest.raises(ConfigError, match="catalog.s3.credentials_lifetime_s"):
        parse_config({"catalog": {"s3": {"credentials_lifetime_s": 60}}})


def test_config_errors_never_echo_a_section_or_a_secret() -> None:
    auth = {"enabled": True, "clients": {"p": {"secret_env": "X"}}}
    s3 = {"secret_access_key": "SUPERSECRETKEY123"}
    with pytest.raises(ConfigError) as raised:
        parse_config({"catalog": {"auth": auth, "s3": s3}})  # a model-level error
    assert "SUPERSECRETKEY123" not in str(raised.value)
    with pytest.raises(ConfigError) as raised:
        parse_config({"catalog": {"s3": {"secret_access_key": ["SUPERSECRETKEY123"]}}})
    assert raised.value.key == "catalog.s3.secret_access_key"
    assert "SUPERSECRETKEY123" not in str(raised.value)


@pytest.mark.parametrize("warehouse", ["file:/srv/wh", "file:///srv/wh", "FILE://localhost/srv/wh",
                                       "/srv/wh"])
def test_a_local_warehouse_in_any_spelling_is_one_folder(warehouse: str) -> None:
    config = parse_config({"warehouse": warehouse, "views": []})
    assert config.warehouse_is_local
    assert config.warehouse_path == Path("/srv/wh").resolve()
    assert config.warehouse_uri == Path("/srv/wh").resolve().as_uri()


def test_history_retention_is_a_positive_duration_or_null() -> None:
    assert parse_config({}).history_retain_for_s == 7 * 86400.0
    assert parse_config({"history_retain_for": "12h"}).history_retain_for_s == 43200.0
    for keep_all in (None, "off", False):
        assert parse_config({"history_retain_for": keep_all}).history_retain_for_s is None
    for wrong in ("0s", "soon", 7):
        with pytest.raises(ConfigError) as raised:
            parse_config({"history_retain_for": wrong})
        assert raised.value.key == "history_retain_for"
