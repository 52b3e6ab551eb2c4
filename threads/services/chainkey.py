from django.conf import settings


def chain_key() -> bytes | None:
    """The HMAC key for chains and checksums, or None for plain SHA-256."""
    key = settings.CTXADMIN_CHAIN_KEY
    return key.encode("utf-8") if key else None
