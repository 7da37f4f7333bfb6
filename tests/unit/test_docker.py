"""docker/: what CI can check without a Docker engine.

``docker-compose config`` (Debian's ``docker-compose``, installed by
``scripts/install-system-deps.sh``) validates ``docker/compose.yaml`` with the values of
``docker/.env.example``. The rest is checked against the repository and the installed
packages: every file the Dockerfile copies and every config file the services mount exists,
every command they run exists (``lakehouse`` subcommands and their options through the Typer
app, ``spark-class`` and the Spark classes under the installed pyspark), ``docker/lakehouse.yaml``
is a valid config, and Prometheus scrapes a port the pipeline exposes and serves metrics on.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pyspark
import pytest
import typer
import yaml

from lakehouse.cli import app
from lakehouse.config import Config, load_config
from lakehouse.spark.session import s3_session_conf
from lakehouse.storage import storage_s3

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
COMPOSE = DOCKER / "compose.yaml"
ENV_EXAMPLE = DOCKER / ".env.example"
DOCKERFILE = DOCKER / "Dockerfile"
PROJECT_IMAGE_SERVICES = {"spark-master", "spark-worker", "catalog", "pipeline"}
SERVICES = PROJECT_IMAGE_SERVICES | {"minio", "create-bucket", "postgres", "trino", "prometheus"}
LONG_RUNNING = SERVICES - {"create-bucket"}
SECRETS = ("POSTGRES_PASSWORD", "MINIO_ROOT_USER", "MINIO_ROOT_PASSWORD", "LAKEHOUSE_TOKEN_KEY",
           "LAKEHOUSE_PIPELINE_SECRET", "LAKEHOUSE_TRINO_SECRET")
CONFIG_IN_CONTAINER = "/etc/lakehouse/lakehouse.yaml"
LOOPBACK = {"localhost", "127.0.0.1", "0.0.0.0"}


@pytest.fixture(scope="module")
def docker_compose() -> str:
    """The ``docker-compose`` command (``make env`` installs it: scripts/install-system-deps.sh)."""
    found = shutil.which("docker-compose")
    if found is None:
        pytest.skip("docker-compose is not installed: run `make env` (Debian package "
                    "docker-compose, installed by scripts/install-system-deps.sh)")
    return found


def _compose_config(command: str, env_file: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in SECRETS}
    return subprocess.run([command, "-f", str(COMPOSE), "--env-file", str(env_file), "config"],
                          capture_output=True, text=True, env=env, timeout=120, check=False)


@pytest.fixture(scope="module")
def compose(docker_compose: str) -> dict[str, Any]:
    """``docker/compose.yaml`` as ``docker-compose config`` resolves it with .env.example."""
    done = _compose_config(docker_compose, ENV_EXAMPLE)
    assert done.returncode == 0, done.stderr
    resolved: dict[str, Any] = yaml.safe_load(done.stdout)
    return resolved


@pytest.fixture(scope="module")
def cluster_config() -> Config:
    return load_config(DOCKER / "lakehouse.yaml")


def _check_lakehouse_args(args: list[str]) -> None:
    """Parse ``lakehouse ARGS`` as the CLI would, without running the command."""
    commands: dict[str, Any] = getattr(typer.main.get_command(app), "commands", {})
    assert args[0] in commands, f"`lakehouse {args[0]}` is not a command: {sorted(commands)}"
    with commands[args[0]].make_context(f"lakehouse {args[0]}", list(args[1:])):
        pass  # an unknown option or a missing argument raises click.UsageError


def _as_list(value: str | list[str] | None) -> list[str]:
    return value.split() if isinstance(value, str) else list(value or [])


def _bind_mounts(service: dict[str, Any]) -> dict[str, Path]:
    """Container path -> host path of the service's bind mounts (named volumes left out)."""
    mounts = {}
    for volume in service.get("volumes", []):
        source, target = (volume.split(":")[:2] if isinstance(volume, str)
                          else (volume["source"], volume["target"]))
        if source.startswith(("/", ".")):
            mounts[target] = Path(source)
    return mounts


def _dockerfile_instructions(name: str) -> list[str]:
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    return [line.split(None, 1)[1] for line in text.splitlines()
            if line.split(None, 1)[:1] == [name]]


def _exposed_ports(service: dict[str, Any]) -> set[int]:
    ports = {int(str(port).split("/")[0]) for port in service.get("expose", [])}
    for port in service.get("ports", []):
        target = port["target"] if isinstance(port, dict) else str(port).split(":")[-1]
        ports.add(int(str(target).split("/")[0]))
    return ports


def test_argument_check_refuses_unknown_commands_and_options() -> None:
    _check_lakehouse_args(["serve", "-c", CONFIG_IN_CONTAINER, "--host", "0.0.0.0"])
    with pytest.raises(AssertionError, match="not a command"):
        _check_lakehouse_args(["serv"])
    with pytest.raises(Exception, match="No such option"):
        _check_lakehouse_args(["run", "--metrics-port", "9464"])


def test_compose_config_is_valid_with_the_example_env(compose: dict[str, Any]) -> None:
    assert set(compose["services"]) == SERVICES


def test_compose_refuses_to_start_without_the_secrets(docker_compose: str,
                                                      tmp_path: Path) -> None:
    empty = tmp_path / "empty.env"
    empty.write_text("")
    done = _compose_config(docker_compose, empty)
    assert done.returncode != 0
    assert "docker/.env" in done.stderr


def test_env_example_defines_every_variable_compose_requires() -> None:
    required = set(re.findall(r"\$\{(\w+):\?", COMPOSE.read_text()))
    defined = {line.split("=", 1)[0] for line in ENV_EXAMPLE.read_text().splitlines()
               if line and not line.startswith("#")}
    assert required == set(SECRETS)
    assert required <= defined


def test_long_running_services_have_healthchecks(compose: dict[str, Any]) -> None:
    for name in LONG_RUNNING:
        assert compose["services"][name].get("healthcheck", {}).get("test"), name


def test_dependencies_wait_for_health_or_completion(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for name, service in services.items():
        for dependency, condition in service.get("depends_on", {}).items():
            assert dependency in services, (name, dependency)
            expected = ("service_completed_successfully" if dependency == "create-bucket"
                        else "service_healthy")
            if name == "prometheus":  # it scrapes the pipeline, up or not
                expected = "service_started"
            assert condition["condition"] == expected, (name, dependency)
    assert services["catalog"]["depends_on"].keys() >= {"postgres", "create-bucket"}
    assert services["pipeline"]["depends_on"].keys() >= {"catalog", "spark-master"}


def test_project_services_build_the_project_image(compose: dict[str, Any]) -> None:
    for name in PROJECT_IMAGE_SERVICES:
        build = compose["services"][name]["build"]
        context = Path(build["context"])
        assert context.resolve() == ROOT, name
        assert (context / build["dockerfile"]).resolve() == DOCKERFILE, name


def test_every_path_the_dockerfile_copies_exists() -> None:
    copies = _dockerfile_instructions("COPY")
    assert copies
    ignore = (DOCKER / "Dockerfile.dockerignore").read_text().splitlines()
    for instruction in copies:
        *sources, _target = [w for w in instruction.split() if not w.startswith("--")]
        for source in sources:
            assert (ROOT / source).exists(), f"COPY {source}: not in the repository"
            assert f"!{source}" in ignore, f"COPY {source}: excluded from the build context"


def test_the_dockerfile_runs_commands_that_exist() -> None:
    runs = " ".join(_dockerfile_instructions("RUN"))
    for match in re.finditer(r"\blakehouse\s+([\w-]+)", runs):
        _check_lakehouse_args([match.group(1)])
    assert "lakehouse jars" in runs  # the Spark jars are baked into the image
    entrypoint = yaml.safe_load(_dockerfile_instructions("ENTRYPOINT")[0])
    assert entrypoint == ["lakehouse"]
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'lakehouse = "lakehouse.cli:app"' in pyproject
    assert yaml.safe_load(_dockerfile_instructions("CMD")[0]) == ["--help"]


def test_lakehouse_services_run_existing_commands(compose: dict[str, Any]) -> None:
    for name in ("catalog", "pipeline"):
        service = compose["services"][name]
        assert "entrypoint" not in service, name  # the image's: lakehouse
        _check_lakehouse_args(_as_list(service["command"]))


def test_spark_services_run_spark_class_and_existing_classes(compose: dict[str, Any]) -> None:
    spark_home = Path(pyspark.__file__).parent
    assert os.access(spark_home / "bin" / "spark-class", os.X_OK)
    core = next((spark_home / "jars").glob("spark-core_*.jar"))
    classes = set(zipfile.ZipFile(core).namelist())
    for name, main in (("spark-master", "org.apache.spark.deploy.master.Master"),
                       ("spark-worker", "org.apache.spark.deploy.worker.Worker")):
        service = compose["services"][name]
        assert _as_list(service["entrypoint"]) == ["spark-class"], name
        command = _as_list(service["command"])
        assert command[0] == main, name
        assert f"{main.replace('.', '/')}.class" in classes, main
    worker = _as_list(compose["services"]["spark-worker"]["command"])
    assert "spark://spark-master:7077" in worker


def test_every_mounted_config_file_exists(compose: dict[str, Any]) -> None:
    mounted = 0
    for name, service in compose["services"].items():
        for target, source in _bind_mounts(service).items():
            assert source.is_file(), f"{name}: {source} (mounted at {target}) does not exist"
            assert source.resolve().is_relative_to(DOCKER), (name, source)
            mounted += 1
    assert mounted >= 4
    for name in ("catalog", "pipeline"):
        mounts = _bind_mounts(compose["services"][name])
        assert mounts[CONFIG_IN_CONTAINER].resolve() == DOCKER / "lakehouse.yaml", name
        assert CONFIG_IN_CONTAINER in _as_list(compose["services"][name]["command"]), name


def test_cluster_config_loads(cluster_config: Config) -> None:
    assert cluster_config.warehouse == "s3://lakehouse/warehouse"
    assert not cluster_config.catalog.embedded
    assert cluster_config.catalog_uri == "http://catalog:8181/iceberg"
    assert cluster_config.database_url.startswith("postgresql+psycopg://")
    assert "@postgres:5432/" in cluster_config.database_url
    assert ":" not in cluster_config.database_url.split("//", 1)[1].split("@", 1)[0]  # no pw
    assert cluster_config.spark.master == "spark://spark-master:7077"
    s3 = storage_s3(cluster_config)  # every S3 client of the pipeline and the catalog
    assert s3 is not None and s3.endpoint == "http://minio:9000" and s3.path_style
    conf = s3_session_conf(cluster_config.spark.catalog_name, s3)
    assert conf["spark.sql.catalog.lakehouse.s3.endpoint"] == "http://minio:9000"
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://minio:9000"


def test_catalog_service_listens_where_clients_look(compose: dict[str, Any],
                                                    cluster_config: Config) -> None:
    port = cluster_config.catalog.port
    assert f"http://catalog:{port}/iceberg" == cluster_config.catalog_uri
    assert port in _exposed_ports(compose["services"]["catalog"])
    trino = dict(line.split("=", 1) for line in
                 (DOCKER / "trino" / "catalog" / "lakehouse.properties").read_text().splitlines()
                 if line and not line.startswith("#"))
    assert trino["connector.name"] == "iceberg"
    assert trino["iceberg.catalog.type"] == "rest"
    assert trino["iceberg.rest-catalog.uri"] == cluster_config.catalog_uri
    assert trino["fs.native-s3.enabled"] == "true"
    assert trino["s3.endpoint"] == "http://minio:9000"
    assert trino["s3.aws-access-key"].startswith("${ENV:")  # never a literal secret
    assert trino["s3.aws-secret-key"].startswith("${ENV:")
    assert {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} <= set(
        compose["services"]["trino"]["environment"])


def test_prometheus_scrapes_the_pipelines_metrics_port(compose: dict[str, Any]) -> None:
    prometheus = yaml.safe_load((DOCKER / "prometheus" / "prometheus.yml").read_text())
    targets = [target for job in prometheus["scrape_configs"]
               for static in job["static_configs"] for target in static["targets"]]
    assert targets == ["pipeline:9464"]
    host, port = targets[0].split(":")
    pipeline = compose["services"][host]
    assert int(port) in _exposed_ports(pipeline)
    command = _as_list(pipeline["command"])
    listen = command[command.index("--metrics-listen") + 1]
    assert listen == f"0.0.0.0:{port}"


def test_docker_files_name_no_host_but_their_services() -> None:
    """Every URL in docker/ points at a compose service or loopback: no registry host."""
    services = set(yaml.safe_load(COMPOSE.read_text())["services"])
    for path in DOCKER.rglob("*"):
        if path.is_file():
            for host in re.findall(r"https?://([^/:\s\"]+)", path.read_text()):
                assert host in services | LOOPBACK, f"{path.relative_to(ROOT)} names {host}"
