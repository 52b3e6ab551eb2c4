"""What the side-effect ledger says about a LangGraph checkpoint's pending calls (docs/langgraph.md,
"Agent frameworks", the point "The ledger drives resume").

A checkpoint's mirrored messages may end with calls of side-effecting tools that its own list
does not answer: the call the graph's tool node would run next. The ledger (the side-effect
records, their results and resolutions in the log) may already hold such a call — it ran after
this state and a rollback brought the state back, or it raised, the run died, and a person
resolved it. `langgraph_ledger` answers those calls with their status and recorded outcome, and
templates of the tool node's task (a stored earlier task of the node that answered calls: its
task id, checkpoint, step, task_path and its non-message writes), from which the saver derives
the writes that let LangGraph route past the call instead of running it again.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

from integrations.langgraph_checkpointer.domain.messages import ERROR_CHANNEL, MESSAGES_CHANNEL
from integrations.langgraph_checkpointer.models import LanggraphCheckpoint
from integrations.langgraph_checkpointer.selectors.checkpoints import (
    LanggraphTuple,
    PendingWrite,
    _pending_writes,
    side_effects_stamped,
)
from integrations.langgraph_checkpointer.selectors.redacted import langgraph_forms_of_events
from threads.models import Event, EventKind, SideEffect, Thread

TEMPLATE_SCAN = 200  # the newest checkpoints of the namespace looked at for a template
TEMPLATES_KEPT = 4
RESOLVED_WINDOW = 50  # the last tool messages of a state looked at for a resolution since
FINAL = ("succeeded", "failed", "cancelled")


def pending_calls(forms: Sequence[Mapping[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """The tool calls of the AI messages in `forms` (LangChain JSON forms, in order) that no
    later tool message of the list answers: (the AI message's id, the call), in order."""
    calls: list[tuple[str, dict[str, Any]]] = []
    answered: set[str] = set()
    for form in forms:
        data = form.get("data") or {}
        if form.get("type") in ("ai", "AIMessageChunk"):
            for call in data.get("tool_calls") or []:
                if isinstance(call, dict) and call.get("id"):
                    calls.append((str(data.get("id") or ""), call))
        elif form.get("type") == "tool":
            answered.add(str(data.get("tool_call_id") or ""))
    return [(ai, call) for ai, call in calls if str(call["id"]) not in answered]


def langgraph_ledger(found: LanggraphTuple) -> dict[str, Any] | None:
    """The ledger's word on the checkpoint's unanswered side-effect calls, or None when it has
    none (no query then): `calls` (tool_call_id, tool_name, idempotency_key, arguments, status,
    call_seq, ai_message_id, the recorded `result` — the tool_result's status and the tool
    message's JSON form —, the latest `resolution`, and `raised`: a task raised in a stored
    state that holds the call, so its tool may have run), and `templates` of the tool node's
    task, newest first; and `resolved`: calls the state answers with a timeout that a person
    resolved since (tool_call_id, tool_name, idempotency_key, arguments, status, call_seq,
    resolution)."""
    row = found.row
    forms = found.messages.get(MESSAGES_CHANNEL)
    # The find statement counted the thread's side effects: with none, nothing to ask.
    if row.checkpoint_ns != "" or not forms or side_effects_stamped(row) == 0:
        return None
    resolved = _resolved_since(row.thread, forms)
    calls = _pending_calls(found, forms)
    if calls is None and not resolved:
        return None
    answer = calls or {"calls": [], "templates": []}
    return {**answer, "resolved": resolved}


def _resolved_since(thread: Thread, forms: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Side-effect calls the recent tool messages of `forms` answer with a timeout, which a
    person (or a status check) resolved since: the agent has not heard of the resolution."""
    answered = [
        str((form.get("data") or {}).get("tool_call_id"))
        for form in forms
        if form.get("type") == "tool"
    ][-RESOLVED_WINDOW:]
    # The common case, a thread with no finished side effect, costs one small query, not the
    # one that compiles a key per answered call (docs/benchmarks.md, "Issue #26's rounds").
    if not answered or not (SideEffect.objects.filter(thread=thread, status__in=FINAL).exists()):
        return []
    effects = {
        effect.call_seq: effect
        for effect in SideEffect.objects.filter(
            thread=thread, idempotency_key__in=answered, status__in=FINAL
        ).select_related("call_event")
        if effect.tool_call_id in answered
    }
    if not effects:
        return []
    resolutions: dict[int, dict[str, Any]] = {}
    for seq, data in (
        Event.objects.filter(
            thread=thread,
            kind=EventKind.SIDE_EFFECT_RESOLUTION,
            data__call_seq__in=list(effects),
        )
        .order_by("seq")
        .values_list("seq", "data")
    ):
        if isinstance(data.get("call_seq"), int):
            resolutions[data["call_seq"]] = {
                "seq": seq,
                "status": data.get("status"),
                "evidence": data.get("evidence", ""),
                "actor": data.get("actor", ""),
            }
    if not resolutions:
        return []
    timed_out = set(
        Event.objects.filter(
            thread=thread,
            kind=EventKind.TOOL_RESULT,
            seq__in=[e.result_seq for s, e in effects.items() if s in resolutions],
            data__status="timeout",
        ).values_list("seq", flat=True)
    )
    return [
        {
            "tool_call_id": effect.tool_call_id,
            "tool_name": effect.tool_name,
            "idempotency_key": effect.idempotency_key,
            "arguments": effect.call_event.data.get("arguments"),
            "status": effect.status,
            "call_seq": call_seq,
            "resolution": resolutions[call_seq],
        }
        for call_seq, effect in sorted(effects.items())
        if call_seq in resolutions and effect.result_seq in timed_out
    ]


def _pending_calls(
    found: LanggraphTuple, forms: Sequence[Mapping[str, Any]]
) -> dict[str, Any] | None:
    """`calls` and `templates` (see langgraph_ledger), or None when no call is pending."""
    row = found.row
    pending = pending_calls(forms)
    if not pending:
        return None
    thread = row.thread
    effects = {
        effect.tool_call_id: effect
        for effect in SideEffect.objects.filter(
            thread=thread, tool_call_id__in=[str(call["id"]) for _, call in pending]
        ).select_related("call_event")
    }
    if not effects:
        return None
    result_seqs = [e.result_seq for e in effects.values() if e.result_seq is not None]
    result_rows = list(
        Event.objects.filter(
            thread=thread, seq__in=result_seqs, kind=EventKind.TOOL_RESULT
        ).values_list("seq", "kind", "data", "metadata")
    )
    result_forms = langgraph_forms_of_events(thread, result_rows)
    results = {seq: (data, metadata, result_forms[seq]) for seq, _, data, metadata in result_rows}
    resolutions: dict[int, dict[str, Any]] = {}
    for seq, data in (
        Event.objects.filter(
            thread=thread,
            kind=EventKind.SIDE_EFFECT_RESOLUTION,
            data__call_seq__in=[e.call_seq for e in effects.values()],
        )
        .order_by("seq")
        .values_list("seq", "data")
    ):
        call_seq = data.get("call_seq")
        if isinstance(call_seq, int):
            resolutions[call_seq] = {
                "seq": seq,
                "status": data.get("status"),
                "evidence": data.get("evidence", ""),
                "actor": data.get("actor", ""),
            }
    calls = []
    for ai_message_id, call in pending:
        effect = effects.get(str(call["id"]))
        if effect is None:
            continue
        result = None
        if effect.result_seq is not None and effect.result_seq in results:
            data, _, form = results[effect.result_seq]
            result = {"seq": effect.result_seq, "status": data.get("status"), "message": form}
        calls.append(
            {
                "tool_call_id": effect.tool_call_id,
                "tool_name": effect.tool_name,
                "idempotency_key": effect.idempotency_key,
                "arguments": effect.call_event.data.get("arguments"),
                "status": effect.status,
                "call_seq": effect.call_seq,
                "ai_message_id": ai_message_id,
                "result": result,
                "resolution": resolutions.get(effect.call_seq),
            }
        )
    if not calls:
        return None
    wanted = {c["result"]["seq"] for c in calls if c["result"] is not None}
    templates, raised_at = _templates(thread, row, wanted)
    for call in calls:
        # A task raised in a state that holds the call: its tool may have run.
        call["raised"] = any(cursor >= call["call_seq"] for cursor in raised_at)
    return {"calls": calls, "templates": templates}


def _node_of(task_path: str) -> str | None:
    """The node of a PULL task's path as LangGraph writes it (`~__pregel_pull, <node>`)."""
    parts = [p.strip() for p in task_path.lstrip("~").split(",")]
    if len(parts) == 2 and parts[0] == "__pregel_pull" and parts[1]:
        return parts[1]
    return None


def _templates(
    thread: Thread, head: LanggraphCheckpoint, wanted: set[int]
) -> tuple[list[dict[str, Any]], list[int]]:
    """Stored tasks of the namespace whose write of messages holds only tool results (a tool
    node's), newest first: those that wrote one of the `wanted` results first, then the
    newest others; each with its checkpoint id and step, task id and path, the tool call ids
    it answered and its writes other than messages (as stored: type and base64 bytes). And the
    cursors of the checkpoints with a task that raised (an `__error__` write)."""
    rows = list(
        LanggraphCheckpoint.objects.filter(
            thread=thread, checkpoint_ns=head.checkpoint_ns
        ).order_by("-checkpoint_id")[:TEMPLATE_SCAN]
    )
    by_checkpoint = _pending_writes(
        thread, [LanggraphTuple(row=row, external_id="") for row in rows]
    )
    tasks: list[tuple[LanggraphCheckpoint, str, list[PendingWrite]]] = []
    seqs: set[int] = set()
    raised_at: list[int] = []
    for row in rows:
        grouped: dict[str, list[PendingWrite]] = {}
        for write in by_checkpoint.get((row.checkpoint_ns, row.checkpoint_id), []):
            grouped.setdefault(write.task_id, []).append(write)
            if write.channel == ERROR_CHANNEL:
                raised_at.append(row.cursor)
        for task_id, writes in grouped.items():
            messages = [w for w in writes if w.channel == MESSAGES_CHANNEL and w.message_seqs]
            if messages and _node_of(writes[0].task_path) is not None:
                tasks.append((row, task_id, writes))
                seqs.update(int(s) for w in messages for s in w.message_seqs or ())
    events = {
        seq: (kind, data)
        for seq, kind, data in Event.objects.filter(thread=thread, seq__in=seqs).values_list(
            "seq", "kind", "data"
        )
    }
    found: list[tuple[bool, dict[str, Any]]] = []
    for row, task_id, writes in tasks:
        message_seqs = [
            int(s) for w in writes if w.channel == MESSAGES_CHANNEL for s in w.message_seqs or ()
        ]
        kinds = [events.get(s, ("", {}))[0] for s in message_seqs]
        if not kinds or any(k != EventKind.TOOL_RESULT for k in kinds):
            continue
        step = row.metadata.get("step")
        if not isinstance(step, int):
            continue
        found.append(
            (
                bool(wanted.intersection(message_seqs)),
                {
                    "checkpoint_id": row.checkpoint_id,
                    "step": step,
                    "task_id": task_id,
                    "task_path": writes[0].task_path,
                    "answered": [str(events[s][1].get("tool_call_id")) for s in message_seqs],
                    "writes": [
                        {
                            "idx": w.idx,
                            "channel": w.channel,
                            "type": w.type,
                            "data": base64.b64encode(bytes(w.data)).decode("ascii"),
                        }
                        for w in writes
                        if w.channel != MESSAGES_CHANNEL and w.idx >= 0
                    ],
                },
            )
        )
    exact = [t for hit, t in found if hit]
    others = [t for hit, t in found if not hit]
    return [*exact, *others][:TEMPLATES_KEPT], raised_at
