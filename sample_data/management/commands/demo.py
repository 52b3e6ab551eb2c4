"""`demo`: set everything up on the embedded default and serve the dashboard.

Migrates the database (SQLite in var/ unless DATABASE_URL says otherwise), creates the "demo"
workspace with one person per role and an agent key, loads the four sample scenarios and ~20
real tau-bench conversations, folds the sample threads, gives one thread a summary history (a
candidate refused by verification, a rollback: sample_data.summary_history), runs a
small offline LangGraph agent checkpointed by CtxadminSaver (paused on an approval), then
serves Django on 127.0.0.1 with a Celery worker (solo pool, embedded beat) beside it, over the
broker-less filesystem transport when CELERY_BROKER_URL is unset. Stopping the server stops
the worker. Running it again appends nothing.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from ctxadmin.celery import app
from sample_data.langgraph_agent import THREAD_ID, langgraph_demo_run
from sample_data.load import (
    DEMO_PEOPLE,
    demo_workspace_load,
    scenarios_load,
    tau_bench_load,
)
from sample_data.summary_history import THREAD_ID as HISTORY_ID
from sample_data.summary_history import summary_history_load
from threads.services.folding import fold_run

WORKER_STOP_SECONDS = 10


class Command(BaseCommand):
    help = "Set up the demo workspace with sample threads and people, then serve the dashboard."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--no-serve",
            action="store_true",
            help="load the data and stop (no web server, no worker)",
        )
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument(
            "--tau",
            type=int,
            default=20,
            help="how many tau-bench conversations to import (default 20)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write("Migrating the database…")
        call_command("migrate", interactive=False, verbosity=0)
        workspace, api_key = demo_workspace_load()
        # Folds that appends trigger run inline while loading, so the sample threads have
        # summaries and checkpoints before anyone opens the dashboard.
        with _tasks_inline():
            loaded = scenarios_load(workspace=workspace)
            tau = tau_bench_load(workspace=workspace, count=options["tau"])
            folded = self._fold_unfolded([item.thread for item in loaded])
            history = summary_history_load(workspace=workspace)
            langgraph = langgraph_demo_run(workspace=workspace, api_key=api_key)
        for item in loaded:
            if item.conflict:
                self.stderr.write(
                    f"Kept {item.thread.external_id} as an earlier demo loaded it "
                    f"({item.conflict}); remove the database to load the current sample."
                )
        new_events = sum(item.created for item in loaded + tau)
        self.stdout.write(
            f"Loaded {len(loaded)} sample threads and {len(tau)} tau-bench threads "
            f"({new_events} new events; {folded} folded now)."
        )
        if history is not None:
            refused = (
                f"v{history.refused.version}, a lying summariser's candidate, refused by "
                "verification"
                if history.refused is not None
                else "no lying candidate (no loopback interface for its endpoint)"
            )
            self.stdout.write(
                f"Thread {HISTORY_ID} has {len(history.versions)} summary versions: {refused}; "
                "then a rollback."
            )
        if langgraph:
            self.stdout.write(
                f"Ran a LangGraph agent on thread {THREAD_ID} ({langgraph} checkpoints); it "
                "waits for a reviewer's approval of a refund."
            )
        url = f"http://127.0.0.1:{options['port']}/"
        self.stdout.write("")
        self.stdout.write(self.style.SUCCESS(f"ctxadmin demo: {url}"))
        self.stdout.write("Sign in at /accounts/login/ as:")
        for role, (username, password) in DEMO_PEOPLE.items():
            self.stdout.write(f"  {role.value:<9} username {username:<9} password {password}")
        self.stdout.write(f"Agent API key for workspace {workspace.name!r}: {api_key}")
        if options["no_serve"]:
            return
        with self._worker():
            call_command("runserver", f"127.0.0.1:{options['port']}", use_reloader=False)

    def _fold_unfolded(self, threads: list[Any]) -> int:
        folded = 0
        for thread in threads:
            thread.refresh_from_db()
            if thread.head_version == 0:
                version = fold_run(
                    thread_id=thread.pk,
                    trigger={"kind": "manual", "reason": "demo: sample thread loaded"},
                )
                folded += version is not None
        return folded

    @contextlib.contextmanager
    def _worker(self) -> Iterator[None]:
        schedule = settings.VAR_DIR / "celerybeat-schedule"
        command = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "ctxadmin",
            "worker",
            "--pool=solo",
            # One worker for both queues in the demo: imports have a queue of their own
            # (CELERY_TASK_ROUTES), which production gives a worker of its own.
            "-Q",
            "celery,imports",
            "-B",
            "--schedule",
            str(schedule),
            "--loglevel=WARNING",
        ]
        self.stdout.write("Starting a Celery worker: " + " ".join(command[1:]))
        worker = subprocess.Popen(command, cwd=settings.BASE_DIR)
        # `kill` (SIGTERM) stops the server like Ctrl-C does, so the worker is stopped too.
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
        try:
            yield
        finally:
            worker.terminate()
            try:
                worker.wait(WORKER_STOP_SECONDS)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
            self.stdout.write("Celery worker stopped.")


@contextlib.contextmanager
def _tasks_inline() -> Iterator[None]:
    before = app.conf.task_always_eager
    app.conf.task_always_eager = True
    try:
        yield
    finally:
        app.conf.task_always_eager = before
