"""The message-search index (docs/search.md, "Message search"): PostgreSQL's stored tsvector column
and its GIN index, SQLite's FTS5 table and its triggers, in the shape of the day
(threads/migrations/ _search_0013.py; 0016_search_compact makes them smaller). Existing events are
indexed here, once."""

from django.db import migrations

from threads.migrations import _search_0013 as search


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(search.POSTGRES_SQL, params=None)
    elif schema_editor.connection.vendor == "sqlite":
        for statement in search.SQLITE_SQL:
            schema_editor.execute(statement)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(search.POSTGRES_REVERSE, params=None)
    elif schema_editor.connection.vendor == "sqlite":
        for statement in search.SQLITE_REVERSE:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("threads", "0012_lgstore")]
    operations = [migrations.RunPython(forwards, backwards)]
