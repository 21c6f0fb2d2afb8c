"""Bearer API-key authentication, scope authorization and per-key rate limiting.

Keys are stored as SHA-256 hashes (``api_keys.key_hash``); a presented key is hashed and
looked up by its hash, then compared with :func:`hmac.compare_digest`. ``TE_BOOTSTRAP_API_KEY``
is accepted when set (``make run`` and the tests use it). Valid hashes are cached in the
process for ``cache_ttl_sec`` (``TE_API_KEY_CACHE_TTL_SEC``, default 5 s, 0 = no cache) so
the hot path does not hit the database per request: a revoked key stops working in every
process within that time. Invalid keys are never cached.

Authorization is decided here and nowhere else (:func:`required_scope`, :func:`authorize`,
called by the API's middleware for every keyed route): a route's method says what it needs
(GET: ``read``; anything else: ``write``), and key administration (``/keys``...) needs
``admin`` whatever its method. The bootstrap key is ``admin``.
"""

from __future__ import annotations

import hmac
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from chalicelib.domain.api_keys import Scope, hash_key
from chalicelib.errors import Forbidden, RateLimited, Unauthorized

CACHE_TTL_SEC = 5.0
#: Methods that read: a ``read`` key may call them.
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: Key administration: every route at or under it needs an ``admin`` key, whatever its method.
KEY_ROUTES = "/keys"


def required_scope(method: str, path: str) -> Scope:
    """The scope a route needs: ``admin`` for key administration, else by its method."""
    if path == KEY_ROUTES or path.startswith(KEY_ROUTES + "/"):
        return Scope.ADMIN
    return Scope.READ if method.upper() in READ_METHODS else Scope.WRITE


@dataclass(frozen=True)
class Principal:
    """Who is calling: the key's hash (the rate limiter's identity) and its scope."""

    key_hash: bytes
    scope: Scope


def authorize(principal: Principal, method: str, path: str) -> None:
    """Raise Forbidden (403 INSUFFICIENT_SCOPE) unless the key's scope allows the route."""
    needed = required_scope(method, path)
    if not principal.scope.allows(needed):
        raise Forbidden(
            f"This API key's scope is '{principal.scope.value}'; {method.upper()} {path} "
            f"needs a '{needed.value}' key."
        )


def bearer_token(header: str | None) -> str:
    if not header:
        raise Unauthorized("Missing Authorization header: use 'Authorization: Bearer <api_key>'.")
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("Authorization header must be 'Bearer <api_key>'.")
    return token.strip()


@dataclass
class Authenticator:
    """Decides whether a presented key is valid, and its scope.

    ``lookup`` answers "the scope of the active key with this hash, or None" (the database
    in production); it is only called on a cache miss.
    """

    lookup: Callable[[bytes], Scope | None]
    bootstrap_key: str | None = None
    cache_ttl_sec: float = CACHE_TTL_SEC
    clock: Callable[[], float] = time.monotonic
    _valid_until: dict[bytes, tuple[float, Scope]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def authenticate(self, header: str | None) -> Principal:
        """Return the key's hash and scope, or raise Unauthorized."""
        digest = hash_key(bearer_token(header))
        if self.bootstrap_key and hmac.compare_digest(digest, hash_key(self.bootstrap_key)):
            return Principal(digest, Scope.ADMIN)
        now = self.clock()
        with self._lock:
            until, cached = self._valid_until.get(digest, (0.0, Scope.READ))
            if until > now:
                return Principal(digest, cached)
        scope = self.lookup(digest)
        if scope is None:
            with self._lock:
                self._valid_until.pop(digest, None)
            raise Unauthorized("Invalid API key.")
        if self.cache_ttl_sec > 0:
            with self._lock:
                self._valid_until[digest] = (now + self.cache_ttl_sec, scope)
        return Principal(digest, scope)


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
