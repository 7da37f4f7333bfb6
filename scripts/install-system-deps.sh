#!/usr/bin/env bash
# Debian packages the project needs, installed only when missing (idempotent):
# - httpclient5/httpcore5 jars, relocated into the Iceberg runtime by lakehouse/spark/jars.py
#   (Maven Central is not reachable);
# - postgresql: the server binaries (initdb, pg_ctl) the tests start on loopback to run the
#   catalog store on PostgreSQL (tests/conftest_postgres.py).
set -euo pipefail
packages=()
if ! { [ -f /usr/share/java/httpclient5.jar ] && [ -f /usr/share/java/httpcore5.jar ] \
       && [ -f /usr/share/java/httpcore5-h2.jar ]; }; then
  packages+=(libhttpclient5-java libhttpcore5-java)
fi
if ! compgen -G "/usr/lib/postgresql/*/bin/pg_ctl" >/dev/null && ! command -v pg_ctl >/dev/null; then
  packages+=(postgresql)
fi
[ ${#packages[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
  echo "no apt-get: install ${packages[*]} yourself (httpclient5 jars: or run" \
       "'pip install --no-deps bodo-iceberg-connector==2026.10' in .venv)" >&2
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y -q "${packages[@]}" >/dev/null \
  || { $SUDO apt-get update -q >/dev/null && \
       $SUDO apt-get install -y -q "${packages[@]}" >/dev/null; }
