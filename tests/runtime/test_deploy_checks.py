"""`check --deploy` warns when production runs without tamper evidence beyond the database."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from django.core.management import call_command

from threads.checks import chain_keys_check
from threads.keys.heads import signing_key_generate


def _ids(settings: Any) -> list[str]:
    return [str(warning.id) for warning in chain_keys_check()]


def test_production_without_keys_is_warned(settings: Any) -> None:
    settings.DEBUG = False
    settings.CTXADMIN_CHAIN_KEY = ""
    settings.CTXADMIN_CHAIN_KEYS = ""
    settings.CTXADMIN_HEADS_SIGNING_KEY = ""
    assert _ids(settings) == ["ctxadmin.W001", "ctxadmin.W002"]
    out = io.StringIO()
    call_command("check", "--deploy", stdout=out, stderr=out)
    assert "ctxadmin.W001" in out.getvalue() and "ctxadmin.W002" in out.getvalue()


def test_keys_configured_or_debug_are_quiet(settings: Any, tmp_path: Path) -> None:
    settings.DEBUG = False
    settings.CTXADMIN_CHAIN_KEYS = "k1:secret"
    key = tmp_path / "heads.pem"
    signing_key_generate(key)
    settings.CTXADMIN_HEADS_SIGNING_KEY = str(key)
    assert _ids(settings) == []
    settings.CTXADMIN_HEADS_SIGNING_KEY = str(tmp_path / "missing.pem")
    assert _ids(settings) == ["ctxadmin.W002"]
    settings.DEBUG = True
    settings.CTXADMIN_CHAIN_KEYS = ""
    assert _ids(settings) == []
