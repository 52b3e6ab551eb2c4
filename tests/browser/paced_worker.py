"""A real Celery worker for the Imports page's browser test: `python -m tests.browser.paced_worker`.

It is the product's worker (the same app, task and service) with two test-only changes: each
conversation's import is followed by a short pause (CTXADMIN_TEST_IMPORT_PACE seconds, default
0.02), so that a page polling once a second sees the progress bar between 0 and the total
even on a fast machine; and appends start no fold, so the import is the only work it does.
"""

from __future__ import annotations

import os
import time
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxadmin.settings")
django.setup()

from ctxadmin.celery import app  # noqa: E402
from integrations.trace_imports.services import conversations  # noqa: E402
from threads.services import events  # noqa: E402

PACE = float(os.environ.get("CTXADMIN_TEST_IMPORT_PACE", "0.02"))
_conversation_import = conversations.conversation_import


def paced_conversation_import(**kwargs: Any) -> Any:
    result = _conversation_import(**kwargs)
    time.sleep(PACE)
    return result


conversations.conversation_import = paced_conversation_import  # type: ignore[assignment]
events.after_append_hooks = []

if __name__ == "__main__":
    app.worker_main(
        [
            "worker",
            "--pool=solo",
            "-Q",
            "imports",  # where imports are routed (CELERY_TASK_ROUTES)
            "--loglevel=INFO",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "--hostname",
            f"paced-import-{os.getpid()}@%h",
        ]
    )
