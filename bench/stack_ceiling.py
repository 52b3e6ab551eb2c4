"""The least one request can cost on ctxadmin's stack, for the single-event comparison of
bench/ingest.py (which routes its client here with ROOT_URLCONF="stack_ceiling"). Both views
run the raw baseline's own one-row INSERT in its own transaction and answer 201; neither
validates, locks, hashes, counts tokens or checks idempotency, so any real single-event
append costs more than either:

- `InsertOnly` (Django + Django REST framework, as ctxadmin's API): authenticates the agent's
  API key and parses the JSON body exactly as ctxadmin's endpoints do (the project's DRF
  settings);
- `bare_insert` (Django alone): no authentication at all, the body read with json.loads.

Under gunicorn (bench/ingest_server.py serves this module as ROOT_URLCONF, with ctxadmin's own
routes after its own, through the same settings, middleware and server) the ceiling is
`ServedInsert`: it authenticates and parses as `InsertOnly` does, then writes the rows ctxadmin
stored for the same events, read at start-up from the file CTXADMIN_BENCH_ROWS names, the way
the append writes them: one prepared INSERT in autocommit (its own transaction) for a single
event, COPY in one transaction for a batch. The request says which rows in its `X-Bench-Row`
header (the index of its first event); the thread is the one in the path, never looked up.
`ServedLockedInsert` does the same inside the transaction any correct append needs (lock the
thread, write, move its head, commit): not a ceiling of the brief's kind, it tells how much of
ctxadmin's cost those statements alone are.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

from django.db import connection, transaction
from django.http import HttpRequest, JsonResponse
from django.urls import include, path
from django.views.decorators.csrf import csrf_exempt
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from threads.services.event_rows import COPY_MIN_ROWS, EVENT_COLUMNS, server_cursor

# Set by the bench: the INSERT and the parameter rows it runs, one per request.
INSERT = ""
ROWS: Iterator[tuple[Any, ...]] = iter(())


class InsertOnly(APIView):
    def post(self, request: Request, id: str) -> Response:
        request.data  # noqa: B018 - parsed (and checked) as the append endpoint parses it
        with connection.cursor() as cursor:  # autocommit: the INSERT is its own transaction
            cursor.execute(INSERT, next(ROWS))
        return Response({"stored": True}, status=status.HTTP_201_CREATED)


@csrf_exempt
def bare_insert(request: HttpRequest, id: str) -> JsonResponse:
    json.loads(request.body)
    with connection.cursor() as cursor:
        cursor.execute(INSERT, next(ROWS))
    return JsonResponse({"stored": True}, status=201)


# The statements ctxadmin's append runs for its rows (threads/services/event_rows.py).
SERVED_COLUMNS = ", ".join(EVENT_COLUMNS)
HASH = EVENT_COLUMNS.index("hash")  # a row's chain link: the head the lock moves to
SERVED_INSERT = (
    f"INSERT INTO threads_event ({SERVED_COLUMNS}) "
    f"VALUES ({', '.join(['%s'] * len(EVENT_COLUMNS))})"
)
SERVED_COPY = f"COPY threads_event ({SERVED_COLUMNS}) FROM STDIN"


@cache
def served_rows() -> list[tuple[Any, ...]]:
    """The rows of CTXADMIN_BENCH_ROWS, all EVENT_COLUMNS but thread_id: the JSON columns as
    canonical text, as the append sends them."""
    rows = json.loads(Path(os.environ["CTXADMIN_BENCH_ROWS"]).read_text())
    return [(row[0], row[1], datetime.fromisoformat(row[2]), *row[3:]) for row in rows]


class ServedInsert(APIView):
    def post(self, request: Request, id: str) -> Response:
        data: Any = request.data  # parsed (and checked) as the append endpoint parses it
        first = int(request.headers["X-Bench-Row"])
        count = len(data["events"]) if "events" in data else 1
        rows = [(id, *row) for row in served_rows()[first : first + count]]
        if len(rows) >= COPY_MIN_ROWS:
            with transaction.atomic(), server_cursor(connection) as pg:
                with pg.copy(SERVED_COPY) as stream:
                    for row in rows:
                        stream.write_row(row)
        else:  # autocommit: each INSERT is its own transaction, one round trip
            with server_cursor(connection) as pg:
                for row in rows:
                    pg.execute(SERVED_INSERT, row)
        return Response({"stored": len(rows)}, status=status.HTTP_201_CREATED)


class ServedLockedInsert(ServedInsert):
    """`ServedInsert` inside the least transaction a correct append needs: lock the thread's
    row (the seq and the chain's head come from it), write the rows, move the head, commit —
    the statements ctxadmin's append runs, with nothing computed in between."""

    def post(self, request: Request, id: str) -> Response:
        data: Any = request.data
        first = int(request.headers["X-Bench-Row"])
        count = len(data["events"]) if "events" in data else 1
        rows = [(id, *row) for row in served_rows()[first : first + count]]
        with transaction.atomic(), server_cursor(connection) as pg:
            with pg.connection.pipeline():
                pg.execute(SERVED_LOCK, (id,))
                pg.fetchall()
            if len(rows) >= COPY_MIN_ROWS:
                with pg.copy(SERVED_COPY) as stream:
                    for row in rows:
                        stream.write_row(row)
            with pg.connection.pipeline():
                if len(rows) < COPY_MIN_ROWS:
                    pg.executemany(SERVED_INSERT, rows)
                pg.execute(SERVED_HEAD, (rows[-1][1], rows[-1][HASH], id))
        return Response({"stored": len(rows)}, status=status.HTTP_201_CREATED)


SERVED_LOCK = "SELECT last_seq, chain_head FROM threads_thread WHERE id = %s FOR UPDATE"
SERVED_HEAD = (
    "UPDATE threads_thread SET last_seq = %s, chain_head = %s, updated_at = now() WHERE id = %s"
)


urlpatterns = [
    path("ceiling/<str:id>/", InsertOnly.as_view()),
    path("bare/<str:id>/", bare_insert),
    path("served/<str:id>/", ServedInsert.as_view()),
    path("served-locked/<str:id>/", ServedLockedInsert.as_view()),
    # ctxadmin's own routes, behind the same server and middleware.
    path("", include("ctxadmin.urls")),
]
