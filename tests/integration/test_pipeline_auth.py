"""The pipeline as a principal of a secure catalog, and the service's secure defaults.

The pipeline authenticates with its own client (``catalog.credential``) through pyiceberg,
Spark's REST client, its generic-table calls and DuckDB; without a credential, or with a
wrong one, it stops with one line naming ``catalog.credential``. An open catalog listens on
loopback only, and says so at start-up.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pyarrow as pa
import pytest
import yaml
from pyiceberg.catalog.rest import RestCatalog
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from catalog_api import CatalogSettings, serve_in_thread
from catalog_api.errors import ListenError as CatalogListenError
from catalog_api.security import AuthSettings, ClientSettings, GrantSettings
from lakehouse.cli import app
from lakehouse.config import parse_config
from lakehouse.duckdb_client import attach_catalog, connect
from lakehouse.errors import CatalogAccessError, ConfigError
from lakehouse.runtime import Runtime
from tests.conftest import multiset
from tests.conftest_catalog import SecureCatalogHandle, secure_settings

SQL = "SELECT carrier, COUNT(*) AS n, SUM(dep_delay) AS total_delay FROM flights GROUP BY carrier"


@pytest.fixture
def secure_source(secure_catalog_server: SecureCatalogHandle) -> str:
    """A namespace with an Iceberg ``flights`` table, created by the admin client."""
    handle = secure_catalog_server
    admin = RestCatalog("admin", uri=handle.uri, credential=handle.credential("admin"))
    namespace = f"pipe_{uuid.uuid4().hex[:8]}"
    admin.create_namespace(namespace)
    flights = pa.table({"carrier": ["AA", "AA", "UA"], "flight": pa.array([1, 2, 3], pa.int32()),
                        "dep_delay": [5.0, 30.0, None]})
    admin.create_table(f"{namespace}.flights", flights.schema).append(flights)
    return namespace


@pytest.fixture
def restore_default_catalog(spark: SparkSession) -> Iterator[None]:
    """Give the shared session its default catalog back after a runtime named another."""
    default = spark.conf.get("spark.sql.defaultCatalog")
    yield
    spark.conf.set("spark.sql.defaultCatalog", default)


def _config(handle: SecureCatalogHandle, namespace: str, credential: dict[str, str] | None,
            ) -> dict[str, object]:
    catalog: dict[str, object] = {"embedded": False, "uri": handle.uri}
    if credential is not None:
        catalog["credential"] = credential
    return {
        "warehouse": str(handle.warehouse),
        "catalog": catalog,
        # A catalog name of its own: the shared test session keeps ``lakehouse`` for the
        # open catalog (Spark instantiates a catalog once per name).
        "spark": {"catalog_name": "secure"},
        "sources": {"flights": {"iceberg": f"{namespace}.flights"}},
        "views": [{"name": f"{namespace}.by_carrier", "sql": SQL}],
    }


@pytest.mark.spark
@pytest.mark.usefixtures("spark", "restore_default_catalog")
def test_the_pipeline_refreshes_through_a_secure_catalog_as_its_own_principal(
    secure_catalog_server: SecureCatalogHandle, secure_source: str, tmp_path: Path,
) -> None:
    handle = secure_catalog_server
    secret_file = tmp_path / "pipeline-secret"
    secret_file.write_text(handle.secrets["writer"])
    credential = {"client_id": "writer", "secret_file": str(secret_file)}
    runtime = Runtime(parse_config(_config(handle, secure_source, credential)))
    view = runtime.config.views[0]
    result = runtime.refresh(view)
    assert sorted(result.sinks) == ["delta", "iceberg"]
    expected = multiset(tuple(r.values()) for r in runtime.recompute(view).to_pylist())

    reader = RestCatalog("reader", uri=handle.uri, credential=handle.credential("reader"))
    table = reader.load_table(view.name)
    assert multiset(tuple(r.values()) for r in table.scan().to_arrow().to_pylist()) == expected
    listed = httpx.get(f"{handle.uri}/polaris/v1/namespaces/{secure_source}/generic-tables",
                       headers=handle.headers("reader")).json()["identifiers"]
    assert {"namespace": [secure_source], "name": "by_carrier_delta"} in listed
    duck = connect()
    attach_catalog(duck, handle.uri, "lake", credential=handle.credential("reader"))
    assert multiset(duck.sql(f"SELECT * FROM lake.{view.name}").fetchall()) == expected


def test_the_pipeline_without_credential_or_with_a_wrong_one_stops_in_one_line(
    secure_catalog_server: SecureCatalogHandle, secure_source: str, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    handle = secure_catalog_server
    guess = f"guess-{uuid.uuid4().hex}"
    monkeypatch.setenv("LAKEHOUSE_TEST_PIPELINE_SECRET", guess)
    wrong = {"client_id": "writer", "secret_env": "LAKEHOUSE_TEST_PIPELINE_SECRET"}
    for credential, who in ((None, "anonymous access"), (wrong, "client 'writer'")):
        path = tmp_path / "lakehouse.yaml"
        path.write_text(yaml.safe_dump(_config(handle, secure_source, credential)))
        result = CliRunner().invoke(app, ["status", "-c", str(path)])
        assert result.exit_code != 0
        assert "catalog.credential" in result.output and who in result.output, result.output
        assert "Traceback" not in result.output and guess not in result.output
    monkeypatch.delenv("LAKEHOUSE_TEST_PIPELINE_SECRET")
    with pytest.raises(ConfigError, match="catalog.credential.secret_env"):
        Runtime(parse_config(_config(handle, secure_source, wrong)))
    with pytest.raises(CatalogAccessError):
        Runtime(parse_config(_config(handle, secure_source, None)))


def test_auth_without_a_pipeline_credential_is_a_config_error() -> None:
    auth = {"enabled": True, "clients": {"pipeline": {"secret_env": "X"}}}
    with pytest.raises(ConfigError, match="catalog: .*set catalog.credential"):
        parse_config({"catalog": {"auth": auth}})
    other = {"client_id": "someone", "secret_env": "X"}
    with pytest.raises(ConfigError, match="not among catalog.auth.clients"):
        parse_config({"catalog": {"auth": auth, "credential": other}})


# ------------------------------------------------------------------------------ defaults


def test_an_open_catalog_listens_on_loopback_only_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = CatalogSettings(warehouse=str(tmp_path), database_url="sqlite://")
    with pytest.raises(CatalogListenError, match="authentication is off"):
        serve_in_thread(settings, host="0.0.0.0", port=0)
    with caplog.at_level(logging.WARNING, logger="catalog_api"):
        running = serve_in_thread(settings, host="127.0.0.1", port=0)
    running.stop()
    lines = [r.getMessage() for r in caplog.records if "authentication is off" in r.getMessage()]
    assert len(lines) == 1 and "127.0.0.1" in lines[0]


def test_a_secure_catalog_listens_on_any_address(tmp_path: Path) -> None:
    settings, secrets = secure_settings(tmp_path, {"admin": ("admin", None)})
    running = serve_in_thread(settings, host="0.0.0.0", port=0)
    try:
        uri = f"http://127.0.0.1:{running.port}/iceberg"
        assert httpx.get(f"{uri}/v1/namespaces").status_code == 401
        RestCatalog("admin", uri=uri, credential=f"admin:{secrets['admin']}").list_namespaces()
    finally:
        running.stop()


def test_serve_refuses_a_public_address_without_auth(tmp_path: Path) -> None:
    path = tmp_path / "lakehouse.yaml"
    path.write_text(yaml.safe_dump({"warehouse": str(tmp_path / "wh"),
                                    "catalog": {"listen": "0.0.0.0:18181"}}))
    result = CliRunner().invoke(app, ["serve", "-c", str(path)])
    assert result.exit_code != 0
    assert "authentication is off" in result.output and "Traceback" not in result.output


def test_hash_secret_prints_an_argon2_hash_the_catalog_accepts(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["hash-secret"], input="tr0ub4dor\n")
    assert result.exit_code == 0, result.output
    hashed = result.output.strip()
    assert hashed.startswith("$argon2id$") and "tr0ub4dor" not in hashed
    auth = AuthSettings(enabled=True, clients={"bi": ClientSettings(secret_hash=hashed)},
                        grants={"bi": [GrantSettings(role="reader")]})  # type: ignore[list-item]
    running = serve_in_thread(CatalogSettings(
        warehouse=str(tmp_path), database_url=f"sqlite:///{tmp_path / 'c.db'}", auth=auth))
    try:
        RestCatalog("bi", uri=running.uri, credential="bi:tr0ub4dor").list_namespaces()
    finally:
        running.stop()
    empty = CliRunner().invoke(app, ["hash-secret"], input="\n")
    assert empty.exit_code == 1 and "empty secret" in empty.output
