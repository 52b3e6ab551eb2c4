"""A `back` link taken from the query string stays on this site (docs/dashboard.md, "Dashboard"):
browsers read `/\\` as `//`, so `/\\evil.example` is another host."""

from __future__ import annotations

import pytest
from django.test import Client

from threads.models import TaskRun, Thread

pytestmark = pytest.mark.django_db

OFF_SITE = [
    "/\\evil.example",
    "/\\/evil.example",
    "//evil.example",
    "https://evil.example/",
    "\\\\evil.example",
    "/\t/evil.example",
    "javascript:alert(1)",
]


@pytest.mark.parametrize("back", OFF_SITE)
def test_task_progress_renders_no_off_site_back_link(
    operator: Client, story: Thread, back: str
) -> None:
    operator.post(f"/threads/{story.pk}/fold/")
    run = TaskRun.objects.get(kind="fold")
    TaskRun.objects.filter(pk=run.pk).update(state="SUCCESS")  # the finished region shows it
    page = operator.get(f"/tasks/{run.id}/progress/", {"back": back})
    assert page.status_code == 200
    body = page.content.decode()
    assert "evil.example" not in body and "javascript:" not in body
    assert "Refresh page" not in body


def test_task_progress_keeps_a_local_back_link(operator: Client, story: Thread) -> None:
    operator.post(f"/threads/{story.pk}/fold/")
    run = TaskRun.objects.get(kind="fold")
    TaskRun.objects.filter(pk=run.pk).update(state="SUCCESS")
    back = f"/threads/{story.pk}/summaries/?page=2"
    body = operator.get(f"/tasks/{run.id}/progress/", {"back": back}).content.decode()
    assert f'href="/threads/{story.pk}/summaries/?page=2"' in body
