#!/usr/bin/env bash
# Debian packages the benchmarks need, installed only when missing (idempotent):
# - wrk: the HTTP load generator of the catalog benchmark (tests/benchmarks/catalog_load.py).
set -euo pipefail
command -v wrk >/dev/null 2>&1 && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
  echo "no apt-get: install wrk yourself for the catalog benchmark" >&2
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y -q wrk >/dev/null \
  || { $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q wrk >/dev/null; }
