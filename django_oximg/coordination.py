"""A :class:`~django_oximg.core.coordination.Coordinator` on a Django cache.

With ``OXIMG["COORDINATION_CACHE"] = "default"`` and a Redis cache behind that
alias (``django.core.cache.backends.redis.RedisCache``), every process that
shares the result cache renders a hot key once. ``cache.add`` is atomic on
Redis and Memcached (``SET NX`` / ``add``); the local-memory and file caches
are not shared between processes and coordinate nothing.
"""

from __future__ import annotations

import logging
import math
import time

from django.core.cache import BaseCache

logger = logging.getLogger("django_oximg")

#: Prefix of lease keys in the Django cache.
LEASE_PREFIX = "oximg:lease:"


#: Seconds between two log lines about an unreachable coordination cache.
ERROR_LOG_INTERVAL = 60.0


class CacheCoordinator:
    """Leases as ``cache.add`` entries with a timeout.

    Coordination only saves duplicate work, so a cache that fails (Redis
    down) must not fail requests: a failed ``acquire`` grants the lease
    (this process renders, as it would without coordination) and a failed
    ``release`` is left to the lease's TTL. Cache backends raise their own
    exception types (redis, pymemcache, ...), hence the broad catch; each
    failure is logged, at most once a minute.
    """

    shared = True

    def __init__(self, cache: BaseCache) -> None:
        self.cache = cache
        self._last_error = 0.0

    def acquire(self, key: str, ttl: float) -> bool:
        try:
            return bool(self.cache.add(LEASE_PREFIX + key, 1, timeout=math.ceil(ttl)))
        except Exception as exc:  # see the class docstring
            self._log(exc)
            return True

    def release(self, key: str) -> None:
        try:
            self.cache.delete(LEASE_PREFIX + key)
        except Exception as exc:  # see the class docstring
            self._log(exc)

    def _log(self, exc: Exception) -> None:
        now = time.monotonic()
        if now - self._last_error >= ERROR_LOG_INTERVAL:
            self._last_error = now
            logger.warning("coordination cache failed, rendering without a lease: %s", exc)
