"""gunicorn settings for ctxadmin: `gunicorn -c python:ctxadmin.gunicorn_conf ctxadmin.wsgi`.

With PROMETHEUS_MULTIPROC_DIR set (docs/operations.md), a worker that exits is marked dead, so
that `/metrics` drops its live values; its totals stay in the directory.
"""

from __future__ import annotations

import os
from typing import Any

from prometheus_client import multiprocess


def child_exit(server: Any, worker: Any) -> None:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.mark_process_dead(worker.pid)  # type: ignore[no-untyped-call]
