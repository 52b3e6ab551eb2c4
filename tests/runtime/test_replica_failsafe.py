"""A read replica that fails safe (ctxadmin/db_router.py; docs/operations.md, "A read replica"),
against a real streaming replica of the test cluster.

A session fixture builds it once this module runs and the test database exists
(`pg_basebackup -R` from the primary into a scratch folder, started on a free loopback port),
and stops it at the end; each test points a `replica` database alias at it. Only on the
PostgreSQL run, with the primary on this machine. The tests commit (transaction=True): a test's
own transaction is never replicated.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.conf import settings as django_settings
from django.db import connection, connections
from django.test import Client, override_settings

from ctxadmin.db_router import REPLICA, replica_verdict_forget
from tests import factories as f
from threads.database.replica import REPLICA_FALLBACKS

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True, databases=["default", REPLICA]),
]

PRIMARY = django_settings.DATABASES["default"]


def _pg_bin() -> Path | None:
    candidates = []
    if shutil.which("pg_config"):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True)
        candidates.append(Path(out.stdout.strip()))
    candidates.append(Path("/usr/lib/postgresql/15/bin"))
    for path in candidates:
        if (path / "pg_basebackup").exists() and (path / "pg_ctl").exists():
            return path
    return None


if PRIMARY["ENGINE"] != "django.db.backends.postgresql":
    pytest.skip(
        "needs the PostgreSQL run (DATABASE_URL): a streaming replica of it",
        allow_module_level=True,
    )
if str(PRIMARY.get("HOST", "")) not in ("127.0.0.1", "localhost", "::1", ""):
    pytest.skip("needs the primary on this machine, to build its replica", allow_module_level=True)
if _pg_bin() is None:
    pytest.skip("needs PostgreSQL's pg_basebackup and pg_ctl", allow_module_level=True)


def _as_postgres(args: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: the replica is the postgres account's then."""
    return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else args


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Standby:
    def __init__(self, folder: Path, port: int, max_connections: str) -> None:
        self.bin = _pg_bin()
        self.folder, self.data, self.port = folder, folder / "data", port
        self.max_connections = max_connections

    def ctl(self, *args: str) -> None:
        assert self.bin is not None
        subprocess.run(
            _as_postgres([str(self.bin / "pg_ctl"), "-D", str(self.data), *args]),
            check=True,
            capture_output=True,
        )

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off "
            f"-c max_connections={self.max_connections} -c hot_standby=on"
        )
        self.ctl("-l", str(self.folder / "server.log"), "-w", "-t", "60", "-o", options, "start")

    def stop(self) -> None:
        self.ctl("-m", "fast", "-w", "stop")

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()

    def sql(self, query: str) -> Any:
        with psycopg.connect(
            host="127.0.0.1",
            port=self.port,
            user=PRIMARY["USER"] or "postgres",
            dbname="postgres",
            autocommit=True,
            connect_timeout=5,
        ) as conn:
            row = conn.execute(query).fetchone()
            return row[0] if row else None

    def caught_up(self) -> None:
        """Wait until the replica has replayed all the primary has written."""
        with connection.cursor() as cursor:
            # The insert position: with synchronous_commit off, a commit is written a little later.
            cursor.execute("SELECT pg_current_wal_insert_lsn()::text")
            target = cursor.fetchone()[0]
        deadline = time.monotonic() + 30
        while not self.sql(f"SELECT pg_last_wal_replay_lsn() >= '{target}'::pg_lsn"):
            assert time.monotonic() < deadline, "the replica did not catch up in 30 s"
            time.sleep(0.05)


@pytest.fixture(scope="session")
def standby(django_db_setup: Any, django_db_blocker: Any) -> Iterator[Standby]:
    bin_dir = _pg_bin()
    assert bin_dir is not None
    folder = Path(tempfile.mkdtemp(prefix="ctxadmin-replica-"))
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute("SHOW max_connections")
        max_connections = cursor.fetchone()[0]
    replica = Standby(folder, _free_port(), max_connections)
    subprocess.run(
        _as_postgres(
            [
                str(bin_dir / "pg_basebackup"),
                "-h",
                str(PRIMARY.get("HOST") or "127.0.0.1"),
                "-p",
                str(PRIMARY.get("PORT") or 5432),
                "-U",
                PRIMARY["USER"] or "postgres",
                "-D",
                str(replica.data),
                "-R",
                "-X",
                "stream",
                "-c",
                "fast",
            ]
        ),
        check=True,
        capture_output=True,
    )
    replica.start()
    try:
        yield replica
    finally:
        if replica.running():
            replica.ctl("-m", "immediate", "-w", "stop")
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module", autouse=True)
def replica_alias(standby: Standby) -> Iterator[None]:
    """The `replica` alias, pointing at the standby, from before each test's database setup
    (which must be told the test may use it) to the end of the module."""
    primary = connections["default"].settings_dict
    alias = {
        **primary,
        "PORT": standby.port,
        "CONN_MAX_AGE": 0,
        "OPTIONS": {**primary.get("OPTIONS", {}), "connect_timeout": 2},
        "TEST": {**primary.get("TEST", {}), "MIRROR": "default"},
    }
    # The handler keeps the DATABASES it first read: give it the new one, then the old one.
    known = dict(connections.settings)
    with override_settings(DATABASES={**django_settings.DATABASES, REPLICA: alias}):
        connections._settings = {**known, REPLICA: alias}  # type: ignore[attr-defined]
        connections.__dict__.pop("settings", None)
        try:
            yield
        finally:
            connections.close_all()
            with contextlib.suppress(AttributeError):
                del connections[REPLICA]
            connections._settings = known  # type: ignore[attr-defined]
            connections.__dict__.pop("settings", None)


@pytest.fixture
def replica(standby: Standby, settings: Any) -> Iterator[Standby]:
    """The router and the middleware on, the verdict checked at every page."""
    if not standby.running():
        standby.start()
    if standby.sql("SELECT pg_is_wal_replay_paused()"):
        standby.sql("SELECT pg_wal_replay_resume()")
    settings.DATABASE_ROUTERS = ["ctxadmin.db_router.ReplicaRouter"]
    settings.MIDDLEWARE = [
        *settings.MIDDLEWARE[:1],
        "ctxadmin.db_router.ReplicaReadsMiddleware",
        *settings.MIDDLEWARE[1:],
    ]
    settings.CTXADMIN_REPLICA_CHECK_SECONDS = 0
    settings.CTXADMIN_REPLICA_PIN_SECONDS = 0  # a POST does not pin the pages after it here
    settings.CTXADMIN_REPLICA_MAX_LAG_SECONDS = 10
    replica_verdict_forget()
    try:
        yield standby
    finally:
        connections[REPLICA].close()
        replica_verdict_forget()
        if standby.running() and standby.sql("SELECT pg_is_wal_replay_paused()"):
            standby.sql("SELECT pg_wal_replay_resume()")


def signed_in(workspace: Any) -> Client:
    f.make_person(workspace, "ada", "operator")
    client = Client()
    # The login page, through the middleware: a POST, so on the primary.
    answer = client.post("/accounts/login/", {"username": "ada", "password": f.PASSWORD})
    assert answer.status_code == 302, answer.content[:300]
    return client


def fallbacks(reason: str) -> float:
    return REPLICA_FALLBACKS.labels(reason=reason)._value.get()


def test_pages_read_the_replica_while_it_keeps_up(replica: Standby) -> None:
    workspace, _ = f.make_workspace()
    f.make_thread(workspace, external_id="before-pause")
    client = signed_in(workspace)
    replica.caught_up()
    replica.sql("SELECT pg_wal_replay_pause()")
    f.make_thread(workspace, external_id="during-pause")
    page = client.get("/threads/")
    assert page.status_code == 200
    assert b"before-pause" in page.content
    assert b"during-pause" not in page.content  # the replica's copy, not the primary's
    replica.sql("SELECT pg_wal_replay_resume()")
    replica.caught_up()
    assert b"during-pause" in client.get("/threads/").content


def test_a_stopped_replica_sends_pages_to_the_primary(replica: Standby) -> None:
    workspace, _ = f.make_workspace()
    f.make_thread(workspace, external_id="on-both")
    client = signed_in(workspace)
    replica.caught_up()
    replica.stop()
    before = fallbacks("unavailable")
    started = time.monotonic()
    page = client.get("/threads/")
    assert page.status_code == 200, page.content[:500]
    assert b"on-both" in page.content  # signed in, the list read from the primary
    assert client.get("/threads/on-both/").status_code == 200
    assert time.monotonic() - started < 10
    assert fallbacks("unavailable") >= before + 2
    scraped = client.get("/metrics")
    assert b'ctxadmin_replica_fallback_pages_total{reason="unavailable"}' in scraped.content


def test_a_lagging_replica_signs_nobody_out_and_hides_no_thread(
    replica: Standby, settings: Any
) -> None:
    workspace, _ = f.make_workspace()
    f.make_thread(workspace, external_id="old")
    replica.caught_up()
    replica.sql("SELECT pg_wal_replay_pause()")
    # Signed in, and a thread created, on the primary while the replica stands still.
    client = signed_in(workspace)
    f.make_thread(workspace, external_id="made-during-lag")
    # Within the lag bound the replica serves the list, but the thread still opens: the
    # replica's 404 is asked again of the primary.
    page = client.get("/threads/")
    assert page.status_code == 200 and b"old" in page.content
    assert b"made-during-lag" not in page.content
    assert client.get("/threads/made-during-lag/").status_code == 200
    # Past the bound, pages read the primary.
    settings.CTXADMIN_REPLICA_MAX_LAG_SECONDS = 1
    time.sleep(1.5)
    before = fallbacks("lagging")
    page = client.get("/threads/")
    assert page.status_code == 200
    assert b"made-during-lag" in page.content
    assert client.get("/threads/made-during-lag/").status_code == 200
    assert fallbacks("lagging") == before + 2
