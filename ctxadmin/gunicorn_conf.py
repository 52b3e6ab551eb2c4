"""gunicorn settings for ctxadmin: `gunicorn -c python:ctxadmin.gunicorn_conf ctxadmin.wsgi`.

With PROMETHEUS_MULTIPROC_DIR set (docs/operations.md), a worker that exits is marked dead, so
that `/metrics` drops its live values; its totals stay in the directory.

`limit_request_line` is gunicorn's largest: a request line up to it reaches ctxadmin, whose
RequestTargetLimitMiddleware (threads/middleware.py) refuses a target over 8000 bytes with a
414 in the API's JSON shape; only a line over this limit gets gunicorn's own HTML 414.
"""

from __future__ import annotations

import os
from typing import Any

from prometheus_client import multiprocess

limit_request_line = 8190


def child_exit(server: Any, worker: Any) -> None:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.mark_process_dead(worker.pid)  # type: ignore[no-untyped-call]
