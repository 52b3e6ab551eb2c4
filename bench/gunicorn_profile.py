"""gunicorn hooks that cProfile, in CPU time, each worker's requests (`gunicorn -c
bench/gunicorn_profile.py`, used by `bench/ingest.py --server --profile`): every request runs
under the profiler of the thread that serves it (cProfile sees one thread only, and gthread
workers serve requests on a pool; only requests that carry an `X-Bench-Profile` header, so that
warm-ups stay out), and a worker that exits writes its requests' merged statistics to
$CTXADMIN_BENCH_PROFILE_DIR/worker-<pid>.prof. ctxadmin's gunicorn config comes with it."""

from __future__ import annotations

import cProfile
import os
import pstats
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from ctxadmin.gunicorn_conf import *  # noqa: F403 - ctxadmin's own settings and hooks

_local = threading.local()
_profiles: list[cProfile.Profile] = []


def _profiled(app: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
    def call(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if "HTTP_X_BENCH_PROFILE" not in environ:  # a warm-up request
            return app(environ, start_response)
        profiler = getattr(_local, "profiler", None)
        if profiler is None:
            profiler = _local.profiler = cProfile.Profile(time.thread_time)
            _profiles.append(profiler)
        profiler.enable()
        try:
            return list(app(environ, start_response))  # the body too, inside the profile
        finally:
            profiler.disable()

    return call


def post_worker_init(worker: Any) -> None:
    worker.wsgi = _profiled(worker.wsgi)


def worker_exit(server: Any, worker: Any) -> None:
    if not _profiles:
        return
    stats = pstats.Stats(_profiles[0])
    for profiler in _profiles[1:]:
        stats.add(profiler)
    folder = os.environ["CTXADMIN_BENCH_PROFILE_DIR"]
    stats.dump_stats(os.path.join(folder, f"worker-{os.getpid()}.prof"))
