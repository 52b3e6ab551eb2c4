"""The read replica's fallback counter (docs/operations.md, "A read replica").

ctxadmin/db_router.py serves a dashboard page from the primary when the replica is unreachable
or lags past `CTXADMIN_REPLICA_MAX_LAG_SECONDS`, and adds one here with the reason; `/metrics`
reports it (threads/views/metrics.py). It lives below the views so both can import it.
"""

from __future__ import annotations

from prometheus_client import Counter

UNAVAILABLE = "unavailable"
LAGGING = "lagging"

# Registered with no registry: /metrics collects it itself, or through MultiProcessCollector.
REPLICA_FALLBACKS = Counter(
    "ctxadmin_replica_fallback_pages",
    "Dashboard pages served from the primary because the read replica was unavailable "
    "(unreachable, or failing the page) or lagging past CTXADMIN_REPLICA_MAX_LAG_SECONDS "
    "(this process, or all processes sharing PROMETHEUS_MULTIPROC_DIR).",
    ["reason"],
    registry=None,
)
