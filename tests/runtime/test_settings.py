"""Settings come from the environment (docs/api.md, "Configuration") and pass `check --deploy`.

Settings are read once per process, so each case runs in a fresh interpreter.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

from threads.keys.heads import signing_key_generate

ROOT = Path(__file__).resolve().parents[2]
SHOW_SETTINGS = """
import json, django
from django.conf import settings
django.setup()
db = settings.DATABASES["default"]
print(json.dumps({
    "engine": db["ENGINE"], "name": str(db["NAME"]), "host": db.get("HOST"),
    "port": db.get("PORT"), "user": db.get("USER"), "password": db.get("PASSWORD"),
    "options": {k: v for k, v in db.get("OPTIONS", {}).items()},
    "broker": settings.CELERY_BROKER_URL,
    "transport_options": getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {}),
    "eager": settings.CELERY_TASK_ALWAYS_EAGER,
    "debug": settings.DEBUG,
    "hosts": settings.ALLOWED_HOSTS,
}))
"""


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "CELERY_", "CTXADMIN_", "DATABASE_URL"))
    }
    env.update(DJANGO_SETTINGS_MODULE="ctxadmin.settings", CTXADMIN_VAR_DIR=str(tmp_path))
    env.update(extra)
    return env


def settings_under(env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", SHOW_SETTINGS],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_defaults_need_no_service(tmp_path: Path) -> None:
    shown = settings_under(clean_env(tmp_path))
    assert shown["engine"] == "django.db.backends.sqlite3"
    assert shown["name"] == str(tmp_path / "ctxadmin.sqlite3")
    assert shown["options"]["transaction_mode"] == "IMMEDIATE"
    assert "journal_mode=WAL" in shown["options"]["init_command"]
    assert shown["broker"] == "filesystem://localhost/"
    assert shown["transport_options"]["data_folder_in"] == str(tmp_path / "celery" / "in")
    assert (tmp_path / "celery" / "in").is_dir()
    assert shown["eager"] is False


def test_database_and_broker_urls(tmp_path: Path) -> None:
    shown = settings_under(
        clean_env(
            tmp_path,
            DATABASE_URL="postgres://ctx:s3cret@db.internal:6432/ctxadmin_prod",
            CELERY_BROKER_URL="redis://queue.internal:6380/2",
            CTXADMIN_TASKS_EAGER="1",
        )
    )
    assert shown["engine"] == "django.db.backends.postgresql"
    assert (shown["host"], shown["port"], shown["name"]) == ("db.internal", 6432, "ctxadmin_prod")
    assert (shown["user"], shown["password"]) == ("ctx", "s3cret")
    assert shown["broker"] == "redis://queue.internal:6380/2"
    # With Redis: a task a killed worker took comes back after the visibility timeout.
    assert shown["transport_options"] == {"visibility_timeout": 3600}
    assert shown["eager"] is True


def test_production_needs_a_secret_key(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SHOW_SETTINGS],
        cwd=ROOT,
        env=clean_env(tmp_path, DJANGO_DEBUG="0"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "DJANGO_SECRET_KEY is required" in done.stderr


def test_check_deploy_is_clean(tmp_path: Path) -> None:
    env = clean_env(
        tmp_path,
        DJANGO_DEBUG="0",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(48)[:50],
        DJANGO_ALLOWED_HOSTS="ctxadmin.example.com,ctxadmin.internal",
        # Without these, ctxadmin.W001/W002 (tests/runtime/test_deploy_checks.py).
        CTXADMIN_CHAIN_KEY=secrets.token_urlsafe(32),
        CTXADMIN_HEADS_SIGNING_KEY=str(tmp_path / "heads.pem"),
        # Without these, ctxadmin.W003/W004 (tests/runtime/test_client_address.py).
        CTXADMIN_METRICS_TOKEN=secrets.token_urlsafe(32),
        CTXADMIN_TRUSTED_PROXIES="1",
    )
    signing_key_generate(tmp_path / "heads.pem")
    assert len(env["DJANGO_SECRET_KEY"]) == 50
    done = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues (0 silenced)." in done.stdout
    assert settings_under(env)["hosts"] == ["ctxadmin.example.com", "ctxadmin.internal"]


def test_check_deploy_is_clean_with_production_keys(tmp_path: Path) -> None:
    """As production runs it: a chain key and a signing key for chain heads (a PEM file)."""
    pem = tmp_path / "heads-signing-key.pem"
    signing_key_generate(pem)
    env = clean_env(
        tmp_path,
        DJANGO_DEBUG="0",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(48)[:50],
        DJANGO_ALLOWED_HOSTS="ctxadmin.example.com",
        CTXADMIN_CHAIN_KEY=secrets.token_hex(32),
        CTXADMIN_HEADS_SIGNING_KEY=str(pem),
        CTXADMIN_METRICS_TOKEN=secrets.token_urlsafe(32),
        CTXADMIN_TRUSTED_PROXIES="1",
    )
    done = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues (0 silenced)." in done.stdout


def _check(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_missing_multiprocess_directory_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-metrics-dir"
    done = _check(clean_env(tmp_path, PROMETHEUS_MULTIPROC_DIR=str(missing)))
    assert done.returncode != 0
    assert f"PROMETHEUS_MULTIPROC_DIR='{missing}' is not a writable directory" in done.stderr
    assert "FileNotFoundError" not in done.stderr
    assert not missing.exists()


def test_an_existing_multiprocess_directory_is_used(tmp_path: Path) -> None:
    shared = tmp_path / "metrics"
    shared.mkdir()
    done = _check(clean_env(tmp_path, PROMETHEUS_MULTIPROC_DIR=str(shared)))
    assert done.returncode == 0, done.stderr
    assert list(shared.glob("histogram_*.db"))


def test_check_deploy_warns_behind_an_untrusted_proxy_without_a_metrics_token(
    tmp_path: Path,
) -> None:
    """Production as a careless deployer starts it: keys set, but no metrics token and the
    default CTXADMIN_TRUSTED_PROXIES=0 behind the TLS proxy the settings expect."""
    pem = tmp_path / "heads.pem"
    signing_key_generate(pem)
    env = clean_env(
        tmp_path,
        DJANGO_DEBUG="0",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(48)[:50],
        DJANGO_ALLOWED_HOSTS="ctxadmin.example.com",
        CTXADMIN_CHAIN_KEY=secrets.token_hex(32),
        CTXADMIN_HEADS_SIGNING_KEY=str(pem),
    )
    done = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    out = done.stdout + done.stderr
    assert "ctxadmin.W003" in out and "ctxadmin.W004" in out
    assert "ctxadmin.W001" not in out and "ctxadmin.W002" not in out
