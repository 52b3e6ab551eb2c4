"""The client's address: the one notion every decision by address uses — the login throttle
(django-axes' AXES_CLIENT_IP_CALLABLE), `/metrics` access without a token, and the API rate
limit's DRF ident — honouring CTXADMIN_TRUSTED_PROXIES (docs/operations.md, "Behind a proxy").

With N trusted proxies, the entry the outermost trusted proxy appended to X-Forwarded-For is
the client; entries to its left are the client's own claims, so a client that forges the
header cannot pass for another address. With 0 (the default) the header is ignored and the
connection's address (REMOTE_ADDR) is the client: behind a proxy, that is the proxy's address
for everyone, which `ForwardedWithoutTrustedProxyMiddleware` reports at run time.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.http import HttpRequest
from prometheus_client import Counter

logger = logging.getLogger(__name__)

LOOPBACK = ("127.0.0.1", "::1")

# The headers by which a proxy says it forwarded a request. A request carrying any of them came
# through a proxy, or claims to: either way its REMOTE_ADDR is not the client's own.
FORWARDING_HEADERS = ("HTTP_X_FORWARDED_FOR", "HTTP_FORWARDED", "HTTP_X_REAL_IP")

# Registered with no registry: /metrics collects it itself, or through MultiProcessCollector.
UNTRUSTED_FORWARDED = Counter(
    "ctxadmin_untrusted_forwarded_requests",
    "Requests that arrived with X-Forwarded-For (or Forwarded) while CTXADMIN_TRUSTED_PROXIES "
    "is 0: every client behind that proxy is one address to the login lockout (this process, "
    "or all processes sharing PROMETHEUS_MULTIPROC_DIR).",
    registry=None,
)
_warned = False


def _forwarded_for(request: HttpRequest) -> list[str]:
    header = str(request.META.get("HTTP_X_FORWARDED_FOR", ""))
    return [part.strip() for part in header.split(",") if part.strip()]


def client_address(request: HttpRequest) -> str:
    """The address of the client that made `request` (see the module's docstring)."""
    proxies: int = settings.CTXADMIN_TRUSTED_PROXIES
    remote = str(request.META.get("REMOTE_ADDR", ""))
    if proxies <= 0:
        return remote
    forwarded = _forwarded_for(request)
    if len(forwarded) < proxies:
        return remote  # not through the proxies: nobody vouches for the header
    return forwarded[-proxies]


def came_through_proxy(request: HttpRequest) -> bool:
    """Whether `request` carries a proxy's forwarding header (whatever CTXADMIN_TRUSTED_PROXIES
    says: with 0, a proxy on this machine makes every request's REMOTE_ADDR loopback)."""
    return any(request.META.get(header) for header in FORWARDING_HEADERS)


def is_local(request: HttpRequest) -> bool:
    """A request made on this machine and not forwarded by a proxy: what `/metrics` answers
    without a token."""
    return not came_through_proxy(request) and client_address(request) in LOOPBACK


def forwarded_untrusted_note(request: HttpRequest) -> None:
    """Count (and log, once per process) a request a proxy forwarded while no proxy is trusted:
    `check --deploy` cannot see requests, so this is where that setup shows."""
    global _warned
    if settings.CTXADMIN_TRUSTED_PROXIES > 0 or not came_through_proxy(request):
        return
    UNTRUSTED_FORWARDED.inc()
    if not _warned:
        _warned = True
        logger.warning(
            "A request arrived with a proxy's X-Forwarded-For (or Forwarded) header but "
            "CTXADMIN_TRUSTED_PROXIES is 0: every client is %s to the login lockout, so five "
            "wrong passwords lock a user out for everyone. Set CTXADMIN_TRUSTED_PROXIES to the "
            "number of proxies in front of ctxadmin (docs/operations.md).",
            request.META.get("REMOTE_ADDR", "the proxy's address"),
        )
