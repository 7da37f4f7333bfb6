"""The Spark jars from the checked-in Maven manifest: coordinates, the cache, failures."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lakehouse.errors import SparkClasspathError
from lakehouse.spark.jars import MANIFEST, maven_coordinates, spark_jars

ROOT = Path(__file__).resolve().parents[2]
REQUIRED = {
    "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12",
    "org.apache.iceberg:iceberg-aws-bundle",
    "io.delta:delta-spark_2.12",
    "io.delta:delta-storage",
    "org.apache.hadoop:hadoop-aws",
    "com.amazonaws:aws-java-sdk-bundle",
}


def _pom(tmp_path: Path, body: str) -> Path:
    pom = tmp_path / "pom.xml"
    pom.write_text(f'<project xmlns="http://maven.apache.org/POM/4.0.0">{body}</project>')
    return pom


def test_manifest_pins_every_required_artifact() -> None:
    coordinates = maven_coordinates()
    assert {c.rsplit(":", 1)[0] for c in coordinates} == REQUIRED
    versions = {c.rsplit(":", 1)[0]: c.rsplit(":", 1)[1] for c in coordinates}
    assert re.fullmatch(r"1\.(10\.\d+|11\.0)", versions["org.apache.iceberg:iceberg-aws-bundle"])
    assert versions["org.apache.hadoop:hadoop-aws"] == "3.3.4"  # pyspark 3.5.9's Hadoop
    assert versions["io.delta:delta-spark_2.12"].startswith("3.3.")


def test_manifest_names_no_repository() -> None:
    text = MANIFEST.read_text()
    assert "<repositor" not in text and "http://repo" not in text and "https://" not in text


@pytest.mark.parametrize("doc", ["docs/config.md", "docs/clients.md"])
def test_docs_give_users_the_manifest_coordinates(doc: str) -> None:
    assert ",".join(maven_coordinates()) in (ROOT / doc).read_text()


def test_properties_are_substituted_and_undefined_ones_refused(tmp_path: Path) -> None:
    pom = _pom(tmp_path, "<properties><v>1.2</v></properties><dependencies><dependency>"
               "<groupId>g</groupId><artifactId>a-${v}</artifactId><version>${v}</version>"
               "</dependency></dependencies>")
    assert maven_coordinates(pom) == ["g:a-1.2:1.2"]
    bad = _pom(tmp_path, "<dependencies><dependency><groupId>g</groupId><artifactId>a"
               "</artifactId><version>${nope}</version></dependency></dependencies>")
    with pytest.raises(SparkClasspathError, match=r"\$\{nope\}"):
        maven_coordinates(bad)


def test_a_completed_cache_folder_is_used_without_maven(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pom = _pom(tmp_path, "<dependencies/>")
    first = _pom_cache_folder(tmp_path, pom)
    (first / "b.jar").write_bytes(b"")
    (first / "a.jar").write_bytes(b"")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no mvn to call
    assert [p.name for p in spark_jars(tmp_path / "cache", pom)] == ["a.jar", "b.jar"]


def test_an_interrupted_resolution_is_redone_and_missing_maven_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pom = _pom(tmp_path, "<dependencies><dependency><groupId>g</groupId><artifactId>a"
               "</artifactId><version>1</version></dependency></dependencies>")
    folder = _pom_cache_folder(tmp_path, pom)
    (folder / ".complete").unlink()  # what a killed run leaves: no completion marker
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(SparkClasspathError, match=r"Maven \(`mvn`\).*g:a:1"):
        spark_jars(tmp_path / "cache", pom)


def test_a_failed_maven_run_names_the_error_and_leaves_no_folder(tmp_path: Path) -> None:
    pom = _pom(tmp_path, "<modelVersion>4.0.0</modelVersion><groupId>t</groupId>"
               "<artifactId>t</artifactId><version>1</version><packaging>pom</packaging>"
               "<dependencies><dependency><groupId>invalid..group</groupId>"
               "<artifactId>x</artifactId><version>1</version></dependency></dependencies>")
    with pytest.raises(SparkClasspathError, match="ERROR"):
        spark_jars(tmp_path / "cache", pom)
    assert list((tmp_path / "cache").iterdir()) == []


def _pom_cache_folder(tmp_path: Path, pom: Path) -> Path:
    """The folder spark_jars uses for ``pom``, created complete (as a finished run leaves it)."""
    import hashlib

    folder = tmp_path / "cache" / f"spark-{hashlib.sha256(pom.read_bytes()).hexdigest()[:16]}"
    folder.mkdir(parents=True)
    (folder / ".complete").write_text("")
    return folder
