"""ASGI middleware limiting request body sizes."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from catalog_api.error_responses import error_response


class BodySizeLimitMiddleware:
    """Reject requests whose body exceeds a size limit with a 413 ``ErrorModel``.

    Bodies with a ``Content-Length`` are checked up front; chunked bodies are buffered up
    to the limit before the application sees them.

    Args:
        app: The wrapped ASGI application.
        max_body_bytes: Largest accepted body.
    """

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Handle one ASGI connection scope."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if length is not None:
            if not length.isdigit() or int(length) > self.max_body_bytes:
                await self._reject(scope, receive, send)
                return
            await self.app(scope, receive, send)
            return
        if headers.get(b"transfer-encoding", b"").lower() != b"chunked":
            await self.app(scope, receive, send)
            return
        messages = await self._buffer(receive)
        if messages is None:
            await self._reject(scope, receive, send)
            return
        await self.app(scope, replay_receive(messages, receive), send)

    async def _buffer(self, receive: Receive) -> list[Message] | None:
        messages: list[Message] = []
        size = 0
        while True:
            message = await receive()
            messages.append(message)
            size += len(message.get("body", b""))
            if size > self.max_body_bytes:
                return None
            if message["type"] != "http.request" or not message.get("more_body", False):
                return messages

    async def _reject(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = f"Request body larger than {self.max_body_bytes} bytes"
        response = error_response(413, "PayloadTooLargeException", message)
        await response(scope, receive, send)


def replay_receive(messages: list[Message], receive: Receive) -> Receive:
    """Return a ``receive`` that yields already-read messages first, then reads on."""
    pending = list(messages)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
