"""The jars Spark needs, resolved with Maven from the checked-in manifest ``pom.xml``.

The manifest pins Iceberg's Spark runtime and AWS bundle, delta-spark and delta-storage, and
hadoop-aws with its AWS SDK bundle (S3A). :func:`spark_jars` runs
``mvn dependency:copy-dependencies`` once into a cache folder named by a hash of the manifest,
so a second run (or a changed manifest) needs no network (or resolves anew). Maven uses the
machine's own settings: no repository is named here.

Users who run their own Spark pass :func:`maven_coordinates` to ``spark.jars.packages``
instead (``spark.jars_packages`` in ``lakehouse.yaml``).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from xml.etree import ElementTree

from lakehouse.errors import SparkClasspathError

__all__ = ["MANIFEST", "default_cache_dir", "maven_coordinates", "resolve_manifest", "spark_jars"]

MANIFEST = Path(__file__).with_name("pom.xml")
_POM = "{http://maven.apache.org/POM/4.0.0}"
_COMPLETE = ".complete"  # written last: a folder without it is an interrupted resolution
_MVN_TIMEOUT_S = 1800


def default_cache_dir() -> Path:
    """Return the per-user jar cache: ``$LAKEHOUSE_CACHE_DIR/jars``, else the XDG cache folder.

    Returns:
        ``$LAKEHOUSE_CACHE_DIR/jars`` when that variable is set, else
        ``${XDG_CACHE_HOME:-~/.cache}/lakehouse-freshness/jars``.
    """
    root = os.environ.get("LAKEHOUSE_CACHE_DIR")
    if root:
        return Path(root).expanduser() / "jars"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "lakehouse-freshness" / "jars"


def maven_coordinates(manifest: Path = MANIFEST) -> list[str]:
    """Return the manifest's dependencies as ``group:artifact:version`` strings.

    Args:
        manifest: A ``pom.xml`` whose versions are literal or ``${property}`` references.

    Returns:
        The coordinates in manifest order, ready to join with commas for
        ``spark.jars.packages``.

    Raises:
        SparkClasspathError: The manifest cannot be read or names an undefined property.
    """
    try:
        root = ElementTree.parse(manifest).getroot()
    except (OSError, ElementTree.ParseError) as error:
        raise SparkClasspathError(f"cannot read the Maven manifest {manifest}: {error}") from error
    properties = {prop.tag.removeprefix(_POM): prop.text or ""
                  for prop in root.iterfind(f"{_POM}properties/*")}

    def text(node: ElementTree.Element, tag: str) -> str:
        value = node.findtext(f"{_POM}{tag}", "")
        for name in re.findall(r"\$\{([^}]+)\}", value):
            if name not in properties:
                raise SparkClasspathError(f"{manifest}: property ${{{name}}} is not defined")
            value = value.replace(f"${{{name}}}", properties[name])
        return value

    return [f"{text(d, 'groupId')}:{text(d, 'artifactId')}:{text(d, 'version')}"
            for d in root.iterfind(f"{_POM}dependencies/{_POM}dependency")]


def spark_jars(cache_dir: Path | None = None, manifest: Path = MANIFEST) -> list[Path]:
    """Return the manifest's jars, resolving them with Maven on first use.

    The jars land in ``<cache_dir>/spark-<hash of the manifest>/``. They are copied into a
    temporary folder that is renamed into place when complete, so an interrupted run leaves
    nothing half resolved and concurrent runs do not collide.

    Args:
        cache_dir: The jar cache; default :func:`default_cache_dir`.
        manifest: The Maven manifest; default the one shipped with this package.

    Returns:
        The jar paths, sorted by name, for ``spark.jars``.

    Raises:
        SparkClasspathError: ``mvn`` is missing or failed, or the cache is not writable.
    """
    folder = (cache_dir or default_cache_dir()) / f"spark-{_digest(manifest)}"
    return sorted(resolve_manifest(manifest, folder).glob("*.jar"))


def resolve_manifest(manifest: Path, folder: Path,
                     finish: Callable[[Path], None] | None = None) -> Path:
    """Copy a Maven manifest's dependencies into ``folder`` once, atomically.

    A folder with its completion marker is returned as is (no Maven call). Otherwise the
    artifacts are copied into a temporary folder beside it, ``finish`` may rework them
    there (unpack an archive), and the folder is renamed into place, readable by everyone
    (an image resolves as root and runs as another user). An interrupted run leaves nothing
    half resolved; concurrent runs do not collide.

    Args:
        manifest: The ``pom.xml``.
        folder: Where the artifacts land.
        finish: Called with the temporary folder after the copy.

    Returns:
        ``folder``.

    Raises:
        SparkClasspathError: ``mvn`` is missing or failed, or the cache is not writable.
    """
    try:
        if not (folder / _COMPLETE).is_file():
            _resolve(manifest, folder, finish)
    except OSError as error:
        raise SparkClasspathError(
            f"cannot write the Maven cache {folder}: {error}; set LAKEHOUSE_CACHE_DIR to a "
            "writable folder") from error
    return folder


def _digest(manifest: Path) -> str:
    try:
        return hashlib.sha256(manifest.read_bytes()).hexdigest()[:16]
    except OSError as error:
        raise SparkClasspathError(f"cannot read the Maven manifest {manifest}: {error}") from error


def _resolve(manifest: Path, folder: Path, finish: Callable[[Path], None] | None) -> None:
    """Copy the manifest's artifacts into ``folder`` with Maven, atomically."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise SparkClasspathError(
            "Maven (`mvn`) is needed once to fetch the Spark jars and is not on PATH. Install "
            "it (Debian: `apt-get install maven`), or set spark.jars to jar paths, or "
            f"spark.jars_packages to {','.join(maven_coordinates(manifest))}."
        )
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        _copy_dependencies(mvn, manifest, staging)
        if finish is not None:
            finish(staging)
        (staging / _COMPLETE).write_text(",".join(maven_coordinates(manifest)) + "\n")
        staging.chmod(0o755)  # mkdtemp's 0700 would hide the cache from other users
        if folder.exists() and not (folder / _COMPLETE).is_file():
            shutil.rmtree(folder)  # left by an older, interrupted layout
        try:
            staging.rename(folder)
        except OSError:  # another process completed the same folder first
            if not (folder / _COMPLETE).is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _copy_dependencies(mvn: str, manifest: Path, into: Path) -> None:
    command = [mvn, "-B", "-q", "-Dstyle.color=never", "-f", str(manifest),
               "dependency:copy-dependencies", f"-DoutputDirectory={into}"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=_MVN_TIMEOUT_S,
                              check=False)
    except subprocess.TimeoutExpired as error:
        raise SparkClasspathError(
            f"Maven did not resolve {manifest} within {_MVN_TIMEOUT_S} s") from error
    if done.returncode != 0:
        errors = [line for line in (done.stdout + done.stderr).splitlines() if "ERROR" in line]
        detail = "\n".join(errors[:5]) or f"exit code {done.returncode}"
        raise SparkClasspathError(
            f"Maven could not resolve the Spark jars of {manifest}:\n{detail}")
