"""Finding a subject's events (docs/repairs.md, "Erasure by subject"): through the search index,
confirmed on the stored strings, in every kind that has search text, never in another workspace,
never a near miss."""

from __future__ import annotations

from typing import Any

import pytest

from tests import factories
from threads.selectors.subjects import subject_events

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_fold_triggers")]

EMAIL = "alice.lidell@example.com"


def test_every_mention_and_nothing_else(workspace: Any) -> None:
    first = factories.make_thread(workspace, external_id="support-1")
    second = factories.make_thread(workspace, external_id="support-2")
    factories.append(
        first,
        factories.user(f"Please send the receipt to {EMAIL.upper()}"),  # any case
        factories.call("c1", "send_receipt", {"to": EMAIL, "order": 77}),
        factories.result("c1", value={"sent": True, "recipient": EMAIL}),
        factories.assistant("Sent to alice lidell at example com."),  # the words, not the value
    )
    factories.append(
        second,
        factories.user("Change my address to alice.lidell@example.org"),  # another address
        factories.user(f"I mean {EMAIL}, sorry"),
    )
    elsewhere, _ = factories.make_workspace("elsewhere")
    factories.append(factories.make_thread(elsewhere), factories.user(f"from {EMAIL}"))

    found = {
        (event.external_id, event.seq)
        for event in subject_events(workspace_id=workspace.pk, value=EMAIL)
    }
    assert found == {("support-1", 1), ("support-1", 2), ("support-1", 3), ("support-2", 2)}


def test_a_value_without_words_finds_nothing(workspace: Any, thread: Any) -> None:
    factories.append(thread, factories.user("--- ... ---"))
    assert subject_events(workspace_id=workspace.pk, value="...") == []
