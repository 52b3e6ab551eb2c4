"""System checks for `check --deploy`: production without tamper evidence beyond what a
database writer could redo (docs/repairs.md, "Published chain heads"), and production whose idea of
the client's address can be fooled (docs/operations.md, "Behind a proxy")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.checks import Tags, Warning, register

from threads.keys.chain import chain_keys


@register(Tags.security, deploy=True)
def chain_keys_check(app_configs: Any = None, **kwargs: Any) -> list[Warning]:
    if settings.DEBUG:
        return []
    found: list[Warning] = []
    if not chain_keys():
        found.append(
            Warning(
                "No chain key: chains are plain SHA-256, which anyone who can write the "
                "database can recompute.",
                hint="Set CTXADMIN_CHAIN_KEY (or CTXADMIN_CHAIN_KEYS).",
                id="ctxadmin.W001",
            )
        )
    signing = settings.CTXADMIN_HEADS_SIGNING_KEY
    if not signing or not Path(signing).is_file():
        found.append(
            Warning(
                "No chain heads signing key: no heads are published outside the database, so "
                "a truncated or recomputed log goes unnoticed.",
                hint="Set CTXADMIN_HEADS_SIGNING_KEY to an Ed25519 private key (PEM) file.",
                id="ctxadmin.W002",
            )
        )
    return found


@register(Tags.security, deploy=True)
def client_address_check(app_configs: Any = None, **kwargs: Any) -> list[Warning]:
    """Production that answers `/metrics` by address alone, or that stands behind a proxy (TLS
    ends at the proxy: SECURE_PROXY_SSL_HEADER) without trusting it, so that every client is
    the proxy's address to the login lockout (threads/client_address.py)."""
    if settings.DEBUG:
        return []
    found: list[Warning] = []
    if not settings.CTXADMIN_METRICS_TOKEN:
        found.append(
            Warning(
                "No metrics token: /metrics answers any request from loopback that no proxy "
                "forwarded, with no credential.",
                hint="Set CTXADMIN_METRICS_TOKEN and give Prometheus the token.",
                id="ctxadmin.W003",
            )
        )
    if settings.SECURE_PROXY_SSL_HEADER and settings.CTXADMIN_TRUSTED_PROXIES <= 0:
        found.append(
            Warning(
                "SECURE_PROXY_SSL_HEADER says a proxy is in front, but CTXADMIN_TRUSTED_PROXIES "
                "is 0: every client is the proxy's address, so five wrong passwords lock a user "
                "out for everyone.",
                hint="Set CTXADMIN_TRUSTED_PROXIES to the number of proxies in front of ctxadmin "
                "that append to X-Forwarded-For.",
                id="ctxadmin.W004",
            )
        )
    return found
