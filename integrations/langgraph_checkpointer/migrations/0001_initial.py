"""The LangGraph checkpointer's models, taken over from the core app (threads 0025): state only.
The tables were made by threads 0006, 0012, 0014 and 0021 and keep their names and rows."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("threads", "0025_integrations_move_out"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="LanggraphContent",
                    fields=[
                        (
                            "sha256",
                            models.CharField(max_length=64, primary_key=True, serialize=False),
                        ),
                        ("data", models.BinaryField()),
                        ("size", models.PositiveBigIntegerField()),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                    ],
                    options={
                        "db_table": "threads_langgraphcontent",
                    },
                ),
                migrations.CreateModel(
                    name="LanggraphCheckpoint",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("checkpoint_ns", models.CharField(blank=True, default="", max_length=255)),
                        ("checkpoint_id", models.CharField(max_length=64)),
                        (
                            "parent_checkpoint_id",
                            models.CharField(blank=True, default="", max_length=64),
                        ),
                        ("checkpoint_z", models.BinaryField()),
                        ("values_z", models.BinaryField(blank=True, default=b"")),
                        ("writes_z", models.BinaryField(blank=True, default=b"")),
                        ("metadata", models.JSONField(default=dict)),
                        ("run_id", models.CharField(blank=True, default="", max_length=200)),
                        ("cursor", models.PositiveBigIntegerField(default=0)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "ctxadmin_checkpoint",
                            models.OneToOneField(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="langgraph",
                                to="threads.checkpoint",
                            ),
                        ),
                        (
                            "thread",
                            models.ForeignKey(
                                db_index=False,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="lg_checkpoints",
                                to="threads.thread",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "threads_langgraphcheckpoint",
                        "indexes": [
                            models.Index(
                                condition=models.Q(("run_id", ""), _negated=True),
                                fields=["run_id"],
                                name="lg_checkpoint_run",
                            )
                        ],
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("thread", "checkpoint_ns", "checkpoint_id"),
                                name="lg_checkpoint_unique",
                            )
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="LanggraphChannelVersion",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("checkpoint_ns", models.CharField(blank=True, default="", max_length=255)),
                        ("channel", models.CharField(max_length=255)),
                        ("version", models.CharField(max_length=255)),
                        ("type", models.CharField(max_length=64)),
                        ("data", models.BinaryField(blank=True, null=True)),
                        (
                            "messages_until_seq",
                            models.PositiveBigIntegerField(blank=True, null=True),
                        ),
                        ("message_seqs", models.JSONField(blank=True, null=True)),
                        ("message_count", models.PositiveIntegerField(blank=True, null=True)),
                        ("cursor", models.PositiveBigIntegerField(default=0)),
                        (
                            "thread",
                            models.ForeignKey(
                                db_index=False,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="lg_versions",
                                to="threads.thread",
                            ),
                        ),
                        (
                            "content",
                            models.ForeignKey(
                                blank=True,
                                db_index=False,
                                null=True,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to="langgraph_checkpointer.langgraphcontent",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "threads_langgraphchannelversion",
                        "indexes": [
                            models.Index(
                                condition=models.Q(("content__isnull", False)),
                                fields=["content"],
                                name="lg_version_content",
                            )
                        ],
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("thread", "checkpoint_ns", "channel", "version"),
                                name="lg_version_unique",
                            )
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="LanggraphMessage",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("message_id", models.CharField(max_length=200)),
                        ("digest", models.CharField(max_length=64)),
                        ("seq", models.PositiveBigIntegerField()),
                        ("last_seq", models.PositiveBigIntegerField()),
                        (
                            "thread",
                            models.ForeignKey(
                                db_index=False,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="lg_messages",
                                to="threads.thread",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "threads_langgraphmessage",
                        "indexes": [
                            models.Index(
                                fields=["thread", "last_seq"], name="threads_lan_thread__935def_idx"
                            )
                        ],
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("thread", "message_id", "digest"), name="lg_message_unique"
                            )
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="LanggraphWrite",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("checkpoint_ns", models.CharField(blank=True, default="", max_length=255)),
                        ("checkpoint_id", models.CharField(max_length=64)),
                        ("task_id", models.CharField(max_length=200)),
                        ("task_path", models.CharField(blank=True, default="", max_length=500)),
                        ("writes_z", models.BinaryField()),
                        ("interrupts", models.JSONField(blank=True, null=True)),
                        (
                            "thread",
                            models.ForeignKey(
                                db_index=False,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="lg_writes",
                                to="threads.thread",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "threads_langgraphwrite",
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("thread", "checkpoint_ns", "checkpoint_id", "task_id"),
                                name="lg_write_task_unique",
                            )
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
