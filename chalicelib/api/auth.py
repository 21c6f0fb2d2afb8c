"""Bearer API-key authentication and per-key rate limiting.

Keys are stored as SHA-256 hashes (``api_keys.key_hash``); a presented key is hashed and
looked up by its hash, then compared with :func:`hmac.compare_digest`. ``TE_BOOTSTRAP_API_KEY``
is accepted when set (``make run`` and the tests use it). Valid hashes are cached in the
process for ``cache_ttl_sec`` (``TE_API_KEY_CACHE_TTL_SEC``, default 5 s, 0 = no cache) so
the hot path does not hit the database per request: a revoked key stops working in every
process within that time. Invalid keys are never cached.
"""

from __future__ import annotations

import hmac
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from chalicelib.domain.api_keys import hash_key
from chalicelib.errors import RateLimited, Unauthorized

CACHE_TTL_SEC = 5.0


def bearer_token(header: str | None) -> str:
    if not header:
        raise Unauthorized("Missing Authorization header: use 'Authorization: Bearer <api_key>'.")
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("Authorization header must be 'Bearer <api_key>'.")
    return token.strip()


@dataclass
class Authenticator:
    """Decides whether a presented key is valid.

    ``lookup`` answers "is there an active key with this hash?" (the database in
    production); it is only called on a cache miss.
    """

    lookup: Callable[[bytes], bool]
    bootstrap_key: str | None = None
    cache_ttl_sec: float = CACHE_TTL_SEC
    clock: Callable[[], float] = time.monotonic
    _valid_until: dict[bytes, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def authenticate(self, header: str | None) -> bytes:
        """Return the key's hash (the rate limiter's identity) or raise Unauthorized."""
        digest = hash_key(bearer_token(header))
        if self.bootstrap_key and hmac.compare_digest(digest, hash_key(self.bootstrap_key)):
            return digest
        now = self.clock()
        with self._lock:
            if self._valid_until.get(digest, 0.0) > now:
                return digest
        if not self.lookup(digest):
            with self._lock:
                self._valid_until.pop(digest, None)
            raise Unauthorized("Invalid API key.")
        if self.cache_ttl_sec > 0:
            with self._lock:
                self._valid_until[digest] = now + self.cache_ttl_sec
        return digest


@dataclass
class RateLimiter:
    """Token bucket per key: ``rate`` requests/second, bursts up to ``2 * rate``."""

    rate: float
    clock: Callable[[], float] = time.monotonic
    _buckets: dict[bytes, tuple[float, float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def check(self, identity: bytes) -> None:
        if self.rate <= 0:
            return
        capacity = self.rate * 2
        now = self.clock()
        with self._lock:
            tokens, last = self._buckets.get(identity, (capacity, now))
            tokens = min(capacity, tokens + (now - last) * self.rate)
            if tokens < 1.0:
                wait = (1.0 - tokens) / self.rate
                self._buckets[identity] = (tokens, now)
                raise RateLimited(
                    f"Rate limit of {self.rate:g} requests/second exceeded.",
                    retry_after_sec=max(1, int(wait + 0.999)),
                )
            self._buckets[identity] = (tokens - 1.0, now)
