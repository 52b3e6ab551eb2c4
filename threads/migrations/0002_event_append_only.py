from django.db import migrations

from threads.database import guard as dbguard


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        # params=None: the SQL holds plpgsql's own % placeholders, not query parameters.
        schema_editor.execute(dbguard.POSTGRES_SQL, params=None)
    elif schema_editor.connection.vendor == "sqlite":
        for statement in dbguard.SQLITE_SQL:
            schema_editor.execute(statement)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(dbguard.POSTGRES_REVERSE)
    elif schema_editor.connection.vendor == "sqlite":
        for statement in dbguard.SQLITE_REVERSE:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("threads", "0001_initial")]
    operations = [migrations.RunPython(forwards, backwards)]
