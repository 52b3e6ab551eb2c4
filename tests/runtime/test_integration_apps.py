"""The integrations are apps of their own, moved out of the core without touching a table:
the models say what the migrations say (makemigrations finds nothing), the migrations that hand
the LangGraph checkpointer's and trace imports' models over are state only (sqlmigrate prints
no statement), and the tables keep their names. Runs on both databases."""

from __future__ import annotations

import io
import re

import pytest
from django.apps import apps
from django.core.management import call_command

pytestmark = pytest.mark.django_db

MOVES = [
    ("threads", "0025_integrations_move_out"),
    ("langgraph_checkpointer", "0001_initial"),
    ("trace_imports", "0001_initial"),
]


def test_the_models_match_the_migrations() -> None:
    out = io.StringIO()
    call_command("makemigrations", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()


# SQLite's schema editor (which sqlmigrate opens) cannot run inside a test's transaction.
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("app", "migration"), MOVES)
def test_the_move_runs_no_statement(app: str, migration: str) -> None:
    out = io.StringIO()
    call_command("sqlmigrate", app, migration, stdout=out)
    statements = [
        line
        for line in out.getvalue().splitlines()
        if line.strip()
        and not line.startswith("--")
        and not re.fullmatch(r"(BEGIN|COMMIT);", line.strip())
    ]
    assert statements == []


def test_the_tables_keep_their_names() -> None:
    moved = {
        model._meta.label: model._meta.db_table
        for app in ("langgraph_checkpointer", "trace_imports")
        for model in apps.get_app_config(app).get_models()
    }
    assert moved == {
        "langgraph_checkpointer.LanggraphContent": "threads_langgraphcontent",
        "langgraph_checkpointer.LanggraphChannelVersion": "threads_langgraphchannelversion",
        "langgraph_checkpointer.LanggraphMessage": "threads_langgraphmessage",
        "langgraph_checkpointer.LanggraphCheckpoint": "threads_langgraphcheckpoint",
        "langgraph_checkpointer.LanggraphWrite": "threads_langgraphwrite",
        "trace_imports.TraceImport": "threads_traceimport",
    }
