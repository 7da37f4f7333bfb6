"""Relocate Java packages inside jar files, in pure Python.

This is the small subset of the Maven shade plugin that the offline Spark classpath needs: every
``CONSTANT_Utf8`` entry of every ``.class`` file is rewritten (internal names such as
``com/fasterxml/jackson/core/JsonFactory``, descriptors and signatures such as
``Lcom/fasterxml/jackson/core/JsonFactory;``, dotted strings such as
``com.fasterxml.jackson.core.JsonFactory``), and so are entry names and the contents of text
resources (``META-INF/services/*``, ``*.properties``).

The rewriting works on raw bytes. Class files store strings as Java's *modified UTF-8*, in which
every byte below 0x80 is an ASCII character and every byte of a multi-byte sequence is 0x80 or
above, so an ASCII package prefix can be found and replaced in the bytes without decoding, and
every other byte stays untouched.
"""

from __future__ import annotations

import re
import struct
import zipfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "ClassFileError",
    "JarEntry",
    "Relocation",
    "Relocator",
    "empty_interface_class",
    "decode_modified_utf8",
    "read_utf8_constants",
    "relocated_entries",
    "write_jar",
]

_MAGIC = 0xCAFEBABE
# Constant-pool tag -> size in bytes of the entry after its tag (Utf8 is variable-sized).
_FIXED_SIZES = {
    3: 4,
    4: 4,
    5: 8,
    6: 8,
    7: 2,
    8: 2,
    9: 4,
    10: 4,
    11: 4,
    12: 4,
    15: 3,
    16: 2,
    17: 4,
    18: 4,
    19: 2,
    20: 2,
}
_UTF8 = 1
_TEXT_SUFFIXES = (".properties", ".txt", ".xml", ".json")
_IDENTIFIER_BYTE = rb"[A-Za-z0-9_]"


class ClassFileError(ValueError):
    """A ``.class`` entry could not be parsed or rewritten."""


@dataclass(frozen=True)
class Relocation:
    """Move one Java package (and its sub-packages) under another name.

    Attributes:
        old: The dotted package to move, e.g. ``com.fasterxml.jackson``.
        new: Its new dotted name, e.g. ``org.apache.iceberg.shaded.com.fasterxml.jackson``.
    """

    old: str
    new: str

    def __post_init__(self) -> None:
        for name in (self.old, self.new):
            if not re.fullmatch(r"[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*", name):
                raise ValueError(f"not a dotted Java package name: {name!r}")


@dataclass(frozen=True)
class JarEntry:
    """One file to store in a jar: its name and its bytes."""

    name: str
    data: bytes


@dataclass
class Relocator:
    """Apply a set of package relocations to names, bytes and class files.

    Each old package matches in its slashed (``a/b/c``) and dotted (``a.b.c``) form when followed
    by something other than an identifier character, so ``org.apache.hc`` does not match
    ``org.apache.hcatalog``. A match already preceded by its new prefix is left alone, which
    makes relocation idempotent.
    """

    relocations: Sequence[Relocation]
    _pattern: re.Pattern[bytes] = field(init=False, repr=False)
    _targets: dict[bytes, bytes] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        targets: dict[bytes, bytes] = {}
        for rel in self.relocations:
            for sep in (".", "/"):
                targets[rel.old.replace(".", sep).encode()] = rel.new.replace(".", sep).encode()
        if not targets:
            raise ValueError("at least one relocation is needed")
        alternatives = []
        for old in sorted(targets, key=len, reverse=True):  # longest package wins
            new = targets[old]
            guard = new[: -len(old)] if new.endswith(old) else b""
            lookbehind = rb"(?<!" + re.escape(guard) + rb")" if guard else b""
            alternatives.append(lookbehind + re.escape(old))
        body = b"|".join(alternatives)
        self._pattern = re.compile(rb"(?:" + body + rb")(?!" + _IDENTIFIER_BYTE + rb")")
        self._targets = targets

    def rewrite_bytes(self, data: bytes) -> bytes:
        """Return ``data`` with every occurrence of an old package replaced by its new name."""
        return self._pattern.sub(lambda m: self._targets[m.group(0)], data)

    def rewrite_name(self, name: str) -> str:
        """Return a relocated entry name (``com/x/A.class``, ``META-INF/services/com.x.S``)."""
        return self.rewrite_bytes(name.encode("utf-8")).decode("utf-8")

    def rewrite_class(self, data: bytes) -> bytes:
        """Rewrite every ``CONSTANT_Utf8`` entry of a class file.

        Args:
            data: The bytes of a ``.class`` file.

        Returns:
            The class file with its constant pool rewritten; everything after the pool is
            copied as is (no other part of a class file holds byte offsets into the pool).

        Raises:
            ClassFileError: If ``data`` is not a class file or a rewritten string is too long.
        """
        out = bytearray(data[:10])
        pos = 10
        for tag, start, end in _iter_constants(data):
            out += data[pos:start]
            if tag == _UTF8:
                text = self.rewrite_bytes(data[start + 3 : end])
                if len(text) > 0xFFFF:
                    raise ClassFileError("relocated constant longer than 65535 bytes")
                out += struct.pack(">BH", _UTF8, len(text)) + text
            else:
                out += data[start:end]
            pos = end
        out += data[pos:]
        return bytes(out)


def _iter_constants(data: bytes) -> Iterator[tuple[int, int, int]]:
    """Yield ``(tag, start, end)`` byte ranges of each constant-pool entry of a class file."""
    if len(data) < 10 or struct.unpack_from(">I", data)[0] != _MAGIC:
        raise ClassFileError("not a class file (bad magic number)")
    (count,) = struct.unpack_from(">H", data, 8)
    pos, index = 10, 1
    try:
        while index < count:
            tag = data[pos]
            if tag == _UTF8:
                (length,) = struct.unpack_from(">H", data, pos + 1)
                end = pos + 3 + length
            elif tag in _FIXED_SIZES:
                end = pos + 1 + _FIXED_SIZES[tag]
            else:
                raise ClassFileError(f"unknown constant-pool tag {tag} at byte {pos}")
            if end > len(data):
                raise ClassFileError("truncated constant pool")
            yield tag, pos, end
            index += 2 if tag in (5, 6) else 1
            pos = end
    except (IndexError, struct.error) as exc:
        raise ClassFileError("truncated constant pool") from exc


def read_utf8_constants(data: bytes) -> list[str]:
    """Return the ``CONSTANT_Utf8`` strings of a class file, in pool order.

    Args:
        data: The bytes of a ``.class`` file.

    Returns:
        The decoded strings.
    """
    return [
        decode_modified_utf8(data[start + 3 : end])
        for tag, start, end in _iter_constants(data)
        if tag == _UTF8
    ]


def decode_modified_utf8(raw: bytes) -> str:
    """Decode Java's modified UTF-8 (NUL as ``C0 80``, supplementary characters as surrogates).

    Args:
        raw: The bytes of one ``CONSTANT_Utf8`` entry.

    Returns:
        The string; unpaired surrogates are kept as lone surrogate code points.
    """
    text = raw.replace(b"\xc0\x80", b"\x00").decode("utf-8", errors="surrogatepass")
    units = text.encode("utf-16-le", errors="surrogatepass")  # joins surrogate pairs
    return units.decode("utf-16-le", errors="surrogatepass")


def _skip_entry(name: str) -> bool:
    """Whether a source jar entry is dropped rather than relocated."""
    base = name.rsplit("/", 1)[-1]
    return (
        name.endswith("/")
        or name.startswith("META-INF/versions/")
        or base == "module-info.class"
        or name == "META-INF/MANIFEST.MF"
        or name.startswith("META-INF/maven/")
        or name.upper().endswith((".SF", ".RSA", ".DSA", ".EC"))
    )


def relocated_entries(jar: Path, relocator: Relocator) -> Iterator[JarEntry]:
    """Yield the entries of ``jar`` with names and contents relocated.

    Classes get their constant pools rewritten; ``META-INF/services/*`` and text resources get
    their contents rewritten; ``META-INF/LICENSE``-like files move to ``META-INF/<jar stem>/``
    so that several source jars can share one output jar. Directory entries,
    ``module-info.class``, multi-release ``META-INF/versions/**`` entries, signatures, the
    manifest and Maven metadata are dropped.

    Args:
        jar: The source jar.
        relocator: The relocations to apply.

    Yields:
        One entry per kept file.
    """
    with zipfile.ZipFile(jar) as zf:
        for info in zf.infolist():
            name = info.filename
            if _skip_entry(name):
                continue
            data = zf.read(info)
            if name.endswith(".class"):
                data = relocator.rewrite_class(data)
            elif name.startswith("META-INF/services/") or name.endswith(_TEXT_SUFFIXES):
                data = relocator.rewrite_bytes(data)
            if name.startswith("META-INF/") and "/" not in name[len("META-INF/") :]:
                name = f"META-INF/{jar.stem}/{name[len('META-INF/') :]}"
            yield JarEntry(relocator.rewrite_name(name), data)


def empty_interface_class(internal_name: str) -> bytes:
    """Return the class file of an empty public interface.

    Args:
        internal_name: The interface's slashed name, e.g.
            ``org/apache/iceberg/shaded/org/apache/hc/client5/http/ssl/TlsSocketStrategy``.

    Returns:
        A class file (version 52, Java 8) for ``public interface <name> {}``.
    """
    if "." in internal_name or not internal_name:
        raise ValueError(f"expected a slashed internal class name, got {internal_name!r}")
    pool = [
        struct.pack(">BH", 7, 2),  # 1: Class -> 2
        _utf8_constant(internal_name),  # 2
        struct.pack(">BH", 7, 4),  # 3: Class -> 4
        _utf8_constant("java/lang/Object"),  # 4
    ]
    acc_public, acc_interface, acc_abstract = 0x0001, 0x0200, 0x0400
    header = struct.pack(">IHHH", _MAGIC, 0, 52, len(pool) + 1)
    body = struct.pack(">HHHHHHH", acc_public | acc_interface | acc_abstract, 1, 3, 0, 0, 0, 0)
    return header + b"".join(pool) + body


def _utf8_constant(text: str) -> bytes:
    """Encode a NUL-free string as a ``CONSTANT_Utf8`` entry."""
    raw = text.encode("utf-8")
    return struct.pack(">BH", _UTF8, len(raw)) + raw


def write_jar(target: Path, entries: Iterable[JarEntry], manifest: Mapping[str, str]) -> None:
    """Write a jar: a manifest first, then the entries.

    ``META-INF/services/*`` files that appear more than once are merged line by line; any other
    duplicate name keeps its first copy.

    Args:
        target: The jar to write (overwritten).
        entries: The files to store.
        manifest: Main manifest attributes (``Manifest-Version`` is added).
    """
    lines = ["Manifest-Version: 1.0", *(f"{k}: {v}" for k, v in manifest.items())]
    services: dict[str, list[bytes]] = {}
    seen: set[str] = set()
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        _store(zf, "META-INF/MANIFEST.MF", ("\r\n".join(lines) + "\r\n\r\n").encode())
        for entry in entries:
            if entry.name.startswith("META-INF/services/"):
                services.setdefault(entry.name, []).append(entry.data)
            elif entry.name not in seen:
                seen.add(entry.name)
                _store(zf, entry.name, entry.data)
        for name, parts in services.items():
            kept = dict.fromkeys(
                line.strip() for part in parts for line in part.splitlines() if line.strip()
            )
            _store(zf, name, b"\n".join(kept) + b"\n")


def _store(zf: zipfile.ZipFile, name: str, data: bytes) -> None:
    """Add one deflated entry with a fixed timestamp, so equal inputs give equal jars."""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    zf.writestr(info, data)
