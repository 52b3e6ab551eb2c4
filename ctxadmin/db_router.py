"""Dashboard reads from a PostgreSQL read replica (docs/scale.md, "Past one machine"), when one is
configured; a replica that is down or behind never costs a page (docs/operations.md,
"A read replica").

`CTXADMIN_REPLICA_URL` names a streaming replica of the primary; settings then add it as the
`replica` database, this router and this middleware. Only the dashboard's GET pages read from
it: they show what an operator looks at, a replica's lag (typically milliseconds) is invisible
there, and they are the expensive reads (the thread list's per-thread flags, search, charts).
Everything else stays on the primary:
- every write, and every read inside a transaction (a lock, a compare-and-swap, a read that
  decides a write) — the primary's snapshot is the one that counts;
- sessions and authentication (`PRIMARY_APPS`: sessions, auth, axes, contenttypes, admin) —
  what the request machinery reads before the view: a session made a moment ago on the primary
  is not yet on a lagging replica, and reading it there would sign the person out;
- the API, for agents: an agent reads its working context right after its append, and must
  see it;
- the dashboard's POSTs (fold now, approve, rollback), and the page each redirects to for
  `CTXADMIN_REPLICA_PIN_SECONDS` after it, so that a person sees what they just did.
Migrations run on the primary only; the replica follows it.

Failing safe. Before a page reads the replica, the middleware asks `replica_unusable()`: the
replica must answer (its connection has a `connect_timeout` of a couple of seconds, so a
blackholed host costs that, not a hung page) and be at most `CTXADMIN_REPLICA_MAX_LAG_SECONDS`
behind (`now() - pg_last_xact_replay_timestamp()` on the replica, 0 when it has replayed all it
received). The verdict is kept for `CTXADMIN_REPLICA_CHECK_SECONDS` per process. Otherwise the
page reads the primary, and `ctxadmin_replica_fallback_pages_total{reason=...}`
(threads/database/replica.py) counts it.

Two faults a check made before the page cannot see are handled after it, by serving the same
request again on the primary — safe because only GET and HEAD pages read the replica, and
those change nothing:
- a page that fails with a server error (the replica went away mid-page): the replica is
  checked again at once, and if it is unusable the page is served from the primary;
- a page that answers 404 while reading the replica: the object may be younger than the
  replica's copy (a thread created a second ago), so the primary decides. This is done here
  rather than in the selectors' "get or 404" helpers because it covers every lookup a view
  makes — the thread, its events, a version, an approval — without each helper knowing about
  replicas, and a real 404 costs only one more request on the primary.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connections
from django.http import HttpRequest, HttpResponse

from threads.database.replica import LAGGING, REPLICA_FALLBACKS, UNAVAILABLE

logger = logging.getLogger(__name__)

REPLICA = "replica"
PIN_COOKIE = "ctxadmin_primary_until"
# What the request machinery reads before a view runs: always from the primary.
PRIMARY_APPS = frozenset({"sessions", "auth", "axes", "contenttypes", "admin"})

# True while a request the replica may serve is being handled.
_replica_reads: ContextVar[bool] = ContextVar("ctxadmin_replica_reads", default=False)

# How far behind the replica is, in seconds: 0 when it has replayed all the WAL it received.
# (A replica cut off from its primary looks caught up here; docs/operations.md's lag alert,
# read on the primary, covers that case.)
LAG_SQL = """
SELECT CASE
    WHEN NOT pg_is_in_recovery() THEN 0
    WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0
    ELSE COALESCE(EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp()), 0)
END
"""

# This process's last verdict: (monotonic time of the check, None or the reason not to read).
_verdict: tuple[float, str | None] | None = None


class ReplicaRouter:
    """Reads go to the replica only during a request the middleware marked, only outside
    a transaction on the primary, and never for sessions and authentication."""

    def db_for_read(self, model: Any, **hints: Any) -> str | None:
        if not _replica_reads.get() or REPLICA not in settings.DATABASES:
            return None
        if model._meta.app_label in PRIMARY_APPS:
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


def replica_lag_seconds() -> float:
    """Ask the replica how far behind it is; raises DatabaseError if it does not answer."""
    connection = connections[REPLICA]
    if connection.vendor != "postgresql":
        return 0.0  # a stand-in (tests): nothing to measure
    with connection.cursor() as cursor:
        cursor.execute(LAG_SQL)
        row = cursor.fetchone()
    return float(row[0] or 0) if row else 0.0


def _check() -> str | None:
    try:
        lag = replica_lag_seconds()
    except DatabaseError as exc:
        logger.warning("read replica unavailable, pages read the primary: %s", exc)
        try:
            connections[REPLICA].close()  # the next check connects afresh
        except DatabaseError:
            pass
        return UNAVAILABLE
    if lag > settings.CTXADMIN_REPLICA_MAX_LAG_SECONDS:
        logger.warning("read replica %.1f s behind, pages read the primary", lag)
        return LAGGING
    return None


def replica_unusable(*, fresh: bool = False) -> str | None:
    """None if pages may read the replica; else why not (`unavailable` or `lagging`).
    Checked at most once per CTXADMIN_REPLICA_CHECK_SECONDS in this process, unless `fresh`."""
    global _verdict
    now = time.monotonic()
    if (
        not fresh
        and _verdict is not None
        and now - _verdict[0] < settings.CTXADMIN_REPLICA_CHECK_SECONDS
    ):
        return _verdict[1]
    reason = _check()
    _verdict = (time.monotonic(), reason)
    return reason


def replica_verdict_forget() -> None:
    """Drop this process's cached verdict: the next page checks the replica again."""
    global _verdict
    _verdict = None


def _dashboard_read(request: HttpRequest) -> bool:
    if request.method not in ("GET", "HEAD") or request.path.startswith("/api/"):
        return False
    if REPLICA not in settings.DATABASES:
        return False
    pinned = request.COOKIES.get(PIN_COOKIE, "")
    return not (pinned.isdigit() and int(pinned) > time.time())


class ReplicaReadsMiddleware:
    """Marks the dashboard's GET pages as served by the replica while it is usable, and serves
    a page again from the primary when the replica failed it or did not find its object;
    after a dashboard POST, pins the person's next pages to the primary for a few seconds (a
    cookie)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def _serve(self, request: HttpRequest, *, replica: bool) -> HttpResponse:
        token = _replica_reads.set(replica)
        try:
            return self.get_response(request)
        finally:
            _replica_reads.reset(token)

    def __call__(self, request: HttpRequest) -> HttpResponse:
        replica = _dashboard_read(request)
        if replica:
            reason = replica_unusable()
            if reason is not None:
                REPLICA_FALLBACKS.labels(reason=reason).inc()
                replica = False
        response = self._serve(request, replica=replica)
        if replica and response.status_code >= 500:
            reason = replica_unusable(fresh=True)
            if reason is not None:
                REPLICA_FALLBACKS.labels(reason=reason).inc()
                response = self._serve(request, replica=False)
        elif replica and response.status_code == 404:
            response = self._serve(request, replica=False)
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
