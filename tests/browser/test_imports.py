"""The Imports page in Chromium with the 200 conversations of tau-bench (GPT-4o airline,
openai-chat): the upload answers at once, a real Celery worker imports, the progress bar
moves, and the report shows 200 created; uploading the same file again shows 200 skipped.

The worker is a separate process on the embedded default (the filesystem queue and the SQLite
test database the live server uses), paced a little per conversation
(tests/browser/paced_worker.py) so that the page's once-a-second poll catches the bar between
0 and 200. Screenshots go to test-artifacts/screenshots/.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from playwright.sync_api import expect

from ctxadmin.celery import app as celery_app
from integrations.trace_imports.models import TraceImport
from tests import factories as f
from tests.browser.test_dashboard import SHOTS, browser, shot  # noqa: F401 (a fixture)
from threads.models import Event, Thread

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
TAU_BENCH = ROOT / "tests" / "data" / "tau-bench-gpt-4o-airline.json.gz"
# The progress text of the shared task region: "<done> / <total>".
INTERMEDIATE = """() => {
  const el = document.querySelector('#import-result .progress .muted');
  const m = el && el.textContent.match(/(\\d+) \\/ (\\d+)/);
  return m !== null && +m[1] > 0 && +m[1] < +m[2] ? m[0] : false;
}"""


@pytest.fixture
def import_worker(live_server: Any, tmp_path: Path) -> Iterator[None]:
    """A paced Celery worker on the embedded default, reading the live server's database."""
    if connection.vendor != "sqlite":
        pytest.skip(
            "the paced worker runs on the embedded default (SQLite run); the PostgreSQL run "
            "imports through the real worker in tests/api/test_imports.py"
        )
    env = {k: v for k, v in os.environ.items() if k not in ("CELERY_BROKER_URL", "DATABASE_URL")}
    env.update(
        DATABASE_URL=f"sqlite:///{connection.settings_dict['NAME']}",
        CTXADMIN_TASKS_EAGER="0",
        DJANGO_SETTINGS_MODULE="ctxadmin.settings",
    )
    log_path = tmp_path / "worker.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.browser.paced_worker"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    eager = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = False  # the live server sends tasks to the queue
    try:
        deadline = time.monotonic() + 90
        while b" ready." not in log_path.read_bytes():
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the worker did not start:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.2)
        yield
    finally:
        celery_app.conf.task_always_eager = eager
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=20)


def view_shot(page: Any, name: str) -> None:
    """The visible part only: a report of 200 rows is long."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"))


def _upload(page: Any, name: str) -> tuple[float, float, str]:
    """Upload the file; answer the seconds until the page had its answer, until the import
    finished, and one intermediate progress text the page showed."""
    page.set_input_files("#im-file", str(TAU_BENCH))
    page.get_by_label("Format").select_option("openai-chat")
    started = time.monotonic()
    with page.expect_response(re.compile(r"/imports/new/$")) as answer:
        page.get_by_role("button", name="Import").click()
    assert answer.value.status == 200
    answered = time.monotonic() - started
    # The answer is the import's region while the worker has barely begun: no request waits
    # for the import. The list of recent imports shows it at once.
    page.locator("#import-result .import-status .progress").wait_for()
    page.locator("#imports tbody tr", has_text=TAU_BENCH.name).first.wait_for()
    seen = page.wait_for_function(INTERMEDIATE, timeout=60_000).json_value()
    view_shot(page, f"{name}-progress")
    page.locator("#import-counts").wait_for(timeout=120_000)
    finished = time.monotonic() - started
    view_shot(page, f"{name}-report")
    return answered, finished, seen


def test_an_admin_imports_the_tau_bench_file_twice(
    browser: Any,  # noqa: F811
    live_server: Any,
    import_worker: None,
) -> None:
    workspace, _ = f.make_workspace("acme")
    f.make_person(workspace, "admin", "admin")
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    page = context.new_page()
    page.set_default_timeout(15000)
    page.goto(live_server.url + "/")
    page.get_by_label("Username").fill("admin")
    page.get_by_label("Password").fill(f.PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(re.compile(r"/threads/$"))
    page.get_by_role("link", name="Imports").click()
    page.wait_for_url(re.compile(r"/imports/$"))
    shot(page, "20-imports")

    answered, finished, seen = _upload(page, "21-import")
    counts = page.locator("#import-counts")
    expect(counts.get_by_text("200 created")).to_be_visible()
    expect(counts.get_by_text("0 refused")).to_be_visible()
    rows = page.locator("#import-report tbody tr")
    expect(rows).to_have_count(200)
    expect(page.locator("#import-report .badge", has_text="created")).to_have_count(200)
    events = Event.objects.count()
    assert Thread.objects.filter(workspace=workspace).count() == 200 and events > 0
    timings = [(answered, finished, seen)]

    page.goto(live_server.url + "/imports/")
    answered, finished, seen = _upload(page, "22-import-again")
    counts = page.locator("#import-counts")
    expect(counts.get_by_text("200 skipped")).to_be_visible()
    expect(counts.get_by_text("0 created")).to_be_visible()
    expect(page.locator("#import-report .badge", has_text="skipped")).to_have_count(200)
    assert Event.objects.count() == events and Thread.objects.count() == 200
    timings.append((answered, finished, seen))

    # A report row links to its thread.
    page.locator("#import-report tbody tr a").first.click()
    page.wait_for_url(re.compile(r"/threads/[0-9a-f-]+/$"))
    page.goto(live_server.url + "/imports/")
    expect(page.locator("#imports tbody tr")).to_have_count(2)
    assert TraceImport.objects.filter(state="succeeded").count() == 2
    print(
        "Imports page, 200 conversations: "
        + "; ".join(f"answer in {a:.2f} s, finished in {d:.1f} s, saw {s}" for a, d, s in timings)
    )
    context.close()
