"""LangGraph storage made compact: checkpoint JSON compressed, small channel values in their
version row, references to the log for message writes, and no index a unique constraint already
covers."""

import django.db.models.deletion
from django.db import migrations, models

from integrations.langgraph_checkpointer.domain.messages import checkpoint_pack, checkpoint_unpack


def _pack(apps, schema_editor):  # type: ignore[no-untyped-def]
    model = apps.get_model("threads", "LanggraphCheckpoint")
    for row in model.objects.only("pk", "checkpoint").iterator(chunk_size=500):
        row.checkpoint_z = checkpoint_pack(row.checkpoint)
        row.save(update_fields=["checkpoint_z"])


def _unpack(apps, schema_editor):  # type: ignore[no-untyped-def]
    model = apps.get_model("threads", "LanggraphCheckpoint")
    for row in model.objects.only("pk", "checkpoint_z").iterator(chunk_size=500):
        row.checkpoint = checkpoint_unpack(bytes(row.checkpoint_z))
        row.save(update_fields=["checkpoint"])


class Migration(migrations.Migration):
    dependencies = [
        ("threads", "0011_metrics"),
    ]

    operations = [
        migrations.AddField(
            model_name="langgraphcheckpoint",
            name="checkpoint_z",
            field=models.BinaryField(default=b""),
            preserve_default=False,
        ),
        migrations.AlterField(
            model_name="langgraphcheckpoint",
            name="checkpoint",
            field=models.JSONField(null=True),
        ),
        migrations.RunPython(_pack, _unpack),
        migrations.RemoveField(model_name="langgraphcheckpoint", name="checkpoint"),
        migrations.RemoveIndex(
            model_name="langgraphcheckpoint", name="threads_lan_thread__94fcdc_idx"
        ),
        migrations.AddField(
            model_name="langgraphchannelversion",
            name="data",
            field=models.BinaryField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="langgraphchannelversion",
            name="message_count",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="langgraphwrite",
            name="message_seqs",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="langgraphchannelversion",
            name="content",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="threads.langgraphcontent",
            ),
        ),
        migrations.AlterField(
            model_name="langgraphchannelversion",
            name="thread",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="lg_versions",
                to="threads.thread",
            ),
        ),
        migrations.AlterField(
            model_name="langgraphcheckpoint",
            name="run_id",
            field=models.CharField(blank=True, default="", max_length=200),
        ),
        migrations.AlterField(
            model_name="langgraphcheckpoint",
            name="thread",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="lg_checkpoints",
                to="threads.thread",
            ),
        ),
        migrations.AlterField(
            model_name="langgraphmessage",
            name="thread",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="lg_messages",
                to="threads.thread",
            ),
        ),
        migrations.AlterField(
            model_name="langgraphwrite",
            name="thread",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="lg_writes",
                to="threads.thread",
            ),
        ),
        migrations.AddIndex(
            model_name="langgraphchannelversion",
            index=models.Index(
                condition=models.Q(("content__isnull", False)),
                fields=["content"],
                name="lg_version_content",
            ),
        ),
        migrations.AddIndex(
            model_name="langgraphcheckpoint",
            index=models.Index(
                condition=models.Q(("run_id", ""), _negated=True),
                fields=["run_id"],
                name="lg_checkpoint_run",
            ),
        ),
    ]
