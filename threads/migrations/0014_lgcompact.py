"""LangGraph bookkeeping packed into fewer rows: a checkpoint row carries the small values of
its channel versions (their version rows go) and its tasks' pending writes (their rows go); the
writes of a checkpoint that is not stored are one row per task instead of one per write. Both
ways lossless: going back, the version rows and the write rows are made again from what the
packed rows hold."""

from collections import defaultdict

from django.db import migrations, models

from integrations.langgraph_checkpointer.domain.messages import checkpoint_unpack
from integrations.langgraph_checkpointer.domain.packing import (
    PackedWrite,
    TaskWrites,
    tasks_pack,
    tasks_unpack,
    values_pack,
    values_unpack,
    writes_pack,
    writes_unpack,
)


def _checks_now(schema_editor):  # type: ignore[no-untyped-def]
    """Foreign keys checked as rows are written, not at commit: PostgreSQL refuses to alter a
    table with checks still pending, and this migration alters the tables it refills."""
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("SET CONSTRAINTS ALL IMMEDIATE")


def _versions(checkpoint_z):  # type: ignore[no-untyped-def]
    checkpoint = checkpoint_unpack(bytes(checkpoint_z))
    return {str(c): str(v) for c, v in (checkpoint.get("channel_versions") or {}).items()}


def _is_small(version):  # type: ignore[no-untyped-def]
    return (
        version.content_id is None
        and version.messages_until_seq is None
        and version.message_seqs is None
    )


def _carry_values(apps, schema_editor):  # type: ignore[no-untyped-def]
    _checks_now(schema_editor)
    checkpoints = apps.get_model("threads", "LanggraphCheckpoint")
    versions = apps.get_model("threads", "LanggraphChannelVersion")
    for thread_id in checkpoints.objects.values_list("thread_id", flat=True).distinct():
        rows = {
            (v.checkpoint_ns, v.channel, v.version): v
            for v in versions.objects.filter(thread_id=thread_id)
        }
        carried = set()
        for row in checkpoints.objects.filter(thread_id=thread_id).only(
            "pk", "checkpoint_ns", "checkpoint_z"
        ):
            values = {}
            for channel, version in _versions(row.checkpoint_z).items():
                stored = rows.get((row.checkpoint_ns, channel, version))
                if stored is None:
                    continue
                if _is_small(stored):
                    values[channel] = (stored.type, bytes(stored.data or b""))
                    carried.add(stored.pk)
                else:
                    values[channel] = None
            row.values_z = values_pack(values)
            row.save(update_fields=["values_z"])
        # A small version no checkpoint names keeps its row: nothing else holds it.
        versions.objects.filter(pk__in=carried).delete()


def _uncarry_values(apps, schema_editor):  # type: ignore[no-untyped-def]
    _checks_now(schema_editor)
    checkpoints = apps.get_model("threads", "LanggraphCheckpoint")
    versions = apps.get_model("threads", "LanggraphChannelVersion")
    for row in checkpoints.objects.exclude(values_z=b"").iterator(chunk_size=500):
        named = _versions(row.checkpoint_z)
        versions.objects.bulk_create(
            [
                versions(
                    thread_id=row.thread_id,
                    checkpoint_ns=row.checkpoint_ns,
                    channel=channel,
                    version=named[channel],
                    type=value[0],
                    data=value[1],
                )
                for channel, value in values_unpack(bytes(row.values_z)).items()
                if value is not None and channel in named
            ],
            ignore_conflicts=True,
        )


def _pack_writes(apps, schema_editor):  # type: ignore[no-untyped-def]
    _checks_now(schema_editor)
    model = apps.get_model("threads", "LanggraphWrite")
    checkpoints = apps.get_model("threads", "LanggraphCheckpoint")
    tasks = defaultdict(list)
    for row in model.objects.order_by("pk").iterator(chunk_size=500):
        tasks[(row.thread_id, row.checkpoint_ns, row.checkpoint_id, row.task_id)].append(row)
    carried = defaultdict(list)
    for (thread_id, ns, checkpoint_id, task_id), rows in tasks.items():
        writes = [
            PackedWrite(
                idx=row.idx,
                channel=row.channel,
                type=row.type,
                data=bytes(row.data or b""),
                message_seqs=None
                if row.message_seqs is None
                else [int(seq) for seq in row.message_seqs],
            )
            for row in rows
        ]
        holder = checkpoints.objects.filter(
            thread_id=thread_id, checkpoint_ns=ns, checkpoint_id=checkpoint_id
        ).first()
        if holder is not None:
            carried[holder.pk].append(TaskWrites(task_id, rows[0].task_path, writes))
            model.objects.filter(pk__in=[row.pk for row in rows]).delete()
            continue
        first = rows[0]
        first.writes_z = writes_pack(writes)
        first.save(update_fields=["writes_z"])
        model.objects.filter(pk__in=[row.pk for row in rows[1:]]).delete()
    for pk, task_writes in carried.items():
        checkpoints.objects.filter(pk=pk).update(writes_z=tasks_pack(task_writes))


def _write_rows(model, row, task_id, task_path, writes):  # type: ignore[no-untyped-def]
    model.objects.bulk_create(
        [
            model(
                thread_id=row.thread_id,
                checkpoint_ns=row.checkpoint_ns,
                checkpoint_id=row.checkpoint_id,
                task_id=task_id,
                task_path=task_path,
                idx=write.idx,
                channel=write.channel,
                type=write.type,
                data=write.data,
                message_seqs=write.message_seqs,
                writes_z=b"",
            )
            for write in writes
        ]
    )


def _unpack_writes(apps, schema_editor):  # type: ignore[no-untyped-def]
    _checks_now(schema_editor)
    model = apps.get_model("threads", "LanggraphWrite")
    checkpoints = apps.get_model("threads", "LanggraphCheckpoint")
    for row in list(model.objects.order_by("pk")):
        _write_rows(model, row, row.task_id, row.task_path, writes_unpack(bytes(row.writes_z)))
        row.delete()
    for holder in checkpoints.objects.exclude(writes_z=b"").iterator(chunk_size=500):
        for task in tasks_unpack(bytes(holder.writes_z)):
            _write_rows(model, holder, task.task_id, task.task_path, task.writes)


class Migration(migrations.Migration):
    dependencies = [
        ("threads", "0013_event_search"),
    ]

    operations = [
        migrations.AddField(
            model_name="langgraphcheckpoint",
            name="values_z",
            field=models.BinaryField(blank=True, default=b""),
        ),
        migrations.RunPython(_carry_values, _uncarry_values),
        migrations.AddField(
            model_name="langgraphcheckpoint",
            name="writes_z",
            field=models.BinaryField(blank=True, default=b""),
        ),
        migrations.AddField(
            model_name="langgraphwrite",
            name="writes_z",
            field=models.BinaryField(default=b""),
            preserve_default=False,
        ),
        # Nullable while packed, so that going back can add the columns before refilling them.
        migrations.AlterField(
            model_name="langgraphwrite", name="idx", field=models.IntegerField(null=True)
        ),
        migrations.AlterField(
            model_name="langgraphwrite",
            name="channel",
            field=models.CharField(default="", max_length=255),
        ),
        migrations.AlterField(
            model_name="langgraphwrite",
            name="type",
            field=models.CharField(default="", max_length=64),
        ),
        migrations.AlterField(
            model_name="langgraphwrite", name="data", field=models.BinaryField(null=True)
        ),
        migrations.RemoveConstraint(model_name="langgraphwrite", name="lg_write_unique"),
        migrations.RunPython(_pack_writes, _unpack_writes),
        migrations.RemoveField(model_name="langgraphwrite", name="idx"),
        migrations.RemoveField(model_name="langgraphwrite", name="channel"),
        migrations.RemoveField(model_name="langgraphwrite", name="type"),
        migrations.RemoveField(model_name="langgraphwrite", name="data"),
        migrations.RemoveField(model_name="langgraphwrite", name="message_seqs"),
        migrations.AddConstraint(
            model_name="langgraphwrite",
            constraint=models.UniqueConstraint(
                fields=("thread", "checkpoint_ns", "checkpoint_id", "task_id"),
                name="lg_write_task_unique",
            ),
        ),
    ]
