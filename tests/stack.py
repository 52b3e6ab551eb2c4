"""ctxadmin's production processes on loopback, for tests and benches that need them as a
user runs them (docs/operations.md): Redis, gunicorn with ctxadmin's config, Celery workers.

Each runs in its own process group so that it can be stopped, or killed children and all,
without touching anything else. PostgreSQL comes from ./scripts/test (tests) or
bench/ingest.py's throwaway cluster (benches).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop(process: subprocess.Popen[bytes] | None, sig: int = signal.SIGTERM) -> None:
    if process is None or process.poll() is not None:
        return
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        return
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@dataclass
class Redis:
    """redis-server with an append-only file (`appendfsync everysec`, as docs/operations.md
    asks), so that a restart keeps the queued and unacknowledged messages."""

    folder: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    restarts: int = 0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> Redis:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "everysec",
                "--dir",
                str(self.folder),
                "--logfile",
                str(self.folder / "redis.log"),
            ],
            start_new_session=True,
        )
        deadline = time.monotonic() + 30
        while not self._pings():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError((self.folder / "redis.log").read_text()[-2000:])
            time.sleep(0.05)
        return self

    def _pings(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def restart(self) -> None:
        """A graceful stop (SIGTERM: Redis flushes its append-only file), then a start on
        the same port."""
        _stop(self.process)
        self.start()
        self.restarts += 1

    def stop(self) -> None:
        _stop(self.process)


def process_env(database_url: str, broker_url: str, var_dir: Path, **extra: str) -> dict[str, str]:
    """What every ctxadmin process of one deployment shares (docs/operations.md)."""
    return {
        **os.environ,
        "DATABASE_URL": database_url,
        "CELERY_BROKER_URL": broker_url,
        "CTXADMIN_TASKS_EAGER": "0",
        "CTXADMIN_VAR_DIR": str(var_dir),
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost,testserver",
        **extra,
    }


@dataclass
class Gunicorn:
    """gunicorn with ctxadmin's config and `workers` processes on a free port."""

    env: dict[str, str]
    log: Path
    workers: int = 2
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, ready_path: str = "/api/v1/", timeout: float = 90) -> Gunicorn:
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "gunicorn",
                    "-c",
                    "python:ctxadmin.gunicorn_conf",
                    "--workers",
                    str(self.workers),
                    "--timeout",
                    "60",
                    "--bind",
                    f"127.0.0.1:{self.port}",
                    "ctxadmin.wsgi",
                ],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(self.log.read_text()[-3000:])
            try:
                httpx.get(self.url + ready_path, timeout=5)
                return self
            except httpx.TransportError:
                time.sleep(0.3)

    def stop(self) -> None:
        _stop(self.process)


@dataclass
class Worker:
    """A Celery worker (prefork, `concurrency` processes) that can be SIGKILLed, children and
    all, and started again under the same name."""

    env: dict[str, str]
    log: Path
    name: str
    concurrency: int = 2
    queue: str = "celery"
    process: subprocess.Popen[bytes] | None = None
    kills: int = 0
    _log_mark: int = 0
    _ready_at: float | None = None

    def start(self) -> Worker:
        self._log_mark = self.log.stat().st_size if self.log.exists() else 0
        self._ready_at = None
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "ctxadmin",
                    "worker",
                    "--pool=prefork",
                    f"--concurrency={self.concurrency}",
                    "-Q",
                    self.queue,
                    "--loglevel=INFO",
                    "--without-gossip",
                    "--without-mingle",
                    "--without-heartbeat",
                    "--hostname",
                    f"{self.name}@%h",
                ],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self

    def ready(self) -> bool:
        if self.process is None or self.process.poll() is not None:
            return False
        if self._ready_at is not None:
            return True
        with open(self.log, "rb") as log:
            log.seek(self._log_mark)
            if b" ready." not in log.read():
                return False
        self._ready_at = time.monotonic()
        return True

    def up_for(self) -> float:
        """Seconds since this incarnation was first seen ready (0 when it is not)."""
        if not self.ready() or self._ready_at is None:
            return 0.0
        return time.monotonic() - self._ready_at

    def wait_ready(self, timeout: float = 90) -> Worker:
        deadline = time.monotonic() + timeout
        while not self.ready():
            if time.monotonic() > deadline or (self.process and self.process.poll() is not None):
                raise RuntimeError(self.log.read_text()[-3000:])
            time.sleep(0.1)
        return self

    def kill(self) -> None:
        """SIGKILL to the whole process group: the worker and its pool, mid-task."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        self.kills += 1

    def stop(self) -> None:
        _stop(self.process)


def run_manage(env: dict[str, str], *args: str, timeout: float = 300) -> str:
    """`python manage.py ARGS` in a deployment's environment; its output."""
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(args)}: {done.stdout}{done.stderr}")
    return done.stdout
