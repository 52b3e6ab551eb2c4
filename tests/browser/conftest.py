"""Playwright's sync API keeps an event loop running in the test thread; Django's guard
against ORM calls from async code would then refuse the test's own setup queries."""

import os

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
