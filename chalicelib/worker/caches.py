"""Per-process TTL caches for configs and decrypted secrets (thread-safe, injectable clock).

The spec's DashMap caches: configs live ``TE_CONFIG_CACHE_TTL_SEC`` (60 s), decrypted
secrets ``TE_SECRET_CACHE_TTL_SEC`` (300 s). A config update or a secret rotation therefore
reaches new executions within one TTL. Loads happen outside the lock, so a slow database
read never blocks threads whose entries are cached; two threads missing the same key at
once may both load it, which is harmless. A secret's entry also holds the value its last
rotation replaced, for signing during the rotation window (:mod:`chalicelib.domain.signing`):
the same single read serves templates and signatures.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

from chalicelib.crypto import SecretBox
from chalicelib.errors import SecretKeyError
from chalicelib.worker.store import StoredSecret, WorkerStore

V = TypeVar("V")


class TtlCache(Generic[V]):
    """Values that expire ``ttl`` seconds after they were stored."""

    def __init__(self, ttl: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[float, V]] = {}

    def get(self, key: str) -> V | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if entry[0] <= self._clock():
                del self._entries[key]
                return None
            return entry[1]

    def put(self, key: str, value: V) -> None:
        with self._lock:
            self._entries[key] = (self._clock() + self._ttl, value)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


class ConfigCache:
    """Config values by name; a missing config reads as None and is not cached."""

    def __init__(
        self, store: WorkerStore, ttl: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._store = store
        self._cache: TtlCache[dict[str, Any]] = TtlCache(ttl, clock)

    def get(self, name: str) -> dict[str, Any] | None:
        cached = self._cache.get(name)
        if cached is not None:
            return cached
        values = self._store.config_values(name)
        if values is not None:
            self._cache.put(name, values)
        return values


@dataclass(frozen=True)
class CachedSecret:
    """A decrypted secret; ``previous`` is the value a rotation replaced (kept for
    signing secrets only, see ``catalogue_secret_update``), ``rotated_at`` when."""

    value: str = field(repr=False)
    previous: str | None = field(default=None, repr=False)
    rotated_at: datetime | None = None


class SecretCache:
    """Decrypted secret values by name; names not in the table are simply absent."""

    def __init__(
        self,
        store: WorkerStore,
        box: Callable[[], SecretBox],
        ttl: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._box = box
        self._cache: TtlCache[CachedSecret] = TtlCache(ttl, clock)

    def get_many(self, names: Iterable[str]) -> Mapping[str, str]:
        """The values of ``names`` that exist (one query for all the missing ones)."""
        return {name: entry.value for name, entry in self.entries(names).items()}

    def entries(self, names: Iterable[str]) -> Mapping[str, CachedSecret]:
        """The secrets of ``names`` that exist (one query for all the missing ones)."""
        found: dict[str, CachedSecret] = {}
        missing = []
        for name in set(names):
            entry = self._cache.get(name)
            if entry is None:
                missing.append(name)
            else:
                found[name] = entry
        if missing:
            box = self._box()
            for stored in self._store.secrets(missing):
                entry = _decrypted(box, stored)
                self._cache.put(stored.name, entry)
                found[stored.name] = entry
        return found


def _decrypted(box: SecretBox, stored: StoredSecret) -> CachedSecret:
    """The secret decrypted. A previous value that no longer decrypts (its encryption key
    was retired) is dropped: it only ever adds a second signature."""
    name, previous = stored.name, stored.previous_encrypted_value
    value = box.decrypt(name, stored.encrypted_value)
    try:
        old = None if previous is None else box.decrypt(name, previous)
    except SecretKeyError:
        old = None
    return CachedSecret(value=value, previous=old, rotated_at=stored.rotated_at)
