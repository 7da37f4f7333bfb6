"""Where an ``s3://`` warehouse lives, as each library of the pipeline is told (no server)."""

from pathlib import Path

import pytest

from lakehouse.catalog_client import catalog_settings, storage_properties
from lakehouse.config import load_config, parse_config
from lakehouse.spark.session import s3_session_conf
from lakehouse.storage import delta_options, storage_s3, warehouse_folder

AWS = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION")


@pytest.fixture(autouse=True)
def no_ambient_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in AWS:
        monkeypatch.delenv(name, raising=False)


def test_a_local_config_uses_no_s3(tmp_path: Path) -> None:
    config = parse_config({"warehouse": str(tmp_path)})
    assert storage_s3(config) is None and storage_properties(config) == {}
    folder = warehouse_folder(config, "_scratch")
    assert folder.uri == folder.path == str(tmp_path.resolve() / "_scratch")


def test_the_environment_completes_an_unset_endpoint_and_region(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    s3 = storage_s3(parse_config({"warehouse": "s3://lake/wh"}))
    assert s3 is not None
    assert (s3.endpoint, s3.region, s3.path_style_access) == (
        "http://127.0.0.1:9000", "eu-west-1", True)  # path-style: an endpoint is set
    assert not s3.vend_credentials and not s3.remote_signing  # as without catalog.s3


def test_the_file_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://elsewhere:1")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    config = parse_config({"warehouse": "s3://lake/wh", "catalog": {"s3": {
        "endpoint": "https://s3.example.test", "region": "us-west-2",
        "path_style_access": False}}})
    s3 = storage_s3(config)
    assert s3 is not None and s3.vend_credentials  # catalog.s3's own defaults
    assert (s3.endpoint, s3.region, s3.path_style) == ("https://s3.example.test", "us-west-2",
                                                      False)
    assert catalog_settings(config).s3 == s3  # the catalog service is told the same
    assert storage_properties(config) == {
        "s3.region": "us-west-2", "s3.endpoint": "https://s3.example.test",
        "s3.force-virtual-addressing": "true", "header.X-Iceberg-Access-Delegation": ""}


def test_each_library_gets_the_endpoint_and_style_but_no_secret() -> None:
    config = parse_config({"warehouse": "s3://lake/wh", "catalog": {"s3": {
        "endpoint": "http://127.0.0.1:9000", "access_key_id": "AKIDSERVER",
        "secret_access_key": "SERVERSECRET"}}})
    s3 = storage_s3(config)
    assert s3 is not None
    options = delta_options(config, "s3://lake/wh/delta/v/t")
    assert options == {"AWS_REGION": "us-east-1", "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false",
                       "AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_ALLOW_HTTP": "true"}
    assert delta_options(config, "/tmp/local/delta") is None
    conf = s3_session_conf("lake", s3)
    assert conf["spark.hadoop.fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert conf["spark.sql.catalog.lake.s3.endpoint"] == "http://127.0.0.1:9000"
    assert conf["spark.sql.catalog.lake.s3.path-style-access"] == "true"
    every_value = " ".join([*conf.values(), *options.values(),
                            *storage_properties(config).values()])
    assert "AKIDSERVER" not in every_value and "SERVERSECRET" not in every_value
    folder = warehouse_folder(config, "_scratch", "run")
    assert (folder.path, folder.uri) == ("lake/wh/_scratch/run", "s3://lake/wh/_scratch/run")


def test_a_delta_source_on_s3_needs_the_storage_too(tmp_path: Path) -> None:
    config = parse_config({"warehouse": str(tmp_path),
                           "sources": {"a": {"delta": "s3://lake/sources/a"}}})
    assert storage_s3(config) is not None


def test_the_catalog_database_of_an_s3_warehouse_sits_beside_the_config(tmp_path: Path) -> None:
    path = tmp_path / "lakehouse.yaml"
    path.write_text("warehouse: s3://lake/wh\n")
    assert load_config(path).database_url == f"sqlite:///{tmp_path / 'catalog.db'}"
    path.write_text("warehouse: s3://lake/wh\ncatalog: {database_url: 'sqlite:////x/c.db'}\n")
    assert load_config(path).database_url == "sqlite:////x/c.db"
