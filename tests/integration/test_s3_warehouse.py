"""Every CLI command on an ``s3://`` warehouse, against a real moto S3 server.

``lakehouse demo --warehouse s3://...`` (one day of flights) writes its sources, views,
scratch files and Delta copies to moto and checks every view against a full recompute
itself; then a Delta source changes, ``tick`` refreshes a view, ``status`` and ``explain``
report, and ``serve`` answers pyiceberg and DuckDB reads of the view, which equal a full
recompute of its SQL by DuckDB over the sources as they are on S3. Each command runs in
its own process, as a user runs it, with the endpoint and credentials in the standard AWS
environment variables only. A missing bucket, a wrong endpoint and missing credentials
each give one line naming the setting at fault.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import boto3
import duckdb
import httpx
import pyarrow as pa
import pytest
import yaml
from deltalake import DeltaTable
from pyiceberg.catalog.rest import RestCatalog

from lakehouse.config import load_config, parse_config
from lakehouse.demo import VIEWS
from lakehouse.duckdb_client import add_s3_secret, attach_catalog, connect
from lakehouse.errors import StorageError
from lakehouse.storage import delta_options, pyiceberg_properties, storage_s3
from lakehouse.storage_probe import prepare_warehouse
from tests.conftest import multiset
from tests.moto_process import moto_process

pytestmark = pytest.mark.spark

CLI = [sys.executable, "-c", "from lakehouse.cli import app; app()"]
BUCKET = "lake"
WAREHOUSE = f"s3://{BUCKET}/demo"
VIEW = "views.delays_by_carrier"
TIMEOUT_S = 600
AWS_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def aws_env() -> Iterator[dict[str, str]]:
    """A moto server with the bucket; the standard AWS variables that reach it, also set here."""
    with moto_process() as endpoint, pytest.MonkeyPatch.context() as patch:
        env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
               "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": endpoint}
        for name in AWS_VARIABLES:
            patch.delenv(name, raising=False)
        for name, value in env.items():
            patch.setenv(name, value)
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=BUCKET)
        yield env


def _lakehouse(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "LAKEHOUSE_DEBUG"}
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=env,
                          timeout=TIMEOUT_S, check=False)


def _succeeded(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stdout + done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def demo(aws_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``lakehouse demo --warehouse s3://lake/demo --days 1``; its config, on a free port."""
    folder = tmp_path_factory.mktemp("s3demo")
    done = _lakehouse("demo", "--dir", str(folder), "--days", "1", "--warehouse", WAREHOUSE)
    output = _succeeded(done)
    assert output.count("yes, yes, yes") == len(VIEWS), output
    config = folder / "lakehouse.yaml"
    document = yaml.safe_load(config.read_text())
    document["catalog"]["listen"] = f"127.0.0.1:{_free_port()}"  # none of another process
    config.write_text(yaml.safe_dump(document, sort_keys=False))
    return config


def test_demo_keeps_everything_on_s3(demo: Path, aws_env: dict[str, str]) -> None:
    config = load_config(demo)
    assert config.sources["airlines"].delta == f"{WAREHOUSE}/sources/airlines"  # type: ignore[union-attr]
    keys = {o["Key"] for page in boto3.client("s3").get_paginator("list_objects_v2").paginate(
        Bucket=BUCKET, Prefix="demo/") for o in page.get("Contents", [])}
    for prefix in ("demo/raw/flights/metadata/", "demo/views/delays_by_carrier/data/",
                   "demo/delta/views/delays_by_carrier/_delta_log/",
                   "demo/sources/airlines/_delta_log/"):
        assert any(k.startswith(prefix) for k in keys), prefix
    assert not any(k.startswith("demo/_scratch/") and k.endswith(".parquet") for k in keys)
    assert not (demo.parent / "warehouse").exists()  # nothing in a local folder
    assert (demo.parent / "catalog.db").exists()  # the catalog's SQLite beside the config


def test_refresh_status_history_and_explain_after_a_change(demo: Path) -> None:
    config = load_config(demo)
    uri = config.sources["airlines"].delta  # type: ignore[union-attr]
    DeltaTable(uri, storage_options=delta_options(config, uri)).update(
        {"name": "'Delta Air Lines Inc. (renamed)'"}, predicate="carrier = 'DL'")

    ticked = _succeeded(_lakehouse("refresh", VIEW, "-c", str(demo)))
    assert f"{VIEW}: incremental" in ticked, ticked
    recorded = json.loads(_succeeded(_lakehouse("history", VIEW, "-c", str(demo), "--json")))
    assert recorded[0]["mode"] == "incremental", recorded  # the history table is on S3 too

    status = _succeeded(_lakehouse("status", "-c", str(demo)))
    rows = [line for line in status.splitlines() if VIEW in line]
    assert rows and "fresh" in rows[0] and "ok" in rows[0], status

    explained = _succeeded(_lakehouse("explain", VIEW, "-c", str(demo)))
    assert f"view {VIEW}: incremental" in explained, explained


@pytest.fixture
def served(demo: Path) -> Iterator[str]:
    """``lakehouse serve`` of the demo's config on a free port; yields its base URI."""
    port = _free_port()
    process = subprocess.Popen([*CLI, "serve", "-c", str(demo), "--port", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    uri = f"http://127.0.0.1:{port}/iceberg"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and process.poll() is None:
            try:
                if httpx.get(f"{uri}/v1/config", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        assert process.poll() is None, "lakehouse serve stopped"
        yield uri
    finally:
        process.terminate()
        process.wait(10)


def _recompute(config_path: Path, catalog: RestCatalog) -> pa.Table:
    """The view's SQL computed in full by DuckDB over its sources as they are on S3."""
    config = load_config(config_path)
    uri = config.sources["airlines"].delta  # type: ignore[union-attr]
    sources = duckdb.connect()
    sources.register("flights", catalog.load_table("raw.flights").scan().to_arrow())
    sources.register("airlines", DeltaTable(uri, storage_options=delta_options(config, uri))
                     .to_pyarrow_table())
    return sources.sql(config.view(VIEW).sql).to_arrow_table()


def test_serve_answers_reads_equal_to_a_full_recompute(demo: Path, served: str) -> None:
    s3 = storage_s3(load_config(demo))
    assert s3 is not None
    catalog = RestCatalog("reader", uri=served, **pyiceberg_properties(s3))
    recomputed = _recompute(demo, catalog)
    expected = multiset(tuple(r.values()) for r in recomputed.to_pylist())
    assert sum(expected.values()) > 0
    via_pyiceberg = catalog.load_table(VIEW).scan().to_arrow().select(recomputed.column_names)
    assert multiset(tuple(r.values()) for r in via_pyiceberg.to_pylist()) == expected

    duck = connect()
    add_s3_secret(duck, s3)
    attach_catalog(duck, served)
    columns = ", ".join(f'"{c}"' for c in recomputed.column_names)
    assert multiset(duck.sql(f"SELECT {columns} FROM lake.{VIEW}").fetchall()) == expected
    delta = f"{WAREHOUSE}/delta/views/delays_by_carrier"
    assert multiset(duck.sql(f"SELECT {columns} FROM delta_scan('{delta}')").fetchall()) == expected


def _s3_config(tmp_path: Path, warehouse: str, endpoint: str | None = None) -> Path:
    document: dict[str, object] = {"warehouse": warehouse,
                                   "catalog": {"listen": f"127.0.0.1:{_free_port()}"}}
    if endpoint is not None:
        document["catalog"] = {**document["catalog"], "s3": {"endpoint": endpoint}}  # type: ignore[dict-item]
    path = tmp_path / "lakehouse.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def test_a_missing_bucket_is_one_line(aws_env: dict[str, str], tmp_path: Path) -> None:
    done = _lakehouse("status", "-c", str(_s3_config(tmp_path, "s3://nobucket/wh")))
    assert done.returncode == 1
    assert done.stdout.strip() == (f"error: warehouse s3://nobucket/wh: no bucket 'nobucket' at "
                                   f"{aws_env['AWS_ENDPOINT_URL']}"), done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def test_a_wrong_endpoint_names_its_key(aws_env: dict[str, str]) -> None:
    closed = f"http://127.0.0.1:{_free_port()}"
    config = parse_config({"warehouse": WAREHOUSE, "catalog": {"s3": {"endpoint": closed}}})
    with pytest.raises(StorageError, match=f"^catalog.s3.endpoint {closed}: cannot connect$"):
        prepare_warehouse(config)


def test_missing_credentials_are_named(aws_env: dict[str, str],
                                       monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(StorageError, match="^warehouse s3://lake/demo: no AWS credentials found; "
                                           "set AWS_ACCESS_KEY_ID"):
        prepare_warehouse(parse_config({"warehouse": WAREHOUSE}))
