"""Throttling of wrong client secrets at the token endpoint (moving windows from ``limits``).

Every wrong secret counts against the caller's address, and against the pair of that
address and the client id it named. Once either has ``max_failures`` failures within
``window_s`` seconds, the token endpoint answers 429 with ``Retry-After`` (RFC 6585) without
checking the secret, until the oldest failure leaves the window. Keying on the address keeps
a stranger from locking a client out everywhere by guessing its secret; the per-address
count bounds the guesses one address makes across client ids. A right secret does not clear
the count: a guesser that also holds one valid secret gains nothing.
"""

from __future__ import annotations

import math
import time

from limits import RateLimitItemPerSecond
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter

from catalog_api.security.settings import LockoutSettings

_NAMESPACE = "token-failures"


class FailureLockout:
    """Counts wrong secrets per client id and per address in moving windows.

    Args:
        settings: ``max_failures`` per ``window_s`` seconds.
    """

    def __init__(self, settings: LockoutSettings) -> None:
        self._limit = RateLimitItemPerSecond(settings.max_failures, settings.window_s)
        self._limiter = MovingWindowRateLimiter(MemoryStorage())

    def retry_after_s(self, client_id: str | None, address: str | None) -> int | None:
        """Seconds until the client id and the address may try again; None when they may now."""
        waits = []
        for key in self._keys(client_id, address):
            if not self._limiter.test(self._limit, *key):
                reset = self._limiter.get_window_stats(self._limit, *key).reset_time
                waits.append(max(1, math.ceil(reset - time.time())))
        return max(waits) if waits else None

    def record_failure(self, client_id: str | None, address: str | None) -> None:
        """Count one wrong secret against the client id and the address."""
        for key in self._keys(client_id, address):
            self._limiter.hit(self._limit, *key)

    @staticmethod
    def _keys(client_id: str | None, address: str | None) -> list[tuple[str, ...]]:
        where = address or "unknown"
        return [(_NAMESPACE, "address", where), (_NAMESPACE, "client", client_id or "", where)]
