"""Dashboard reads from a PostgreSQL read replica (docs/scale.md, "Past one machine"), when one is
configured.

`CTXADMIN_REPLICA_URL` names a streaming replica of the primary; settings then add it as the
`replica` database, this router and this middleware. Only the dashboard's GET pages read from
it: they show what an operator looks at, a replica's lag (typically milliseconds) is invisible
there, and they are the expensive reads (the thread list's per-thread flags, search, charts).
Everything else stays on the primary:
- every write, and every read inside a transaction (a lock, a compare-and-swap, a read that
  decides a write) — the primary's snapshot is the one that counts;
- the API, for agents: an agent reads its working context right after its append, and must
  see it;
- the dashboard's POSTs (fold now, approve, rollback), and the page each redirects to for
  `CTXADMIN_REPLICA_PIN_SECONDS` after it, so that a person sees what they just did.
Migrations run on the primary only; the replica follows it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from django.conf import settings
from django.db import connections
from django.http import HttpRequest, HttpResponse

REPLICA = "replica"
PIN_COOKIE = "ctxadmin_primary_until"

# True while a request the replica may serve is being handled.
_replica_reads: ContextVar[bool] = ContextVar("ctxadmin_replica_reads", default=False)


class ReplicaRouter:
    """Reads go to the replica only during a request the middleware marked, and only outside
    a transaction on the primary."""

    def db_for_read(self, model: Any, **hints: Any) -> str | None:
        if not _replica_reads.get() or REPLICA not in settings.DATABASES:
            return None
        if connections["default"].in_atomic_block:
            return None
        return REPLICA

    def db_for_write(self, model: Any, **hints: Any) -> str | None:
        return "default"

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool:
        return True  # one database, two copies of it

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool:
        return db == "default"


def _dashboard_read(request: HttpRequest) -> bool:
    if request.method not in ("GET", "HEAD") or request.path.startswith("/api/"):
        return False
    pinned = request.COOKIES.get(PIN_COOKIE, "")
    return not (pinned.isdigit() and int(pinned) > time.time())


class ReplicaReadsMiddleware:
    """Marks the dashboard's GET pages as served by the replica; after a dashboard POST,
    pins the person's next pages to the primary for a few seconds (a cookie)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        token = _replica_reads.set(_dashboard_read(request))
        try:
            response = self.get_response(request)
        finally:
            _replica_reads.reset(token)
        if request.method == "POST" and not request.path.startswith("/api/"):
            seconds = settings.CTXADMIN_REPLICA_PIN_SECONDS
            response.set_cookie(
                PIN_COOKIE,
                str(int(time.time()) + seconds),
                max_age=seconds,
                httponly=True,
                samesite="Lax",
                secure=request.is_secure(),
            )
        return response
