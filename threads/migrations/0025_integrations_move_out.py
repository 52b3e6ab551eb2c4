"""The LangGraph checkpointer's models and TraceImport move to apps of their own
(integrations.langgraph_checkpointer, integrations.trace_imports). State only: their tables keep
their names and rows; the apps' 0001 migrations take them over, again state only."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("threads", "0024_import_limits"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(
                    model_name="langgraphchannelversion",
                    name="content",
                ),
                migrations.RemoveField(
                    model_name="langgraphchannelversion",
                    name="thread",
                ),
                migrations.RemoveField(
                    model_name="langgraphcheckpoint",
                    name="ctxadmin_checkpoint",
                ),
                migrations.RemoveField(
                    model_name="langgraphcheckpoint",
                    name="thread",
                ),
                migrations.RemoveField(
                    model_name="langgraphmessage",
                    name="thread",
                ),
                migrations.RemoveField(
                    model_name="langgraphwrite",
                    name="thread",
                ),
                migrations.RemoveField(
                    model_name="traceimport",
                    name="created_by",
                ),
                migrations.RemoveField(
                    model_name="traceimport",
                    name="task_run",
                ),
                migrations.RemoveField(
                    model_name="traceimport",
                    name="workspace",
                ),
                migrations.DeleteModel(
                    name="LanggraphContent",
                ),
                migrations.DeleteModel(
                    name="LanggraphChannelVersion",
                ),
                migrations.DeleteModel(
                    name="LanggraphCheckpoint",
                ),
                migrations.DeleteModel(
                    name="LanggraphMessage",
                ),
                migrations.DeleteModel(
                    name="LanggraphWrite",
                ),
                migrations.DeleteModel(
                    name="TraceImport",
                ),
            ],
            database_operations=[],
        ),
    ]
