"""A moto server (S3, STS, IAM) in its own process on loopback, for the catalog's S3 tests.

Its own process, unlike ``ThreadedMotoServer``: a test can turn on its IAM checks
(``/moto-api/reset-auth``) without affecting other servers of the session.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from tests.benchmarks.common import free_port

START_TIMEOUT_S = 30.0


def _wait(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline and process.poll() is None:
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError("moto did not start")


@contextmanager
def moto_process() -> Iterator[str]:
    """Start ``python -m moto.server`` on a free loopback port; yields its endpoint URL.

    Raises:
        RuntimeError: It does not answer within ``START_TIMEOUT_S`` seconds.
    """
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1",
                                "-p", str(port)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        _wait(endpoint + "/moto-api/", process)
        yield endpoint
    finally:
        process.terminate()
        process.wait(10)
