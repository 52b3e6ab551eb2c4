"""The agent's key lookup (threads.selectors.api_key_get_active): on PostgreSQL a statement of its
own, prepared or not (CTXADMIN_PREPARED_STATEMENTS), that must read the key as the ORM does and
refuse a revoked or expired one the moment it is."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from tests import factories as f
from threads.models import ApiKey
from threads.selectors import api_key_get_active
from threads.services.workspaces import api_key_digest

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("prepare", [True, False])
def test_the_lookup_reads_the_key_as_the_orm_does(settings: Any, prepare: bool) -> None:
    settings.CTXADMIN_PREPARED_STATEMENTS = prepare
    workspace, secret = f.make_workspace("keys")
    digest = api_key_digest(secret)
    stored = ApiKey.objects.get(key_hash=digest)
    connection.ensure_connection()
    before = getattr(connection.connection, "prepare_threshold", None)

    found = api_key_get_active(digest=digest)

    assert found is not None
    for field in ApiKey._meta.concrete_fields:
        assert getattr(found, field.attname) == getattr(stored, field.attname), field.name
    assert (found.workspace.pk, found.workspace.name) == (workspace.pk, "keys")
    # The connection is left as Django configured it.
    assert getattr(connection.connection, "prepare_threshold", None) == before
    assert api_key_get_active(digest=api_key_digest(secret + "x")) is None


@pytest.mark.parametrize("prepare", [True, False])
def test_a_revoked_or_expired_key_is_refused_at_once(settings: Any, prepare: bool) -> None:
    settings.CTXADMIN_PREPARED_STATEMENTS = prepare
    _, secret = f.make_workspace("keys")
    digest = api_key_digest(secret)
    # Read a few times first: a prepared statement planned once must still see the change.
    for _ in range(6):
        assert api_key_get_active(digest=digest) is not None
    ApiKey.objects.filter(key_hash=digest).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert api_key_get_active(digest=digest) is None
    ApiKey.objects.filter(key_hash=digest).update(
        expires_at=timezone.now() + timedelta(hours=1), revoked_at=timezone.now()
    )
    assert api_key_get_active(digest=digest) is None
    ApiKey.objects.filter(key_hash=digest).update(revoked_at=None)
    assert api_key_get_active(digest=digest) is not None
