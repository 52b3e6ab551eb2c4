"""Playwright's sync API keeps an event loop running in the test thread; Django's guard
against ORM calls from async code would then refuse the tests' own setup queries. Lifted for
the browser tests only, and restored after them."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

# Assertions wait as long as the pages' own actions do (a slow CI machine, two runs side by side).
expect.set_options(timeout=15_000)


@pytest.fixture(scope="module", autouse=True)
def allow_orm_beside_playwright() -> Iterator[None]:
    before = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    yield
    if before is None:
        del os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"]
    else:
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = before
