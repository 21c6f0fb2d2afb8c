"""Bearer API-key authentication, scope authorization and per-key rate limiting.

Keys are stored as SHA-256 hashes (``api_keys.key_hash``); a presented key is hashed and
looked up by its hash, then compared with :func:`hmac.compare_digest`. ``TE_BOOTSTRAP_API_KEY``
is accepted when set (``make run`` and the tests use it). Valid hashes are cached in the
process for ``cache_ttl_sec`` (``TE_API_KEY_CACHE_TTL_SEC``, default 5 s, 0 = no cache) so
the hot path does not hit the database per request: a revoked key stops working in every
process within that time. Invalid keys are never cached; instead failed lookups are
limited per client address and in total (:class:`FailedAuthLimiter`,
``TE_FAILED_AUTH_PER_SEC`` and ``TE_FAILED_AUTH_TOTAL_PER_SEC``): past either, a key the
process does not know yet gets 429 ``RATE_LIMITED`` with ``Retry-After`` before any
query, so wrong keys cannot make the database do one query each.

Authorization is decided here and nowhere else (:func:`required_scope`, :func:`authorize`,
called by the API's middleware for every keyed route): a route's method says what it needs
(GET: ``read``; anything else: ``write``), and key administration (``/keys``...) needs
``admin`` whatever its method. The bootstrap key is ``admin``. One rule depends on the body
as well as the route (:func:`authorize_secret_templates`): writing an endpoint whose
templates reference ``{{secret.*}}`` needs ``admin``, because whoever chooses where a secret
is sent can read it (a ``write`` key could point the template at its own server); so does
replacing a config whose values such endpoints resolve (:func:`authorize_secret_config`).
"""

from __future__ import annotations

import hmac
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

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


#: Where the middleware leaves the caller's :class:`Principal` in the request context.
PRINCIPAL_CONTEXT_KEY = "te_principal"
#: The scope that may write templates referencing ``{{secret.*}}``.
SECRET_TEMPLATES_SCOPE = Scope.ADMIN


def principal_of(request_context: dict[str, Any] | None) -> Principal | None:
    """The principal the middleware authenticated for this request (None: none was)."""
    found = (request_context or {}).get(PRINCIPAL_CONTEXT_KEY)
    return found if isinstance(found, Principal) else None


def authorize_secret_templates(
    principal: Principal | None, secrets: Iterable[str], method: str, path: str
) -> None:
    """Raise Forbidden (403 INSUFFICIENT_SCOPE) when templates naming ``secrets`` are written
    by a key below ``admin`` (or by no known key: the rule fails closed).

    A template decides where a secret's value goes; a key that could choose the target could
    send the value to itself and read it there, so only an ``admin`` key may."""
    _require_secret_scope(principal, secrets, f"{method.upper()} {path} with templates that")


def authorize_secret_config(principal: Principal | None, secrets: Iterable[str], name: str) -> None:
    """Raise Forbidden (403 INSUFFICIENT_SCOPE) when config ``name``, whose values live
    endpoints send with ``secrets`` (``{{config.host}}`` in the URL of an endpoint that
    sends ``{{secret.tok}}``), is replaced by a key below ``admin``: the values can choose
    where the secrets go, as the templates can."""
    _require_secret_scope(
        principal, secrets, f"PUT /configs/{name} changes values sent by endpoints that"
    )


def _require_secret_scope(principal: Principal | None, secrets: Iterable[str], what: str) -> None:
    names = sorted(secrets)
    if not names:
        return
    if principal is not None and principal.scope.allows(SECRET_TEMPLATES_SCOPE):
        return
    scope = "unknown" if principal is None else principal.scope.value
    shown = ", ".join(f"{{{{secret.{n}}}}}" for n in names)
    raise Forbidden(
        f"This API key's scope is '{scope}'; {what} reference secrets ({shown}) needs a "
        f"'{SECRET_TEMPLATES_SCOPE.value}' key."
    )


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


#: Client addresses whose failed-lookup buckets are kept; past it the oldest is dropped
#: (the total bucket still bounds an attacker who rotates addresses).
MAX_TRACKED = 10_000


@dataclass
class FailedAuthLimiter:
    """Token buckets of failed key lookups: ``rate`` a second per client address and
    ``total_rate`` a second for the process, bursts twice as large; 0 turns one off.

    :meth:`admit` is asked before a lookup and charges nothing; :meth:`charge` takes a
    token from both buckets once the lookup failed. Valid keys never spend tokens.
    """

    rate: float
    total_rate: float
    clock: Callable[[], float] = time.monotonic
    _buckets: dict[str, tuple[float, float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def admit(self, client: str) -> None:
        """Raise :class:`RateLimited` if ``client`` or the process is out of failures."""
        now = self.clock()
        with self._lock:
            for name, rate in ((f"client:{client}", self.rate), ("total", self.total_rate)):
                tokens = self._tokens(name, rate, now)
                if rate > 0 and tokens < 1.0:
                    raise RateLimited(
                        "Too many failed authentications; retry later.",
                        retry_after_sec=max(1, int((1.0 - tokens) / rate + 0.999)),
                    )

    def charge(self, client: str) -> None:
        """Count one failed lookup against ``client`` and against the process."""
        now = self.clock()
        with self._lock:
            for name, rate in ((f"client:{client}", self.rate), ("total", self.total_rate)):
                if rate > 0:
                    tokens = self._tokens(name, rate, now)
                    self._buckets.pop(name, None)  # re-inserted last: the newest entry
                    self._buckets[name] = (tokens - 1.0, now)
            while len(self._buckets) > MAX_TRACKED:
                del self._buckets[next(iter(self._buckets))]

    def _tokens(self, name: str, rate: float, now: float) -> float:
        tokens, last = self._buckets.get(name, (rate * 2, now))
        return min(rate * 2, tokens + (now - last) * rate)


@dataclass
class Authenticator:
    """Decides whether a presented key is valid, and its scope.

    ``lookup`` answers "the scope of the active key with this hash, or None" (the database
    in production); it is only called on a cache miss, and only while ``failures`` (if
    set) admits the client.
    """

    lookup: Callable[[bytes], Scope | None]
    bootstrap_key: str | None = None
    cache_ttl_sec: float = CACHE_TTL_SEC
    clock: Callable[[], float] = time.monotonic
    failures: FailedAuthLimiter | None = None
    _valid_until: dict[bytes, tuple[float, Scope]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def authenticate(self, header: str | None, client: str = "") -> Principal:
        """Return the key's hash and scope, or raise Unauthorized (or RateLimited past the
        failed-lookup limits of ``client``, the caller's address)."""
        digest = hash_key(bearer_token(header))
        if self.bootstrap_key and hmac.compare_digest(digest, hash_key(self.bootstrap_key)):
            return Principal(digest, Scope.ADMIN)
        now = self.clock()
        with self._lock:
            until, cached = self._valid_until.get(digest, (0.0, Scope.READ))
            if until > now:
                return Principal(digest, cached)
        if self.failures is not None:
            self.failures.admit(client)
        scope = self.lookup(digest)
        if scope is None:
            if self.failures is not None:
                self.failures.charge(client)
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
