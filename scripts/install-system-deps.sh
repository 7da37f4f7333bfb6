#!/usr/bin/env bash
# Debian packages the project needs, installed only when missing (idempotent):
# - maven: resolves the Spark jars from lakehouse/spark/pom.xml (and Trino for the tests);
# - postgresql: the server binaries (initdb, pg_ctl) the tests start on loopback to run the
#   catalog store on PostgreSQL (tests/conftest_postgres.py);
# - docker-compose: validates docker/compose.yaml (`docker-compose config`,
#   tests/unit/test_docker.py); no Docker engine is needed for that;
# - chromium: renders the status page headless (tests/integration/test_status_page.py).
set -euo pipefail
packages=()
command -v mvn >/dev/null || packages+=(maven)
if ! compgen -G "/usr/lib/postgresql/*/bin/pg_ctl" >/dev/null && ! command -v pg_ctl >/dev/null; then
  packages+=(postgresql)
fi
command -v docker-compose >/dev/null || packages+=(docker-compose)
command -v chromium >/dev/null || packages+=(chromium)
[ ${#packages[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
  echo "no apt-get: install ${packages[*]} yourself" >&2
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y -q --no-install-recommends "${packages[@]}" >/dev/null \
  || { $SUDO apt-get update -q >/dev/null && \
       $SUDO apt-get install -y -q --no-install-recommends "${packages[@]}" >/dev/null; }
