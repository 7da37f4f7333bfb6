#!/usr/bin/env bash
# Debian packages the offline Spark classpath needs: httpclient5/httpcore5 jars, relocated
# into the Iceberg runtime by lakehouse/spark/jars.py (Maven Central is not reachable).
set -euo pipefail
if [ -f /usr/share/java/httpclient5.jar ] && [ -f /usr/share/java/httpcore5.jar ] \
   && [ -f /usr/share/java/httpcore5-h2.jar ]; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "no apt-get: install httpclient5 5.2+ jars yourself, or run" \
       "'pip install --no-deps bodo-iceberg-connector==2026.10' in .venv" >&2
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get install -y -q libhttpclient5-java libhttpcore5-java >/dev/null \
  || { $SUDO apt-get update -q >/dev/null && \
       $SUDO apt-get install -y -q libhttpclient5-java libhttpcore5-java >/dev/null; }
