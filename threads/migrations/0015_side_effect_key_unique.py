"""One side-effect record per idempotency key of a thread, held by the database.

Before the append path's `NOT EXISTS` guard, every call carrying a key made its own record, so
a database written then may hold several records for one (thread, key). They are merged into
the key's first record (the lowest call_seq, the one the guard would have kept) before the
constraint is added; nothing of the others is lost:

- the log is untouched: every call, result and resolution stays where it was;
- each merged record is written out whole to the audit log (`side_effect.merge`, its fields
  as `before`, the record it was merged into as `after`), so its id still leads somewhere;
- a resolution recorded on a merged record settles the kept one if that one is still running
  or unknown (the latest such resolution, by seq), as it would have had there been one record
  from the start; that move is audited too.

Going back removes the constraint only; merged records stay merged.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations, models
from django.db.models import Count

ACTOR = "migration 0015_side_effect_key_unique"
RESOLVABLE = ("running", "unknown")


def _record(effect: Any) -> dict[str, Any]:
    return {
        "tool_call_id": effect.tool_call_id,
        "tool_name": effect.tool_name,
        "idempotency_key": effect.idempotency_key,
        "status": effect.status,
        "call_seq": effect.call_seq,
        "call_event_id": effect.call_event_id,
        "result_seq": effect.result_seq,
        "request_id": effect.request_id,
        "updated_at": effect.updated_at.isoformat() if effect.updated_at else None,
    }


def merge_duplicate_keys(apps: Any, schema_editor: Any) -> None:
    side_effects = apps.get_model("threads", "SideEffect").objects.using(
        schema_editor.connection.alias
    )
    events = apps.get_model("threads", "Event").objects.using(schema_editor.connection.alias)
    audit = apps.get_model("threads", "AuditEntry").objects.using(schema_editor.connection.alias)
    groups = (
        side_effects.exclude(idempotency_key="")
        .values("thread_id", "idempotency_key")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .order_by("thread_id", "idempotency_key")
    )
    for group in list(groups):
        rows = list(
            side_effects.filter(
                thread_id=group["thread_id"], idempotency_key=group["idempotency_key"]
            )
            .select_related("thread")
            .order_by("call_seq")
        )
        kept, merged = rows[0], rows[1:]
        workspace_id = kept.thread.workspace_id
        for effect in merged:
            audit.create(
                workspace_id=workspace_id,
                actor_label=ACTOR,
                action="side_effect.merge",
                target_type="side_effect",
                target_id=str(effect.pk),
                thread_id=kept.thread_id,
                before=_record(effect),
                after={"merged_into": kept.pk, "call_seq": kept.call_seq},
            )
        if kept.status in RESOLVABLE:
            merged_calls = {effect.call_seq for effect in merged}
            resolutions = [
                (seq, data)
                for seq, data in events.filter(
                    thread_id=kept.thread_id, kind="side_effect_resolution"
                )
                .order_by("seq")
                .values_list("seq", "data")
                if data.get("call_seq") in merged_calls
            ]
            if resolutions:
                seq, data = resolutions[-1]
                side_effects.filter(pk=kept.pk).update(status=data["status"])
                audit.create(
                    workspace_id=workspace_id,
                    actor_label=ACTOR,
                    action="side_effect.merge",
                    target_type="side_effect",
                    target_id=str(kept.pk),
                    thread_id=kept.thread_id,
                    before={"status": kept.status},
                    after={"status": data["status"], "resolution_seq": seq},
                )
        side_effects.filter(pk__in=[effect.pk for effect in merged]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("threads", "0014_lgcompact"),
    ]

    operations = [
        migrations.RunPython(merge_duplicate_keys, migrations.RunPython.noop, elidable=False),
        migrations.AddConstraint(
            model_name="sideeffect",
            constraint=models.UniqueConstraint(
                condition=models.Q(("idempotency_key", ""), _negated=True),
                fields=("thread", "idempotency_key"),
                name="side_effect_key_unique",
            ),
        ),
    ]
