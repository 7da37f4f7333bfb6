"""The offline Iceberg classpath: class-file relocation, the extras jar, missing sources."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import zipfile
from pathlib import Path

import pytest

from lakehouse.errors import LakehouseError, SparkClasspathError
from lakehouse.spark import jars as jars_module
from lakehouse.spark.jars import (
    EMPTY_INTERFACES,
    RELOCATIONS,
    default_cache_dir,
    find_httpclient_jars,
    iceberg_runtime_jar,
    iceberg_spark_jars,
    jackson_jars,
    shaded_extras_jar,
)
from lakehouse.spark.relocate import (
    Relocation,
    Relocator,
    decode_modified_utf8,
    empty_interface_class,
    read_utf8_constants,
)
from lakehouse.spark.session import iceberg_session_conf

JACKSON = Relocation("com.fasterxml.jackson", "org.apache.iceberg.shaded.com.fasterxml.jackson")
HC = Relocation("org.apache.hc", "org.apache.iceberg.shaded.org.apache.hc")
TLS = "org/apache/iceberg/shaded/org/apache/hc/client5/http/ssl/TlsSocketStrategy"
needs_jdk = pytest.mark.skipif(
    shutil.which("javap") is None or shutil.which("java") is None, reason="needs a JDK"
)


def _httpclient_or_skip() -> None:
    try:
        find_httpclient_jars()
    except SparkClasspathError as error:
        pytest.skip(f"no httpclient5 jars here: {error}")


@pytest.fixture(scope="module")
def extras_jar(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _httpclient_or_skip()
    return shaded_extras_jar(tmp_path_factory.mktemp("jar-cache"))


def _utf8(text: bytes) -> bytes:
    return struct.pack(">BH", 1, len(text)) + text


def _class_with_constants(*constants: bytes) -> bytes:
    """A minimal interface class with extra (unreferenced) Utf8, Long and String constants."""
    base = empty_interface_class("p/Holder")
    pool_end = len(base) - 14  # the body after the 4-entry pool is 7 u2 values
    extra = b"".join(_utf8(c) for c in constants)
    extra += struct.pack(">BQ", 5, 2**40)  # a Long takes two slots
    extra += struct.pack(">BH", 8, 2)  # a String pointing at constant 2
    count = 5 + len(constants) + 3
    return base[:8] + struct.pack(">H", count) + base[10:pool_end] + extra + base[pool_end:]


# --- Relocator on strings -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (
            "com/fasterxml/jackson/core/JsonFactory",
            "org/apache/iceberg/shaded/com/fasterxml/jackson/core/JsonFactory",
        ),
        (
            "(Lcom/fasterxml/jackson/core/JsonParser;)[Lorg/apache/hc/core5/http/Header;",
            "(Lorg/apache/iceberg/shaded/com/fasterxml/jackson/core/JsonParser;)"
            "[Lorg/apache/iceberg/shaded/org/apache/hc/core5/http/Header;",
        ),
        (
            "com.fasterxml.jackson.databind.ext.Java7Handlers",
            "org.apache.iceberg.shaded.com.fasterxml.jackson.databind.ext.Java7Handlers",
        ),
        ("com.fasterxml.jackson", "org.apache.iceberg.shaded.com.fasterxml.jackson"),
        ("org/apache/hcatalog/X", "org/apache/hcatalog/X"),
        ("com.fasterxml.jacksonx.Y", "com.fasterxml.jacksonx.Y"),
        (
            "org/apache/iceberg/shaded/com/fasterxml/jackson/core/A",
            "org/apache/iceberg/shaded/com/fasterxml/jackson/core/A",
        ),
        (
            "META-INF/services/com.fasterxml.jackson.core.JsonFactory",
            "META-INF/services/org.apache.iceberg.shaded.com.fasterxml.jackson.core.JsonFactory",
        ),
    ],
)
def test_relocator_rewrites_names_descriptors_and_dotted_strings(before: str, after: str) -> None:
    assert Relocator([JACKSON, HC]).rewrite_name(before) == after


def test_relocation_rejects_non_package_names() -> None:
    with pytest.raises(ValueError, match="package"):
        Relocation("com/fasterxml", "x.y")


# --- class files ----------------------------------------------------------------------------


def test_rewrite_class_touches_only_utf8_entries_holding_the_prefix() -> None:
    odd = b"caf\xc3\xa9 \xc0\x80 \xed\xa0\xbd\xed\xb8\x80"  # é, modified-UTF-8 NUL, surrogates
    original = _class_with_constants(
        b"Lcom/fasterxml/jackson/core/JsonParser;", odd, odd + b" com.fasterxml.jackson.X"
    )
    rewritten = Relocator([JACKSON]).rewrite_class(original)
    before, after = read_utf8_constants(original), read_utf8_constants(rewritten)
    assert after[2] == "Lorg/apache/iceberg/shaded/com/fasterxml/jackson/core/JsonParser;"
    assert after[3] == before[3] == "caf\u00e9 \x00 \U0001f600"
    assert after[4] == before[4].replace("com.fasterxml", "org.apache.iceberg.shaded.com.fasterxml")
    assert odd in rewritten  # untouched bytes
    assert rewritten.endswith(original[-14:])  # everything after the pool is copied


def test_decode_modified_utf8() -> None:
    assert decode_modified_utf8(b"a\xc0\x80b\xed\xa0\xbd\xed\xb8\x80") == "a\x00b\U0001f600"


def test_rewrite_real_jackson_class_parses_back() -> None:
    jar = next(j for j in jackson_jars() if j.name.startswith("jackson-core"))
    with zipfile.ZipFile(jar) as zf:
        original = zf.read("com/fasterxml/jackson/core/JsonFactory.class")
    rewritten = Relocator([JACKSON]).rewrite_class(original)
    before, after = read_utf8_constants(original), read_utf8_constants(rewritten)
    assert len(before) == len(after)
    assert not [s for s in after if re.search(r"(?<!shaded[/.])com[/.]fasterxml[/.]jackson", s)]
    assert "org/apache/iceberg/shaded/com/fasterxml/jackson/core/JsonFactory" in after


@needs_jdk
def test_javap_reads_relocated_class_and_empty_interface(tmp_path: Path) -> None:
    jar = next(j for j in jackson_jars() if j.name.startswith("jackson-core"))
    with zipfile.ZipFile(jar) as zf:
        data = zf.read("com/fasterxml/jackson/core/JsonFactory.class")
    (tmp_path / "JsonFactory.class").write_bytes(Relocator([JACKSON]).rewrite_class(data))
    (tmp_path / "Tls.class").write_bytes(empty_interface_class(TLS))
    out = subprocess.run(
        ["javap", "-v", str(tmp_path / "JsonFactory.class"), str(tmp_path / "Tls.class")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "public class org.apache.iceberg.shaded.com.fasterxml.jackson.core.JsonFactory" in out
    assert (
        "public interface org.apache.iceberg.shaded.org.apache.hc.client5.http.ssl."
        "TlsSocketStrategy" in out
    )
    assert "major version: 52" in out
    assert "flags: (0x0601) ACC_PUBLIC, ACC_INTERFACE, ACC_ABSTRACT" in out


def test_empty_interface_rejects_dotted_names() -> None:
    with pytest.raises(ValueError):
        empty_interface_class("a.b.C")


# --- the extras jar -------------------------------------------------------------------------


def test_extras_jar_content(extras_jar: Path) -> None:
    with zipfile.ZipFile(extras_jar) as zf:
        names = zf.namelist()
        services = {n: zf.read(n).decode() for n in names if n.startswith("META-INF/services/")}
    assert names[0] == "META-INF/MANIFEST.MF"
    assert not [n for n in names if n.startswith(("com/", "org/apache/hc/", "META-INF/versions"))]
    assert not [n for n in names if n.endswith("module-info.class")]
    assert f"{TLS}.class" in names
    for package in (
        "com/fasterxml/jackson/databind/",
        "com/fasterxml/jackson/annotation/",
        "com/fasterxml/jackson/datatype/jsr310/",
        "org/apache/hc/client5/",
        "org/apache/hc/core5/http2/",
    ):
        assert any(n.startswith(f"org/apache/iceberg/shaded/{package}") for n in names), package
    module = "META-INF/services/org.apache.iceberg.shaded.com.fasterxml.jackson.databind.Module"
    assert services[module].strip() == (
        "org.apache.iceberg.shaded.com.fasterxml.jackson.datatype.jsr310.JavaTimeModule"
    )


def test_extras_jar_is_cached_and_built_atomically(tmp_path: Path, monkeypatch) -> None:
    _httpclient_or_skip()
    first = shaded_extras_jar(tmp_path)
    stamp = first.stat().st_mtime_ns
    assert shaded_extras_jar(tmp_path) == first
    assert first.stat().st_mtime_ns == stamp
    assert re.fullmatch(r"iceberg-shaded-extras-[0-9a-f]{16}\.jar", first.name)
    assert sorted(p.name for p in tmp_path.iterdir()) == [first.name]

    def crash(target: Path, entries, manifest) -> None:
        target.write_bytes(b"PK half a jar")
        raise OSError("disk full")

    monkeypatch.setattr(jars_module, "write_jar", crash)
    other = tmp_path / "other"
    with pytest.raises(SparkClasspathError, match="disk full"):
        shaded_extras_jar(other)
    assert list(other.iterdir()) == []


def test_iceberg_spark_jars_lists_runtime_then_extras(tmp_path: Path) -> None:
    _httpclient_or_skip()
    runtime, extras = iceberg_spark_jars(tmp_path)
    assert runtime == iceberg_runtime_jar()
    assert runtime.name == "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
    assert extras.parent == tmp_path


def test_every_shaded_class_the_runtime_references_exists(extras_jar: Path) -> None:
    provided: set[str] = set()
    wanted: dict[str, str] = {}
    pattern = re.compile(
        rb"org/apache/iceberg/shaded/(?:com/fasterxml/jackson|org/apache/hc)/"
        rb"[\w/$-]+"
    )  # names are plain ASCII runs inside CONSTANT_Utf8 entries
    for jar in (iceberg_runtime_jar(), extras_jar):
        with zipfile.ZipFile(jar) as zf:
            for name in zf.namelist():
                if not name.endswith(".class") or name.startswith("META-INF/"):
                    continue
                provided.add(name[: -len(".class")])
                for ref in pattern.findall(zf.read(name)):
                    wanted.setdefault(ref.decode(), name)
    missing = {ref: user for ref, user in wanted.items() if ref not in provided}
    assert not missing
    assert TLS in wanted  # the REST client does reference the interface we add


@needs_jdk
def test_relocated_classes_load_and_work_in_a_jvm(extras_jar: Path, tmp_path: Path) -> None:
    source = tmp_path / "Check.java"
    source.write_text("""
public class Check {
  public static void main(String[] args) throws Exception {
    String p = "org.apache.iceberg.shaded.";
    Class<?> tls = Class.forName(p + "org.apache.hc.client5.http.ssl.TlsSocketStrategy");
    System.out.println("interface=" + tls.isInterface());
    Class<?> om = Class.forName(p + "com.fasterxml.jackson.databind.ObjectMapper");
    Object mapper = om.getConstructor().newInstance();
    om.getMethod("findAndRegisterModules").invoke(mapper);
    Object value = java.util.List.of(java.util.Map.of("a", 1), java.time.LocalDate.of(2024, 1, 2));
    System.out.println(om.getMethod("writeValueAsString", Object.class).invoke(mapper, value));
    Class<?> clients = Class.forName(p + "org.apache.hc.client5.http.impl.classic.HttpClients");
    System.out.println(clients.getMethod("createDefault").invoke(null).getClass().getSimpleName());
    Class<?> vi = Class.forName(p + "org.apache.hc.core5.util.VersionInfo");
    Object info = vi.getMethod("loadVersionInfo", String.class, ClassLoader.class)
        .invoke(null, p + "org.apache.hc.client5", Check.class.getClassLoader());
    System.out.println("release=" + vi.getMethod("getRelease").invoke(info));
  }
}
""")
    slf4j = sorted(jackson_jars()[0].parent.glob("slf4j-api-*.jar"))  # httpclient5 logs to it
    classpath = ":".join(map(str, [extras_jar, *slf4j]))
    result = subprocess.run(
        ["java", "-cp", classpath, str(source)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split()
    assert lines[0] == "interface=true"
    assert lines[1] == '[{"a":1},[2024,1,2]]'  # JavaTimeModule found through its service file
    assert lines[2] == "InternalHttpClient"
    assert lines[3].startswith("release=5.")


# --- missing sources ------------------------------------------------------------------------


def test_missing_httpclient_names_packages_and_fixes(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(jars_module, "DEBIAN_JAVA_DIR", tmp_path)
    monkeypatch.setattr(jars_module, "_package_dirs", lambda package: [])
    with pytest.raises(SparkClasspathError) as info:
        find_httpclient_jars()
    message = str(info.value)
    for needle in (
        f"{tmp_path}/httpclient5.jar",
        f"{tmp_path}/httpcore5-h2.jar",
        "libhttpclient5-java",
        "apt-get install libhttpclient5-java libhttpcore5-java",
        "pip install --no-deps bodo-iceberg-connector==2026.10",
        "spark.jars.packages",
        "bodo_iceberg_connector is not installed",
    ):
        assert needle in message
    assert isinstance(info.value, LakehouseError)


def test_explicit_httpclient_list_must_be_complete(tmp_path: Path) -> None:
    _httpclient_or_skip()
    found = find_httpclient_jars()
    jars = find_httpclient_jars([found.httpcore5, found.httpclient5, found.httpcore5_h2])
    assert (jars.origin, jars.httpclient5) == ("explicit paths", found.httpclient5)
    with pytest.raises(SparkClasspathError, match="lack httpcore5-h2"):
        find_httpclient_jars([found.httpclient5, found.httpcore5, tmp_path / "nope.jar"])


def test_bodo_jars_are_the_fallback(tmp_path: Path, monkeypatch) -> None:
    _httpclient_or_skip()
    found = find_httpclient_jars()
    libs = tmp_path / "bodo_iceberg_connector" / "iceberg-java" / "libs"
    libs.mkdir(parents=True)
    for jar, name in zip(
        found.paths(), ("httpclient5-5.3.1", "httpcore5-5.2", "httpcore5-h2-5.2.4"), strict=True
    ):
        shutil.copy(jar, libs / f"{name}.jar")
    monkeypatch.setattr(jars_module, "DEBIAN_JAVA_DIR", tmp_path / "empty")
    monkeypatch.setattr(jars_module, "_package_dirs", lambda package: [libs.parent.parent])
    jars = find_httpclient_jars()
    assert jars.origin == "bodo_iceberg_connector"
    assert jars.httpcore5_h2.name == "httpcore5-h2-5.2.4.jar"


def test_missing_runtime_jar_names_the_pip_package(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(jars_module, "_package_dirs", lambda package: [])
    with pytest.raises(SparkClasspathError, match="snowpark-connect-deps-iceberg==1.0.3"):
        iceberg_runtime_jar()
    monkeypatch.setattr(jars_module, "_package_dirs", lambda package: [tmp_path])
    with pytest.raises(SparkClasspathError, match="missing from package"):
        iceberg_runtime_jar()


def test_missing_jackson_jar_is_named(monkeypatch, tmp_path: Path) -> None:
    (tmp_path / "jars").mkdir()
    monkeypatch.setattr(jars_module, "_package_dirs", lambda package: [tmp_path])
    with pytest.raises(SparkClasspathError, match="jackson-databind-2.15.2.jar"):
        jackson_jars()


# --- configuration --------------------------------------------------------------------------


def test_default_cache_dir(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LAKEHOUSE_CACHE_DIR", str(tmp_path))
    assert default_cache_dir() == tmp_path / "jars"
    monkeypatch.delenv("LAKEHOUSE_CACHE_DIR")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert default_cache_dir() == Path.home() / ".cache" / "lakehouse-freshness" / "jars"


def test_relocations_and_interfaces_are_what_the_runtime_expects() -> None:
    assert {r.new for r in RELOCATIONS} == {
        "org.apache.iceberg.shaded.com.fasterxml.jackson",
        "org.apache.iceberg.shaded.org.apache.hc",
    }
    assert EMPTY_INTERFACES == (TLS.replace("/", "."),)


def test_session_conf_rest_hadoop_and_packages() -> None:
    rest = iceberg_session_conf(
        catalog_name="lake",
        catalog_uri="http://h:1/iceberg",
        warehouse="file:///w",
        jars=[Path("/a.jar"), Path("/b.jar")],
    )
    assert rest["spark.sql.catalog.lake"] == "org.apache.iceberg.spark.SparkCatalog"
    assert rest["spark.sql.catalog.lake.type"] == "rest"
    assert rest["spark.sql.catalog.lake.uri"] == "http://h:1/iceberg"
    assert rest["spark.sql.defaultCatalog"] == "lake"
    assert rest["spark.jars"] == "/a.jar,/b.jar"
    assert "IcebergSparkSessionExtensions" in rest["spark.sql.extensions"]
    hadoop = iceberg_session_conf(
        catalog_name="c",
        catalog_uri="",
        warehouse="/w",
        catalog_type="hadoop",
        jars_packages="g:a:1",
    )
    assert "spark.sql.catalog.c.uri" not in hadoop
    assert hadoop["spark.jars.packages"] == "g:a:1"
    assert "spark.jars" not in hadoop
