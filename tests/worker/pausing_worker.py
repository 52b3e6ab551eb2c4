"""A Celery worker whose folds sleep between prepare and commit, for tests/worker: run as
`python -m tests.worker.pausing_worker SECONDS <celery worker arguments>`.

The pause is patched into this process only (`summary_decide`, the step after prepare, sleeps
first), so the product carries no test hook: a test kills the worker during the sleep.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any


def main() -> None:
    seconds = float(sys.argv[1])
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxadmin.settings")
    import django

    django.setup()
    from celery.bin.celery import main as celery_main

    from threads.services import folding

    decide = folding.summary_decide

    def paused(**kwargs: Any) -> str:
        time.sleep(seconds)
        return decide(**kwargs)

    folding.summary_decide = paused  # type: ignore[assignment]
    sys.argv = ["celery", *sys.argv[2:]]
    celery_main()


if __name__ == "__main__":
    main()
