"""PostgreSQL: the thread list's trigram indexes (0017) without GIN's pending list.

A thread's row is rewritten by every append (its head, its last seq, its time), and each new
version of the row is indexed again. With GIN's default `fastupdate`, each version's trigrams
went to the index's pending list as entries of their own, so a busy thread's indexes grew by
its trigrams at every append until a vacuum merged them (docs/benchmarks.md, "Issue #26's
rounds": 115 kB for 400 appends to one thread); without it, a version's trigrams join the
posting lists of the same trigrams already there, a few bytes each, and a name search reads no
unsorted list. 0017 now creates them so; this sets the option on indexes made before, and
merges their pending lists."""

from django.db import migrations

# 0017's indexes; absent where pg_trgm could not be created (0017 says so and goes on).
INDEXES = ("thread_external_id_trgm", "thread_title_trgm")


def _fastupdate(schema_editor, value: str) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    for name in INDEXES:
        schema_editor.execute(f"ALTER INDEX IF EXISTS {name} SET (fastupdate = {value})")
        if value == "off":  # what the pending list holds goes into the index itself
            schema_editor.execute(
                "SELECT gin_clean_pending_list(to_regclass(%s)) WHERE to_regclass(%s) IS NOT NULL",
                [name, name],
            )


def forwards(apps, schema_editor):
    _fastupdate(schema_editor, "off")


def backwards(apps, schema_editor):
    _fastupdate(schema_editor, "on")


class Migration(migrations.Migration):
    dependencies = [("threads", "0029_redact_secrets_at_ingest")]

    operations = [migrations.RunPython(forwards, backwards)]
