"""Catalog reads survive a reset connection; one view's failure never stops ``lakehouse run``."""

from __future__ import annotations

import io
import json
import socket
import struct
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from requests.exceptions import ConnectionError as RequestConnectionError
from rich.console import Console

from lakehouse.catalog_client import READ_RETRIES, connect_catalog
from lakehouse.commands import service
from lakehouse.config import parse_config
from lakehouse.errors import CatalogUnavailableError


class _Resetting(BaseHTTPRequestHandler):
    """A REST catalog whose namespace listing resets the connection ``resets`` times first."""

    resets = 0
    seen = 0

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path.startswith("/v1/config"):
            self._json({"defaults": {}, "overrides": {}})
            return
        type(self).seen += 1
        if type(self).seen <= type(self).resets:  # close with RST: "connection reset by peer"
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True
            return
        self._json({"namespaces": []})

    def _json(self, body: dict[str, object]) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def resetting_catalog() -> Iterator[tuple[str, type[_Resetting]]]:
    handler = type("Handler", (_Resetting,), {"resets": 0, "seen": 0})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


def test_a_read_is_sent_again_after_a_reset_connection(
    resetting_catalog: tuple[str, type[_Resetting]],
) -> None:
    uri, handler = resetting_catalog
    handler.resets = READ_RETRIES  # every retry used: the last attempt answers
    catalog = connect_catalog(uri)
    assert catalog.list_namespaces() == []  # connect_catalog listed them once too
    assert handler.seen == READ_RETRIES + 2


def test_resets_beyond_the_retries_fail_with_the_catalog_named(
    resetting_catalog: tuple[str, type[_Resetting]],
) -> None:
    uri, handler = resetting_catalog
    handler.resets = READ_RETRIES + 1
    with pytest.raises(CatalogUnavailableError, match=uri):
        connect_catalog(uri)


class _FailingRuntime:
    """What ``lakehouse run`` calls on a worker: a refresh that fails outside the project."""

    config = parse_config({"views": [{"name": "v.a", "sql": "select 1"}]})

    def refresh(self, view: object, *, poll: bool = False) -> None:
        raise RequestConnectionError("('Connection aborted.', ConnectionResetError(104))\nmore")


def test_a_tick_failing_with_a_client_error_is_one_line_and_the_schedule_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out = io.StringIO()
    monkeypatch.setattr(service, "console", Console(file=out, width=200))
    runtime = _FailingRuntime()
    service._report(runtime, runtime.config.views[0])  # type: ignore[arg-type]  # returns
    assert out.getvalue().count("\n") == 1
    assert "v.a: ConnectionError: ('Connection aborted.'" in out.getvalue()
    assert "more" not in out.getvalue() and "Traceback" not in out.getvalue()
