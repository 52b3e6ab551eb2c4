"""The least one request can cost on ctxadmin's stack, for the single-event comparison of
bench/ingest.py (which routes its client here with ROOT_URLCONF="stack_ceiling"). Both views
run the raw baseline's own one-row INSERT in its own transaction and answer 201; neither
validates, locks, hashes, counts tokens or checks idempotency, so any real single-event
append costs more than either:

- `InsertOnly` (Django + Django REST framework, as ctxadmin's API): authenticates the agent's
  API key and parses the JSON body exactly as ctxadmin's endpoints do (the project's DRF
  settings);
- `bare_insert` (Django alone): no authentication at all, the body read with json.loads.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

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


urlpatterns = [
    path("ceiling/<str:id>/", InsertOnly.as_view()),
    path("bare/<str:id>/", bare_insert),
]
