"""Chain keys and a thread's genesis hash: what every chain walk and checksum starts from.

Keys have ids (docs/event-log.md, "Hash chain and canonical JSON"). `CTXADMIN_CHAIN_KEYS`
("id1:key1,id2:key2", the first is current) lists every key that may verify a chain;
`CTXADMIN_CHAIN_KEY` is a single key with the id `k0`. A thread records the id of the key its chain
was started with (`chain_key_id`) and is chained, checksummed and verified with that key for its
whole life: a chain never changes key, because that would mean re-hashing an append-only log. The
empty id is every thread made before keys had ids: it means `k0` when one is configured, plain
SHA-256 otherwise — exactly what such a chain was hashed with.

Below services and selectors, so that both (and the management commands) reach one
definition.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from threads.domain import chain
from threads.domain.errors import Conflict

LEGACY_KEY_ID = "k0"


class ChainKeyUnknown(Conflict):
    """A thread's chain was started with a key that is no longer configured."""

    code = "chain_key_unknown"

    def __init__(self, key_id: str) -> None:
        super().__init__(
            f"the chain key {key_id!r} this thread was started with is not configured "
            "(list it in CTXADMIN_CHAIN_KEYS to verify the thread)"
        )
        self.key_id = key_id


def chain_keys() -> dict[str, bytes]:
    """Every configured key by id, the current one first."""
    keys: dict[str, bytes] = {}
    listed = getattr(settings, "CTXADMIN_CHAIN_KEYS", "") or ""
    for item in listed.split(","):
        key_id, sep, secret = item.strip().partition(":")
        if sep and key_id and secret:
            keys.setdefault(key_id, secret.encode("utf-8"))
    single = settings.CTXADMIN_CHAIN_KEY
    if single:
        keys.setdefault(LEGACY_KEY_ID, single.encode("utf-8"))
    return keys


def current_chain_key_id() -> str:
    """The id new threads chain with: the first listed key, or '' for plain SHA-256."""
    return next(iter(chain_keys()), "")


def chain_key(key_id: str = "") -> bytes | None:
    """The HMAC key with this id, or None for plain SHA-256; raises ChainKeyUnknown for an id
    that is not configured."""
    keys = chain_keys()
    if not key_id:
        return keys.get(LEGACY_KEY_ID)
    if key_id not in keys:
        raise ChainKeyUnknown(key_id)
    return keys[key_id]


def thread_key(thread: Any) -> bytes | None:
    """The key of a thread's own chain (its `chain_key_id`)."""
    return chain_key(thread.chain_key_id)


def thread_genesis(thread_id: Any, key_id: str = "") -> str:
    """h_0 of a thread's chain under the key with this id."""
    return chain.genesis_hash(str(thread_id), chain_key(key_id))
