"""The chain key and a thread's genesis hash: what every chain walk and checksum starts from.

Below services and selectors, so that both (and the management commands) reach one
definition.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from threads.domain import chain


def chain_key() -> bytes | None:
    """The HMAC key for chains and checksums, or None for plain SHA-256."""
    key = settings.CTXADMIN_CHAIN_KEY
    return key.encode("utf-8") if key else None


def thread_genesis(thread_id: Any) -> str:
    """h_0 of a thread's chain under the configured key."""
    return chain.genesis_hash(str(thread_id), chain_key())
