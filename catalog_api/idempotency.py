"""``Idempotency-Key`` support (spec 1.11.0, ``components/parameters/idempotency-key``).

On the operations where the spec lists the header (``SpecOperation.idempotent``), a request
carrying a key is executed once; a retry with the same key gets the stored final response
(status, body, ``Content-Type``/``ETag``/``Location``) without running again. Following the
spec's finalization rules, 2xx and 4xx responses are stored, 5xx never are (a retry runs
again). Keys are kept in the catalog database (table ``lakehouse_idempotency_keys``) for
``CatalogSettings.idempotency_key_lifetime``, the duration ``GET /v1/config`` advertises.

A key reused for a different request (method, path, query or body) gets 422. A retry that
arrives while the first request still runs waits for its outcome (up to
``PENDING_WAIT_S``, then 503 ``SlowDownException``).
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import (
    Column,
    DateTime,
    Engine,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    delete,
    insert,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from catalog_api.core.config import API_PREFIX
from catalog_api.error_responses import error_response
from catalog_api.middleware import replay_receive
from catalog_api.security import PRINCIPAL
from catalog_api.spec_endpoints import find_operation

HEADER = b"idempotency-key"
#: Response header set on replayed responses.
REPLAYED_HEADER = "Idempotency-Replayed"
#: Response headers stored with a final response and replayed.
KEPT_HEADERS = (b"content-type", b"etag", b"location")
#: How long a retry waits for the first request with its key to finish.
PENDING_WAIT_S = 10.0
#: A pending key older than this is considered abandoned (its request crashed).
STALE_PENDING = timedelta(minutes=5)

metadata = MetaData()
_PENDING = object()

keys_table = Table(
    "lakehouse_idempotency_keys",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("fingerprint", String(64), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("status_code", Integer, nullable=True),  # None while the request runs
    Column("headers", Text, nullable=True),
    Column("body", LargeBinary, nullable=True),
)


class KeyReusedError(Exception):
    """The key was used before for a different request."""


class KeyInProgressError(Exception):
    """The first request with this key has not finished in time."""


@dataclass(frozen=True)
class StoredResponse:
    """A final response kept for replay."""

    status_code: int
    headers: list[tuple[str, str]]
    body: bytes


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


class IdempotencyStore:
    """Keys and their final responses in the catalog database.

    Args:
        engine: The catalog database engine (its table is created if absent).
        lifetime: How long a key is remembered after its first use.
    """

    def __init__(self, engine: Engine, lifetime: timedelta) -> None:
        self.engine = engine
        self.lifetime = lifetime
        metadata.create_all(engine)

    def claim(self, key: str, fingerprint: str) -> StoredResponse | None:
        """Claim a key for a new request, or return the response stored for it.

        Returns:
            None when the caller must run the request (then :meth:`finish` or
            :meth:`release`), else the stored final response.

        Raises:
            KeyReusedError: If the key belongs to a different request.
            KeyInProgressError: If its first request is still running after the wait.
        """
        deadline = time.monotonic() + PENDING_WAIT_S
        with self.engine.begin() as conn:
            expired = keys_table.c.created_at < datetime.now(UTC) - self.lifetime
            conn.execute(delete(keys_table).where(expired))
        while True:
            try:
                with self.engine.begin() as conn:
                    row = dict(key=key, fingerprint=fingerprint, created_at=datetime.now(UTC))
                    conn.execute(insert(keys_table).values(**row))
                return None
            except IntegrityError:
                pass
            outcome = self._existing(key, fingerprint)
            if outcome is None or isinstance(outcome, StoredResponse):
                return outcome
            if time.monotonic() > deadline:
                raise KeyInProgressError(key)
            time.sleep(0.05)

    def _existing(self, key: str, fingerprint: str) -> StoredResponse | None | object:
        with self.engine.begin() as conn:
            row = conn.execute(select(keys_table).where(keys_table.c.key == key)).one_or_none()
            if row is None:  # released meanwhile: claim again
                return _PENDING
            if row.fingerprint != fingerprint:
                raise KeyReusedError(key)
            if row.status_code is not None:
                return StoredResponse(row.status_code, json.loads(row.headers), row.body)
            now = datetime.now(UTC)
            if now - _utc(row.created_at) > STALE_PENDING:  # its request died: take it over
                conn.execute(update(keys_table).where(keys_table.c.key == key)
                             .values(created_at=now))
                return None
        return _PENDING

    def finish(self, key: str, response: StoredResponse) -> None:
        """Store the final response of a claimed key (5xx responses release it instead)."""
        if response.status_code >= 500:
            self.release(key)
            return
        values = {"status_code": response.status_code, "body": response.body,
                  "headers": json.dumps(response.headers)}
        with self.engine.begin() as conn:
            conn.execute(update(keys_table).where(keys_table.c.key == key).values(**values))

    def release(self, key: str) -> None:
        """Forget a claimed key, so that a retry runs the request again."""
        with self.engine.begin() as conn:
            conn.execute(delete(keys_table).where(keys_table.c.key == key))


def _fingerprint(scope: Scope, body: bytes) -> str:
    """What identifies a request: its caller, method, path, query and body.

    The caller is part of it, so another principal reusing a key gets 422, never the
    stored answer of a request it may not have been allowed to make.
    """
    principal = scope.get("state", {}).get(PRINCIPAL)
    caller = principal.name if principal is not None else ""
    digest = hashlib.sha256()
    for part in (caller, scope["method"], scope["path"],
                 scope.get("query_string", b"").decode()):
        digest.update(part.encode() + b"\0")
    digest.update(body)
    return digest.hexdigest()


async def _read_body(receive: Receive) -> tuple[list[Message], bytes]:
    messages: list[Message] = []
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request" or not message.get("more_body", False):
            break
    return messages, b"".join(m.get("body", b"") for m in messages)


def _stored(messages: list[Message]) -> StoredResponse:
    start = next(m for m in messages if m["type"] == "http.response.start")
    headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in start.get("headers", [])
               if k.lower() in KEPT_HEADERS]
    body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")
    return StoredResponse(start["status"], headers, body)


async def _send_stored(stored: StoredResponse, send: Send) -> None:
    headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in stored.headers]
    headers += [(b"content-length", str(len(stored.body)).encode()),
                (REPLAYED_HEADER.lower().encode(), b"true")]
    await send({"type": "http.response.start", "status": stored.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": stored.body})


class IdempotencyMiddleware:
    """ASGI middleware executing keyed mutation requests once.

    Args:
        app: The wrapped ASGI application.
        store: Where keys and responses are kept.
    """

    def __init__(self, app: ASGIApp, store: IdempotencyStore) -> None:
        self.app = app
        self.store = store

    def _key(self, scope: Scope) -> str | None:
        if scope["type"] != "http":
            return None
        raw = dict(scope.get("headers") or []).get(HEADER)
        if raw is None:
            return None
        operation = find_operation(scope["method"], scope["path"].removeprefix(API_PREFIX))
        return raw.decode("latin-1").strip() if operation and operation.idempotent else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Handle one ASGI connection scope."""
        key = self._key(scope)
        if key is None:
            await self.app(scope, receive, send)
            return
        try:
            key = str(uuid.UUID(key))
        except ValueError:
            message = f"Idempotency-Key must be a UUID, got {key[:80]!r}"
            await error_response(400, "BadRequestException", message)(scope, receive, send)
            return
        messages, body = await _read_body(receive)
        try:
            stored = await run_in_threadpool(self.store.claim, key, _fingerprint(scope, body))
        except KeyReusedError:
            message = "Idempotency-Key was already used for a different request"
            await error_response(422, "UnprocessableEntityException", message)(
                scope, receive, send)
            return
        except KeyInProgressError:
            message = "A request with this Idempotency-Key is still in progress; retry later"
            await error_response(503, "SlowDownException", message)(scope, receive, send)
            return
        if stored is not None:
            await _send_stored(stored, send)
            return
        await self._run(key, scope, replay_receive(messages, receive), send)

    async def _run(self, key: str, scope: Scope, receive: Receive, send: Send) -> None:
        sent: list[Message] = []

        async def capture(message: Message) -> None:
            sent.append(message)

        try:
            await self.app(scope, receive, capture)
        except BaseException:
            await run_in_threadpool(self.store.release, key)
            raise
        await run_in_threadpool(self.store.finish, key, _stored(sent))
        for message in sent:
            await send(message)
