"""The message-search index (docs/design.md §17): PostgreSQL's GIN expression index, SQLite's
FTS5 table and its triggers. Existing events are indexed here, once."""

from django.db import migrations

from threads import searchindex


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(searchindex.POSTGRES_SQL, params=None)
    elif schema_editor.connection.vendor == "sqlite":
        for statement in searchindex.SQLITE_SQL:
            schema_editor.execute(statement)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(searchindex.POSTGRES_REVERSE, params=None)
    elif schema_editor.connection.vendor == "sqlite":
        for statement in searchindex.SQLITE_REVERSE:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("threads", "0012_lgstore")]
    operations = [migrations.RunPython(forwards, backwards)]
