"""The Ed25519 key that signs published chain heads, and the public keys that verify them
(docs/repairs.md, "Published chain heads").

Below services and selectors, like threads/keys/chain.py: the publisher signs with the private
key, every verify reads the public ones. `CTXADMIN_HEADS_SIGNING_KEY` names a PEM file; when it
is unset and DEBUG is on, a key is generated beside the heads directory on first use (and a log
line says where), so a development machine publishes without set-up. In production a missing
key is a system check warning (threads/checks.py) and nothing is published.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
    load_pem_private_key,
    load_pem_public_key,
)
from django.conf import settings

from threads.domain.heads import public_key_id

logger = logging.getLogger(__name__)

DEBUG_KEY_NAME = "chain-heads-signing-key.pem"
PUBLIC_KEY_NAME = "heads.pub"


def heads_dir() -> Path:
    return Path(settings.CTXADMIN_HEADS_DIR)


def signing_key_path() -> Path | None:
    """The configured key file; in DEBUG without one, the generated key's place."""
    configured = settings.CTXADMIN_HEADS_SIGNING_KEY
    if configured:
        return Path(configured)
    if settings.DEBUG:
        return heads_dir().parent / DEBUG_KEY_NAME
    return None


def signing_key_generate(path: Path) -> Ed25519PrivateKey:
    """Write a new private key as PEM, readable by its owner only."""
    key = Ed25519PrivateKey.generate()
    path.parent.mkdir(parents=True, exist_ok=True)
    pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as out:
        out.write(pem)
    return key


def heads_signing_key(*, create: bool = False) -> Ed25519PrivateKey | None:
    """The signing key, or None when none is configured (or, without `create`, none exists
    yet in DEBUG)."""
    path = signing_key_path()
    if path is None:
        return None
    if not path.exists():
        if not (create and not settings.CTXADMIN_HEADS_SIGNING_KEY):
            return None
        key = signing_key_generate(path)
        logger.warning(
            "generated a chain heads signing key at %s (DEBUG, no CTXADMIN_HEADS_SIGNING_KEY)",
            path,
        )
        return key
    loaded = load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(loaded, Ed25519PrivateKey):
        raise ValueError(f"{path} is not an Ed25519 private key")
    return loaded


def public_key_pem(public_key: Ed25519PublicKey) -> bytes:
    return public_key.public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)


def public_key_load(path: Path) -> Ed25519PublicKey:
    loaded = load_pem_public_key(path.read_bytes())
    if not isinstance(loaded, Ed25519PublicKey):
        raise ValueError(f"{path} is not an Ed25519 public key")
    return loaded


def heads_public_keys() -> dict[str, Ed25519PublicKey]:
    """The keys a heads line may be signed with, by key id: the configured signing key's and
    each `*.pub` written beside the heads (earlier signing keys keep verifying their lines)."""
    keys: dict[str, Ed25519PublicKey] = {}
    directory = heads_dir()
    if directory.is_dir():
        for path in sorted(directory.glob("*.pub")):
            try:
                public = public_key_load(path)
            except ValueError:
                logger.warning("%s is not an Ed25519 public key; ignored", path)
                continue
            keys[public_key_id(public)] = public
    signing = heads_signing_key()
    if signing is not None:
        keys[public_key_id(signing.public_key())] = signing.public_key()
    return keys
