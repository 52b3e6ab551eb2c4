"""One exception handler for the whole API: every error is
`{"error": {"code", "message", "fields"}}` with a fitting status, never an HTML page."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.http import (
    Http404,
    HttpResponse,
    HttpResponseForbidden,
    JsonResponse,
)
from django.middleware.csrf import REASON_NO_CSRF_COOKIE, REASON_NO_REFERER
from django.template import loader
from django.views.decorators.csrf import csrf_exempt
from django.views.defaults import bad_request, page_not_found, server_error
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from threads.database.unavailable import (
    RETRY_AFTER,
    database_unavailable,
    database_unavailable_reset,
)
from threads.domain.errors import DomainError

DATABASE_UNAVAILABLE_MESSAGE = (
    "the database is not taking writes (locked or read-only); nothing of this request was "
    "written, retry after the Retry-After seconds"
)


def error_body(code: str, message: str, fields: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "fields": fields or {}}}


def _flatten(detail: Any) -> Any:
    if isinstance(detail, list):
        flat = [_flatten(d) for d in detail]
        return flat[0] if len(flat) == 1 and isinstance(flat[0], str) else flat
    if isinstance(detail, dict):
        return {k: _flatten(v) for k, v in detail.items()}
    return str(detail)


DRF_CODES = {
    exceptions.NotAuthenticated: "not_authenticated",
    exceptions.AuthenticationFailed: "authentication_failed",
    exceptions.PermissionDenied: "permission_denied",
    exceptions.NotFound: "not_found",
    exceptions.MethodNotAllowed: "method_not_allowed",
    exceptions.UnsupportedMediaType: "unsupported_media_type",
    exceptions.Throttled: "rate_limited",
    exceptions.NotAcceptable: "not_acceptable",
}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, DomainError):
        return Response(error_body(exc.code, exc.message, exc.fields), status=exc.status)
    if database_unavailable(exc):
        database_unavailable_reset(exc)
        return Response(
            error_body("database_unavailable", DATABASE_UNAVAILABLE_MESSAGE),
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": str(RETRY_AFTER)},
        )
    if isinstance(exc, Http404):
        return Response(error_body("not_found", "not found"), status=status.HTTP_404_NOT_FOUND)
    if isinstance(exc, RequestDataTooBig):
        # Django raises it when something reads request.body past DATA_UPLOAD_MAX_MEMORY_SIZE;
        # left alone it would become an HTML 400.
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return Response(
            error_body(
                "payload_too_large",
                f"request body is larger than {limit} bytes (DATA_UPLOAD_MAX_MEMORY_SIZE)",
                {"limit": limit},
            ),
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    if isinstance(exc, DjangoPermissionDenied):
        return Response(
            error_body("permission_denied", str(exc) or "permission denied"),
            status=status.HTTP_403_FORBIDDEN,
        )
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        fields = _flatten(exc.detail)
        if not isinstance(fields, dict):
            fields = {"non_field_errors": fields}
        response.data = error_body("validation_error", "invalid input", fields)
    elif isinstance(exc, exceptions.ParseError):
        response.data = error_body("invalid_json", str(exc.detail))
    elif isinstance(exc, exceptions.APIException):
        code = next((c for cls, c in DRF_CODES.items() if isinstance(exc, cls)), "error")
        response.data = error_body(code, str(exc.detail))
    return response


def json_error_view(code: str, message: str, status_code: int) -> Any:
    def view(request: Any, *args: Any, **kwargs: Any) -> JsonResponse:
        return JsonResponse(error_body(code, message), status=status_code)

    return view


def _is_api(request: Any) -> bool:
    return str(getattr(request, "path", "")).startswith("/api/")


def is_metrics(request: Any) -> bool:
    """`/metrics` (or `/metrics/`): its body is plain text, errors included (docs/api.md §15)."""
    return str(getattr(request, "path", "")) in ("/metrics", "/metrics/")


def plain_text_error(message: str, status: int) -> HttpResponse:
    return HttpResponse(message + "\n", status=status, content_type="text/plain; charset=utf-8")


# Exempt: it changes nothing, and without it an unsafe request to an unknown path would meet
# the CSRF middleware first and answer its HTML 403 instead of this 404.
@csrf_exempt
def api_not_found(request: Any, *args: Any, **kwargs: Any) -> JsonResponse:
    """Any unknown path under /api/, any method: a JSON 404 whatever DEBUG says (mounted in
    ctxadmin/urls)."""
    message = f"no API route {request.path}"
    if not request.path.endswith("/"):
        message += " (API routes end with a slash)"
    return JsonResponse(error_body("not_found", message), status=404)


def handler400(request: Any, exception: Exception | None = None) -> Any:
    """A request refused before any route (a Host not in ALLOWED_HOSTS, another
    SuspiciousOperation): the contract's JSON under /api/, the product's page elsewhere."""
    if _is_api(request):
        return JsonResponse(
            error_body("bad_request", "bad request: refused before reaching a route"), status=400
        )
    return bad_request(request, exception)  # type: ignore[arg-type]


def handler404(request: Any, exception: Exception | None = None) -> Any:
    if _is_api(request):
        return JsonResponse(error_body("not_found", "not found"), status=404)
    return page_not_found(request, exception)  # type: ignore[arg-type]


def handler500(request: Any) -> Any:
    if _is_api(request):
        return JsonResponse(
            error_body("server_error", "internal error; it has been logged"), status=500
        )
    if is_metrics(request):
        return plain_text_error("metrics: internal error; it has been logged", 500)
    try:
        # Rendered without the request, so without context processors: nothing that reads the
        # database, which may be what failed.
        return server_error(request)
    except Exception:  # the page itself failed (a static file missing from the manifest...)
        return plain_text_error("Server error. It has been logged.", 500)


def csrf_failure(request: Any, reason: str = "") -> Any:
    """CSRF_FAILURE_VIEW: the contract's 403 under /api/, the product's page elsewhere.

    The page keeps what Django's own page explains, since that is what a person can act on:
    the reason, and for a missing cookie or Referer header that the browser must send it.
    Rendered without the request (no context processors), like the other error pages."""
    if _is_api(request):
        return JsonResponse(
            error_body("permission_denied", f"CSRF Failed: {reason}".strip()), status=403
        )
    page = loader.get_template("403_csrf.html").render(
        {
            "reason": reason,
            "no_cookie": reason == REASON_NO_CSRF_COOKIE,
            "no_referer": reason == REASON_NO_REFERER,
        }
    )
    return HttpResponseForbidden(page)
