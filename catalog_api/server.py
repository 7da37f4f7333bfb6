"""Running the catalog service: blocking (``lakehouse serve``) or in a background thread."""

from __future__ import annotations

import ipaddress
import logging
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass

import uvicorn
from fastapi import APIRouter

from catalog_api.api.routes.config import API_PREFIX
from catalog_api.app import create_app
from catalog_api.core.config import CatalogSettings
from catalog_api.errors import ListenError

DEFAULT_STARTUP_TIMEOUT_S = 15.0
logger = logging.getLogger(__name__)

KEEP_ALIVE_S = 75
"""Seconds an idle client connection stays open (uvicorn's default is 5). Clients keep
their connections pooled between calls (pyiceberg's ``requests`` session, Spark's HTTP
client): a server closing one as a client reuses it resets the client's request."""


class ServerStartError(RuntimeError):
    """The catalog server did not start answering in time."""


@dataclass
class RunningServer:
    """A catalog server running in a background thread.

    Attributes:
        host: Address the server listens on.
        port: Port the server listens on (the real one when 0 was asked).
        settings: The settings the server runs with.
    """

    host: str
    port: int
    settings: CatalogSettings
    _server: uvicorn.Server
    _thread: threading.Thread

    @property
    def base_url(self) -> str:
        """``http://host:port``."""
        return _base_url(self.host, self.port)

    @property
    def uri(self) -> str:
        """The catalog base URI clients use: ``http://host:port/iceberg``."""
        return f"{self.base_url}{API_PREFIX}"

    def stop(self, timeout_s: float = 10.0) -> None:
        """Ask the server to exit and wait for its thread.

        Args:
            timeout_s: Seconds to wait for a graceful exit before forcing it.
        """
        self._server.should_exit = True
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(timeout_s)


def _base_url(host: str, port: int) -> str:
    """``http://host:port``, an IPv6 host in brackets."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``127.0.0.0/8``, ``::1``) or ``localhost``."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(settings: CatalogSettings, host: str, port: int) -> None:
    """Refuse to serve an open catalog beyond loopback; say so when it is open on loopback.

    Without ``settings.auth`` every caller is an admin: acceptable for the embedded demo on
    ``127.0.0.1``, never on an address other machines reach.

    Raises:
        ListenError: ``host`` is not loopback and authentication is off.
    """
    if settings.auth.enabled:
        return
    if not is_loopback(host):
        raise ListenError(host, port, "authentication is off; an open catalog listens on "
                                      "loopback only (configure catalog.auth, docs/security.md)")
    logger.warning("Catalog authentication is off: anyone on this machine may read and write "
                   "through %s:%d (loopback only; see docs/security.md)", host, port)


def _bind(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port``, not yet listening.

    Raises:
        ListenError: The address is taken, not this host's, or not allowed.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY on accepted connections only when
    # the socket says it is TCP; otherwise each kept-alive response waits ~40 ms (Nagle).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise ListenError.from_os_error(host, port, error) from None
    sock.set_inheritable(True)
    return sock


def _wait_until_healthy(running: RunningServer, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    url = f"{running.base_url}/healthz"
    while time.monotonic() < deadline:
        if not running._thread.is_alive():
            raise ServerStartError("Catalog server thread exited during startup")
        try:
            with urllib.request.urlopen(url, timeout=1.0) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.05)
    running.stop()
    raise ServerStartError(f"Catalog server did not answer on {url} within {timeout_s} s")


def serve_in_thread(
    settings: CatalogSettings,
    host: str = "127.0.0.1",
    port: int = 0,
    startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S,
    log_level: str = "warning",
    routers: Sequence[APIRouter] = (),
) -> RunningServer:
    """Start the catalog under uvicorn in a daemon thread and wait until it answers.

    Args:
        settings: Service settings.
        host: Address to listen on.
        port: Port to listen on; 0 picks a free one (see ``RunningServer.port``).
        startup_timeout_s: Seconds to wait for ``/healthz`` to answer.
        log_level: uvicorn log level.
        routers: More routes (:func:`catalog_api.app.create_app`).

    Returns:
        The running server; call ``stop()`` when done.

    Raises:
        ListenError: If the address cannot be bound (e.g. it is already in use).
        ServerStartError: If the server does not answer within ``startup_timeout_s``.
        AuthSetupError: A secret of ``settings.auth`` cannot be read.
    """
    check_exposure(settings, host, port)
    sock = _bind(host, port)
    try:
        app = create_app(settings, routers)
    except BaseException:
        sock.close()
        raise
    actual_port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level=log_level, lifespan="on", access_log=False,
                            timeout_keep_alive=KEEP_ALIVE_S)
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name=f"catalog-{actual_port}", daemon=True
    )
    running = RunningServer(host, actual_port, settings, server, thread)
    thread.start()
    _wait_until_healthy(running, startup_timeout_s)
    return running


def serve(
    settings: CatalogSettings, host: str = "127.0.0.1", port: int = 8181, log_level: str = "info",
    routers: Sequence[APIRouter] = (),
) -> None:
    """Run the catalog in the foreground until interrupted (Ctrl-C / SIGTERM).

    The address is bound first, so a taken port fails before the app is built.

    Args:
        settings: Service settings.
        host: Address to listen on.
        port: Port to listen on.
        log_level: uvicorn log level.
        routers: More routes (:func:`catalog_api.app.create_app`).

    Raises:
        ListenError: If the address cannot be bound (e.g. it is already in use), or is not
            loopback while authentication is off.
        AuthSetupError: A secret of ``settings.auth`` cannot be read.
    """
    check_exposure(settings, host, port)
    sock = _bind(host, port)
    server = uvicorn.Server(uvicorn.Config(create_app(settings, routers), log_level=log_level,
                                           timeout_keep_alive=KEEP_ALIVE_S))
    uri = f"{_base_url(host, sock.getsockname()[1])}{API_PREFIX}"
    logging.getLogger("uvicorn.error").info("Catalog base URI: %s (Ctrl-C to stop)", uri)
    server.run(sockets=[sock])
