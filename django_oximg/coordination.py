"""A :class:`~django_oximg.core.coordination.Coordinator` on a Django cache.

With ``OXIMG["COORDINATION_CACHE"] = "default"`` and a Redis cache behind that
alias (``django.core.cache.backends.redis.RedisCache``), every process that
shares the result cache renders a hot key once. ``cache.add`` is atomic on
Redis and Memcached (``SET NX`` / ``add``); the local-memory and file caches
are not shared between processes and coordinate nothing.
"""

from __future__ import annotations

import math

from django.core.cache import BaseCache

#: Prefix of lease keys in the Django cache.
LEASE_PREFIX = "oximg:lease:"


class CacheCoordinator:
    """Leases as ``cache.add`` entries with a timeout."""

    def __init__(self, cache: BaseCache) -> None:
        self.cache = cache

    def acquire(self, key: str, ttl: float) -> bool:
        return bool(self.cache.add(LEASE_PREFIX + key, 1, timeout=math.ceil(ttl)))

    def release(self, key: str) -> None:
        self.cache.delete(LEASE_PREFIX + key)
