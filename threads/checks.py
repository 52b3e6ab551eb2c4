"""System checks for `check --deploy`: production without tamper evidence beyond what a
database writer could redo (docs/design.md §6.6)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.checks import Tags, Warning, register

from threads.chainkey import chain_keys


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
