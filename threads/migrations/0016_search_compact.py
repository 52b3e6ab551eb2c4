"""The message-search index made smaller and cheaper to append to (docs/search.md,
"Message search").

PostgreSQL: the stored `search_vector` column goes (dropping a column rewrites no row) and the
GIN index is rebuilt over the expression itself, with a small pending list. SQLite: the FTS5
table is rebuilt without token positions or a size table (`detail = none, columnsize = 0`) and
merged. Both rebuild the index from every existing event; backwards restores 0013's shape the
same way."""

from django.db import migrations

from threads.database import search_index as searchindex
from threads.migrations import _search_0013 as before


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(before.POSTGRES_DROP_COLUMN + searchindex.POSTGRES_SQL, params=None)
    elif schema_editor.connection.vendor == "sqlite":
        for statement in [*searchindex.SQLITE_DROP_INDEX, *searchindex.SQLITE_INDEX]:
            schema_editor.execute(statement)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(searchindex.POSTGRES_DROP_INDEX + before.POSTGRES_SQL, params=None)
    elif schema_editor.connection.vendor == "sqlite":
        for statement in [*searchindex.SQLITE_DROP_INDEX, *before.SQLITE_INDEX]:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("threads", "0015_side_effect_key_unique")]
    operations = [migrations.RunPython(forwards, backwards)]
