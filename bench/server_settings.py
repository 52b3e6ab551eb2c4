"""ctxadmin's settings with bench/stack_ceiling.py as the URL conf: the stack ceiling's views
and ctxadmin's routes behind one gunicorn (bench/ingest_server.py)."""

from ctxadmin.settings import *  # noqa: F403

ROOT_URLCONF = "stack_ceiling"
