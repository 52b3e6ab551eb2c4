"""API rate limits (docs/api.md, "Codes"): requests per API key, and per person for session calls.

The rate is CTXADMIN_API_RATE ("1200/min"; 0 or empty: no limit), read per request so a test or
a settings change takes effect without a restart. Counts live in Django's cache: with the
local-memory default every worker process counts for itself; CTXADMIN_CACHE_URL (Redis) makes
one count across workers. Over the limit, DRF raises Throttled, which the exception handler
turns into 429 `rate_limited` with Retry-After.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from threads.api.auth import agent_of
from threads.client_address import client_address


class ApiRateThrottle(SimpleRateThrottle):
    scope = "api"

    def get_rate(self) -> str | None:
        rate = str(getattr(settings, "CTXADMIN_API_RATE", "") or "").strip()
        return None if rate in ("", "0") else rate

    def get_ident(self, request: Request) -> str:
        # DRF's own reads X-Forwarded-For by NUM_PROXIES; ctxadmin has one notion of the
        # client's address (threads/client_address.py).
        return client_address(request)

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        agent = agent_of(request)
        if agent is not None:
            ident = f"key-{agent.key.pk}"
        elif request.user is not None and request.user.is_authenticated:
            ident = f"user-{request.user.pk}"
        else:
            return None  # refused by authentication anyway; logins have their own throttle
        return self.cache_format % {"scope": self.scope, "ident": ident}
