"""One dashboard form issues one key (docs/api.md, "Dashboard URLs"): the key keeps its form's
one-time token under a unique constraint, so a second issue with the same token is refused, even
when both arrive at the same instant, and nothing else of the second is written."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import close_old_connections, connection

from tests import factories as f
from threads.domain.errors import FormSentAlready
from threads.models import ApiKey, AuditEntry
from threads.services.api_keys import api_key_issue

pytestmark = pytest.mark.django_db


def test_a_token_issues_one_key(workspace: Any) -> None:
    admin = f.make_person(workspace, "ada", "admin")
    api_key_issue(workspace=workspace, actor=admin, name="ci", form_token="1:tok-aaaaaaaaaaaaaaaa")
    audits = AuditEntry.objects.count()
    with pytest.raises(FormSentAlready) as refused:
        api_key_issue(
            workspace=workspace, actor=admin, name="ci", form_token="1:tok-aaaaaaaaaaaaaaaa"
        )
    assert refused.value.status == 409 and refused.value.fields == {"form_token": "sent already"}
    assert ApiKey.objects.filter(name="ci").count() == 1
    assert AuditEntry.objects.count() == audits
    # Keys issued without a form (commands, the demo) share the empty token freely.
    for _ in range(2):
        api_key_issue(workspace=workspace, actor=admin, name="cli")
    assert ApiKey.objects.filter(name="cli", form_token="").count() == 2


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_posts_at_once_issue_one_key(workspace: Any) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("concurrent transactions from two threads need PostgreSQL")
    admin = f.make_person(workspace, "ada", "admin")
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def issue() -> None:
        try:
            barrier.wait()
            api_key_issue(workspace=workspace, actor=admin, name="race", form_token="1:race-token")
            outcomes.append("ok")
        except FormSentAlready as exc:
            outcomes.append(exc.code)
        finally:
            close_old_connections()
            connection.close()

    workers = [threading.Thread(target=issue) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert sorted(outcomes) == ["form_sent_already", "ok"]
    assert ApiKey.objects.filter(name="race").count() == 1
    assert AuditEntry.objects.filter(action="api_key.create").count() == 1
