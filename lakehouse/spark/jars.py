"""The offline Spark classpath for Iceberg: which jars, where they come from, how they are built.

Maven Central may be unreachable, so the jars come from Python wheels and Debian packages:

* the Iceberg 1.10.2 Spark runtime jar, shipped by the ``snowpark-connect-deps-iceberg`` wheel;
* one jar built once per user into a cache folder (``iceberg-shaded-extras-<hash>.jar``) holding
  the classes that runtime jar was built without: PySpark's own Jackson 2.15.2 relocated to
  ``org.apache.iceberg.shaded.com.fasterxml.jackson``, Apache httpclient5/httpcore5/httpcore5-h2
  relocated to ``org.apache.iceberg.shaded.org.apache.hc`` (used by the REST catalog client),
  and an empty ``TlsSocketStrategy`` interface, which httpclient5 5.4 introduced and the REST
  client references (plain-http catalogs need nothing more from it).

Users with Maven access may skip all this and set ``spark.jars.packages`` instead.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from lakehouse.errors import SparkClasspathError
from lakehouse.spark.relocate import (
    JarEntry,
    Relocation,
    Relocator,
    empty_interface_class,
    relocated_entries,
    write_jar,
)

__all__ = [
    "ICEBERG_MAVEN_PACKAGE",
    "ICEBERG_RUNTIME_JAR",
    "HttpClientJars",
    "default_cache_dir",
    "find_httpclient_jars",
    "iceberg_runtime_jar",
    "iceberg_spark_jars",
    "jackson_jars",
    "shaded_extras_jar",
]

ICEBERG_RUNTIME_JAR = "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
ICEBERG_MAVEN_PACKAGE = "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2"
JACKSON_VERSION = "2.15.2"
JACKSON_ARTIFACTS = (
    "jackson-core",
    "jackson-databind",
    "jackson-annotations",
    "jackson-datatype-jsr310",
)
SHADED = "org.apache.iceberg.shaded"
RELOCATIONS = (
    Relocation("com.fasterxml.jackson", f"{SHADED}.com.fasterxml.jackson"),
    Relocation("org.apache.hc", f"{SHADED}.org.apache.hc"),
)
EMPTY_INTERFACES = (f"{SHADED}.org.apache.hc.client5.http.ssl.TlsSocketStrategy",)
DEBIAN_JAVA_DIR = Path("/usr/share/java")
BODO_PACKAGE = "bodo_iceberg_connector"
# Bump whenever the build recipe changes, so stale cached jars are not reused.
_RECIPE_VERSION = "1"
_ROLE_MARKERS = {
    "httpclient5": "org/apache/hc/client5/http/impl/classic/HttpClients.class",
    "httpcore5": "org/apache/hc/core5/http/HttpHost.class",
    "httpcore5-h2": "org/apache/hc/core5/http2/HttpVersionPolicy.class",
}
_HOW_TO_GET_HTTPCLIENT = (
    "Get them with one of: `apt-get install libhttpclient5-java libhttpcore5-java` "
    "(Debian/Ubuntu, installs /usr/share/java/httpclient5.jar, httpcore5.jar, httpcore5-h2.jar); "
    "`pip install --no-deps bodo-iceberg-connector==2026.10`; or pass their paths explicitly; "
    f"or, with Maven access, set spark.jars.packages={ICEBERG_MAVEN_PACKAGE} instead of "
    "using the offline jars."
)


@dataclass(frozen=True)
class HttpClientJars:
    """The three Apache HttpComponents 5 jars the Iceberg REST client needs, and their origin."""

    httpclient5: Path
    httpcore5: Path
    httpcore5_h2: Path
    origin: str

    def paths(self) -> list[Path]:
        """Return the three jars in classpath order."""
        return [self.httpclient5, self.httpcore5, self.httpcore5_h2]


def iceberg_spark_jars(
    cache_dir: Path | None = None, httpclient_jars: Sequence[Path] | None = None
) -> list[Path]:
    """Return the jars Spark needs for Iceberg tables, building the extras jar if needed.

    Args:
        cache_dir: Folder for the built jar; default :func:`default_cache_dir`.
        httpclient_jars: Explicit httpclient5, httpcore5 and httpcore5-h2 jars (any order);
            default: Debian's ``/usr/share/java`` copies, else those of an installed
            ``bodo_iceberg_connector`` package.

    Returns:
        The paths for ``spark.jars``: the Iceberg runtime jar, then the shaded extras jar.

    Raises:
        SparkClasspathError: If a source jar is missing; the message says how to get it.
    """
    return [iceberg_runtime_jar(), shaded_extras_jar(cache_dir, httpclient_jars)]


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


def iceberg_runtime_jar() -> Path:
    """Return the Iceberg Spark runtime jar shipped by ``snowpark-connect-deps-iceberg``.

    Raises:
        SparkClasspathError: If the package or the jar is missing.
    """
    folders = _package_dirs("snowpark_connect_deps_iceberg")
    fix = "Install it with `pip install --no-deps snowpark-connect-deps-iceberg==1.0.3`"
    if not folders:
        raise SparkClasspathError(
            f"The Iceberg Spark runtime jar {ICEBERG_RUNTIME_JAR} is missing: Python package "
            f"snowpark_connect_deps_iceberg is not installed. {fix}, or set "
            f"spark.jars.packages={ICEBERG_MAVEN_PACKAGE} if Maven Central is reachable."
        )
    for folder in folders:
        jar = folder / "jars" / ICEBERG_RUNTIME_JAR
        if jar.is_file():
            return jar
    raise SparkClasspathError(
        f"The Iceberg Spark runtime jar jars/{ICEBERG_RUNTIME_JAR} is missing from package "
        f"snowpark_connect_deps_iceberg ({', '.join(map(str, folders))}). {fix}."
    )


def jackson_jars() -> list[Path]:
    """Return PySpark's Jackson 2.15.2 jars (core, databind, annotations, datatype-jsr310).

    Raises:
        SparkClasspathError: If pyspark or one of the jars is missing.
    """
    folders = _package_dirs("pyspark")
    if not folders:
        raise SparkClasspathError("Python package pyspark is not installed: pip install pyspark")
    folder = folders[0] / "jars"
    jars = [folder / f"{name}-{JACKSON_VERSION}.jar" for name in JACKSON_ARTIFACTS]
    missing = [jar.name for jar in jars if not jar.is_file()]
    if missing:
        raise SparkClasspathError(
            f"PySpark's Jackson jars {', '.join(missing)} are missing from {folder}; the offline "
            "Iceberg classpath expects pyspark==3.5.9: `pip install pyspark==3.5.9`."
        )
    return jars


def _package_dirs(package: str) -> list[Path]:
    """Return the folders of an installed Python package without importing it (none if absent)."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.submodule_search_locations:
        return []
    return [Path(folder) for folder in spec.submodule_search_locations]


def _jar_role(jar: Path) -> str | None:
    """Tell which HttpComponents jar ``jar`` is, by a class only that jar holds."""
    try:
        with zipfile.ZipFile(jar) as zf:
            names = set(zf.namelist())
    except (OSError, zipfile.BadZipFile):
        return None
    return next((role for role, marker in _ROLE_MARKERS.items() if marker in names), None)


def _by_role(jars: Sequence[Path]) -> dict[str, Path]:
    """Map each HttpComponents role to the first of ``jars`` that provides it."""
    found: dict[str, Path] = {}
    for jar in jars:
        role = _jar_role(jar)
        if role is not None:
            found.setdefault(role, jar)
    return found


def _complete(found: dict[str, Path], origin: str) -> HttpClientJars:
    """Build an :class:`HttpClientJars` from a complete role map."""
    return HttpClientJars(found["httpclient5"], found["httpcore5"], found["httpcore5-h2"], origin)


def find_httpclient_jars(explicit: Sequence[Path] | None = None) -> HttpClientJars:
    """Find httpclient5, httpcore5 and httpcore5-h2 jars.

    Args:
        explicit: Jars to use, in any order; when given, no other place is searched.

    Returns:
        The three jars, from ``explicit``, else ``/usr/share/java``, else an installed
        ``bodo_iceberg_connector`` package.

    Raises:
        SparkClasspathError: If no source has all three; the message names what is missing.
    """
    if explicit is not None:
        found = _by_role([Path(p) for p in explicit])
        if len(found) == len(_ROLE_MARKERS):
            return _complete(found, "explicit paths")
        missing = ", ".join(r for r in _ROLE_MARKERS if r not in found)
        raise SparkClasspathError(
            f"The given httpclient jars ({', '.join(map(str, explicit))}) lack {missing}. "
            + _HOW_TO_GET_HTTPCLIENT
        )
    debian = _by_role([DEBIAN_JAVA_DIR / f"{role}.jar" for role in _ROLE_MARKERS])
    if len(debian) == len(_ROLE_MARKERS):
        return _complete(debian, str(DEBIAN_JAVA_DIR))
    bodo = _by_role(sorted(_bodo_jars()))
    if len(bodo) == len(_ROLE_MARKERS):
        return _complete(bodo, BODO_PACKAGE)
    missing = ", ".join(f"{DEBIAN_JAVA_DIR}/{r}.jar" for r in _ROLE_MARKERS if r not in debian)
    bodo_state = "has no complete set" if bodo else "is not installed"
    raise SparkClasspathError(
        f"The Iceberg REST client needs Apache httpclient5, httpcore5 and httpcore5-h2 jars: "
        f"missing {missing} (Debian packages libhttpclient5-java, libhttpcore5-java), and "
        f"Python package {BODO_PACKAGE} {bodo_state}. " + _HOW_TO_GET_HTTPCLIENT
    )


def _bodo_jars() -> Iterator[Path]:
    """Yield the HttpComponents jars inside an installed ``bodo_iceberg_connector``."""
    for folder in _package_dirs(BODO_PACKAGE):
        yield from folder.rglob("httpc*5*.jar")


def _fingerprint(sources: Sequence[Path]) -> str:
    """Hash the recipe version and the bytes of every source jar."""
    digest = hashlib.sha256(_RECIPE_VERSION.encode())
    for source in sources:
        digest.update(source.name.encode() + b"\0")
        digest.update(hashlib.sha256(source.read_bytes()).digest())
    return digest.hexdigest()[:16]


def _extras_entries(sources: Sequence[Path]) -> Iterator[JarEntry]:
    """Yield the relocated entries of every source jar, then the empty interfaces."""
    relocator = Relocator(RELOCATIONS)
    listing = "".join(f"{source}\n" for source in sources)
    yield JarEntry("META-INF/lakehouse-freshness/SOURCES.txt", listing.encode())
    for source in sources:
        yield from relocated_entries(source, relocator)
    for name in EMPTY_INTERFACES:
        internal = name.replace(".", "/")
        yield JarEntry(f"{internal}.class", empty_interface_class(internal))


def shaded_extras_jar(
    cache_dir: Path | None = None, httpclient_jars: Sequence[Path] | None = None
) -> Path:
    """Return the shaded extras jar, building it into the cache folder on first use.

    The jar name carries a hash of its sources and recipe, so a changed source yields a new
    jar. It is written to a temporary file and renamed into place, so a crash never leaves a
    partial jar and concurrent builders do not collide.

    Args:
        cache_dir: Folder for the jar; default :func:`default_cache_dir`.
        httpclient_jars: Explicit HttpComponents jars, see :func:`find_httpclient_jars`.

    Returns:
        The path of ``iceberg-shaded-extras-<hash>.jar``.

    Raises:
        SparkClasspathError: If a source jar is missing or the cache folder is not writable.
    """
    sources = [*jackson_jars(), *find_httpclient_jars(httpclient_jars).paths()]
    folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    target = folder / f"iceberg-shaded-extras-{_fingerprint(sources)}.jar"
    if target.is_file():
        return target
    try:
        folder.mkdir(parents=True, exist_ok=True)
        _build_atomically(target, sources)
    except OSError as exc:
        raise SparkClasspathError(
            f"Cannot write the shaded extras jar {target}: {exc}. Set LAKEHOUSE_CACHE_DIR to a "
            "writable folder."
        ) from exc
    return target


def _build_atomically(target: Path, sources: Sequence[Path]) -> None:
    """Write the extras jar to a temporary file beside ``target``, then rename it."""
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.stem}-", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        manifest = {"Created-By": "lakehouse-freshness (lakehouse.spark.relocate)"}
        write_jar(tmp, _extras_entries(sources), manifest)
        tmp.chmod(0o644)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
