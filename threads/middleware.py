"""Answers a person can act on instead of bare failures.

- RequestTargetLimitMiddleware answers a request whose target (path and query string) is
  longer than MAX_REQUEST_TARGET with 414 in the contract's shape (JSON under /api/, plain
  text elsewhere), below gunicorn's `limit_request_line` (ctxadmin/gunicorn_conf.py), whose
  own 414 is an HTML page. First in MIDDLEWARE, so nothing runs before it.
- ForwardedWithoutTrustedProxyMiddleware counts and logs (once per process) requests a proxy
  forwarded while CTXADMIN_TRUSTED_PROXIES is 0 (threads/client_address.py).

- DatabaseUnavailableMiddleware turns a database that refuses writes (threads.database.unavailable)
  into a 503: the contract's JSON error under /api/ (docs/api.md §1.4), plain text for
  /metrics (docs/api.md §15), a page saying so elsewhere, all with `Retry-After`. Last in
  MIDDLEWARE, so it sees a view's exception first.
- MethodNotAllowedPageMiddleware gives a dashboard route's empty 405 (`require_POST`: the
  address of a form's target reloaded, bookmarked or typed in) a page that says so, with a
  way back. The status stays 405; the API answers its own JSON 405.
- ProductNotFoundPageMiddleware shows the product's own 404 page with DEBUG on (the demo,
  a development server) as it is shown with DEBUG off, instead of Django's debug page that
  lists the URLconf: an address no route takes, and a view's Http404. A view's bad request
  and its uncaught exception get the product's 400 and 500 pages too, instead of Django's
  traceback page (the exception is logged, to the console, as Django logs it); a 403 is the
  product's page already. /api/ keeps its JSON errors (its own catch-all route and error
  handling); with DEBUG off it does nothing.
- PrivateCacheMiddleware marks API answers and a signed-in person's pages (a request with the
  session cookie) `private, no-cache`: they hold one caller's workspace data, which no shared
  cache may keep and no browser may show again unchecked (after a sign-out, say). An answer
  that says already how it may be cached keeps its header (the new key's `no-store`); static
  files never get here (WhiteNoise answers them first) and /metrics is for a scraper."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import BadRequest, PermissionDenied, SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseServerError, JsonResponse
from django.shortcuts import render
from django.urls import Resolver404, resolve
from django.utils.cache import patch_cache_control
from django.utils.log import log_response

from threads.api.errors import (
    DATABASE_UNAVAILABLE_MESSAGE,
    error_body,
    handler400,
    handler404,
    handler500,
    is_metrics,
    plain_text_error,
)
from threads.client_address import forwarded_untrusted_note
from threads.database.unavailable import (
    RETRY_AFTER,
    database_unavailable,
    database_unavailable_reset,
)

# Bytes of a request's target (path and query string). gunicorn refuses a request line over
# its `limit_request_line` (ctxadmin/gunicorn_conf.py sets 8190, its largest) with an HTML 414
# before ctxadmin sees it; below that, this limit answers first, in the contract's shape.
MAX_REQUEST_TARGET = 8000


class RequestTargetLimitMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        target = len(request.get_full_path().encode())
        if target <= MAX_REQUEST_TARGET:
            return self.get_response(request)
        message = (
            f"the request's path and query string are {target} bytes, more than "
            f"{MAX_REQUEST_TARGET}: send the parameters in fewer bytes"
        )
        if request.path.startswith("/api/"):
            return JsonResponse(error_body("uri_too_long", message), status=414)
        return plain_text_error(message, 414)


class ForwardedWithoutTrustedProxyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        forwarded_untrusted_note(request)
        return self.get_response(request)


class DatabaseUnavailableMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> Any:
        if not database_unavailable(exception):
            return None
        database_unavailable_reset(exception)
        response: HttpResponse
        if request.path.startswith("/api/"):
            response = JsonResponse(
                error_body("database_unavailable", DATABASE_UNAVAILABLE_MESSAGE), status=503
            )
        elif is_metrics(request):
            response = plain_text_error("metrics: the database is unavailable", 503)
        else:
            response = render(request, "503.html", {"retry_after": RETRY_AFTER}, status=503)
        response["Retry-After"] = str(RETRY_AFTER)
        return response


class MethodNotAllowedPageMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            response.status_code != 405
            or request.path.startswith("/api/")
            or is_metrics(request)
            or getattr(response, "streaming", False)
            or response.content
        ):
            return response
        page = render(request, "405.html", status=405)
        page["Allow"] = response.get("Allow", "")
        return page


class PrivateCacheMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.has_header("Cache-Control") or is_metrics(request):
            return response
        # The session cookie, not request.user: reading the user may query the database, which
        # may be the very thing this answer reports as down.
        if request.path.startswith("/api/") or settings.SESSION_COOKIE_NAME in request.COOKIES:
            patch_cache_control(response, private=True, no_cache=True)
        return response


class ProductNotFoundPageMiddleware:
    """With DEBUG on, the product's 404 page where Django would show its technical one. Inside
    CommonMiddleware, whose APPEND_SLASH still turns a 404 for `/threads` into a redirect."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    @staticmethod
    def _applies(request: HttpRequest) -> bool:
        return bool(settings.DEBUG) and not request.path.startswith("/api/")

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if self._applies(request):
            try:
                resolve(request.path_info, getattr(request, "urlconf", None))
            except Resolver404 as exc:
                return handler404(request, exc)  # type: ignore[no-any-return]
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> Any:
        if not self._applies(request):
            return None
        if isinstance(exception, Http404):
            return handler404(request, exception)
        if isinstance(exception, PermissionDenied):
            return None  # Django shows the product's 403 page, DEBUG or not
        if isinstance(exception, BadRequest | SuspiciousOperation):
            return handler400(request, exception)
        # What Django would log before showing its traceback page; the console keeps it.
        log_response(
            f"Internal Server Error: {request.path}",
            request=request,
            response=HttpResponseServerError(),
            exception=exception,
        )
        return handler500(request)
