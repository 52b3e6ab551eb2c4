"""Exactly once for `CtxadminSaver`: the side-effect ledger drives resume (docs/langgraph.md,
"Agent frameworks", docs/clients.md, "Exactly once with LangGraph").

A checkpoint read answers, beside the state, the ledger's word on the calls of side-effecting
tools that the state's last AI message leaves unanswered (`ledger`). When the graph would
resume into such a call (its tool node is the next task) and the ledger already holds it:

- recorded outcome (the tool's result, or a person's resolution): the read returns the state
  with that result after the call, and pending writes for the task that would run it — the
  result and the other writes the tool node's task made when it ran (its routing) — so that
  LangGraph skips the task as one that finished and routes past it. The task's id is LangGraph's
  own (`prepare_single_task`): derived from the checkpoint id, step, node and triggers, and
  trusted only when the same derivation gives a stored task of that node its id exactly; when
  the state's own checkpoint holds the task's error (the run died in the tool), that write's
  task id is the id;
- unknown outcome (`unknown` after a timeout, `running` after its tool raised): the read
  raises `SideEffectPending`; a person's resolution lets the next run go on.

Nothing here runs a tool; when the writes cannot be derived the read raises
`SideEffectRecorded` instead of letting the graph run the call again.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage, ToolMessage, messages_from_dict
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.pregel._algo import _uuid5_str, _xxhash_str

from ctxadmin_client._langgraph_messages import MESSAGES_CHANNEL
from ctxadmin_client.errors import SideEffectPending, SideEffectRecorded

ERROR = "__error__"  # LangGraph's channel of a task's exception
ERROR_SOURCE = "__error_source_node__"
PULL = "__pregel_pull"
OUTCOME_KEY = "ctxadmin_outcome"  # a tool message's own statement of its call's outcome
RESULT_PREFIX = "ctxadmin-outcome-"
RESOLUTION_NOTE_PREFIX = "ctxadmin-resolution-"


def node_of(task_path: str) -> str | None:
    """The node of a PULL task's path as LangGraph passes it to put_writes (`~__pregel_pull,
    <node>`)."""
    parts = [p.strip() for p in str(task_path).lstrip("~").split(",")]
    if len(parts) == 2 and parts[0] == PULL and parts[1]:
        return parts[1]
    return None


def pull_task_id(
    checkpoint_id: str, version: int, step: int, node: str, triggers: Sequence[str]
) -> str:
    """The id LangGraph gives the PULL task of a root-graph `node` prepared from the checkpoint
    `checkpoint_id` at `step` (LangGraph's own functions, as `prepare_single_task` calls them)."""
    id_bytes = binascii.unhexlify(checkpoint_id.replace("-", ""))
    task_id_func = _xxhash_str if version > 1 else _uuid5_str
    return task_id_func(id_bytes, node, str(step), node, PULL, *sorted(triggers))


def _trigger_candidates(node: str) -> list[tuple[str, ...]]:
    """The triggers a StateGraph node has (LangGraph 1.x: its branch channel; older: others)."""
    return [(f"branch:to:{node}",), (f"start:{node}",), (node,)]


def verified_triggers(template: Mapping[str, Any], version: int) -> tuple[str, ...] | None:
    """The triggers with which LangGraph's derivation gives the stored task of `template` its
    id exactly, or None: then no id derived this way can be trusted."""
    node = node_of(str(template.get("task_path", "")))
    step = template.get("step")
    if node is None or not isinstance(step, int):
        return None
    for triggers in _trigger_candidates(node):
        try:
            derived = pull_task_id(
                str(template["checkpoint_id"]), version, step + 1, node, triggers
            )
        except (binascii.Error, ValueError):
            return None
        if derived == template.get("task_id"):
            return triggers
    return None


def _pending(call: Mapping[str, Any]) -> SideEffectPending:
    """The agent is held at the call (it waits in the side-effect queue for a resolution)."""
    return SideEffectPending(
        call_id=str(call.get("tool_call_id")),
        tool_name=str(call.get("tool_name")),
        idempotency_key=str(call.get("idempotency_key")),
        status=str(call.get("status")),
        side_effect=dict(call),
    )


def _recorded(call: Mapping[str, Any], reason: str) -> SideEffectRecorded:
    return SideEffectRecorded(
        call_id=str(call.get("tool_call_id")),
        tool_name=str(call.get("tool_name")),
        idempotency_key=str(call.get("idempotency_key")),
        status=str(call.get("status")),
        reason=reason,
        side_effect=dict(call),
    )


def _outcome(call: Mapping[str, Any], raised_here: bool) -> str:
    """ "recorded" (a result or a resolution settles it), "pending" (its outcome is unknown:
    hold the agent), or "fresh" (it never ran: the graph runs it now)."""
    if call.get("resolution"):
        return "recorded"
    result = call.get("result")
    if result:
        return "pending" if result.get("status") == "timeout" else "recorded"
    if call.get("status") in ("succeeded", "failed", "cancelled"):
        return "recorded"
    if call.get("status") == "unknown" or call.get("raised") or raised_here:
        return "pending"
    return "fresh"


def _describe(call: Mapping[str, Any]) -> str:
    arguments = json.dumps(call.get("arguments"), sort_keys=True, default=str)
    return (
        f"{call.get('tool_name')}({arguments}), tool call {call.get('tool_call_id')}, "
        f"idempotency key {call.get('idempotency_key')}"
    )


def _result_message(call: Mapping[str, Any]) -> BaseMessage:
    """The call's recorded result as a tool message: the very message the log holds (so the log
    gains no second result), or one made from the person's resolution."""
    result = call.get("result")
    if result and isinstance(result.get("message"), dict):
        return messages_from_dict([result["message"]])[0]
    resolution = call.get("resolution") or {}
    status = str(resolution.get("status") or call.get("status"))
    text = (
        f"ctxadmin did not run this call again: its outcome is recorded as {status}, resolved "
        f"by {resolution.get('actor') or 'a person'} (evidence: {resolution.get('evidence')}). "
        "Do not repeat it; to do it again on purpose, use a new idempotency key."
    )
    return ToolMessage(
        text,
        tool_call_id=str(call["tool_call_id"]),
        name=str(call.get("tool_name") or ""),
        status="success" if status == "succeeded" else "error",
        id=f"{RESULT_PREFIX}{call['tool_call_id']}",
        additional_kwargs={OUTCOME_KEY: status},
    )


def _resolution_note(call: Mapping[str, Any]) -> SystemMessage:
    """A note for a call whose recorded result is a timeout that a person resolved since."""
    resolution = call.get("resolution") or {}
    return SystemMessage(
        f"The outcome of {_describe(call)} was unknown (it timed out); "
        f"{resolution.get('actor') or 'a person'} recorded it as {resolution.get('status')} "
        f"(evidence: {resolution.get('evidence')}). Do not repeat it.",
        id=f"{RESOLUTION_NOTE_PREFIX}{resolution.get('seq')}",
    )


def _triggered(checkpoint: Mapping[str, Any], node: str, triggers: Sequence[str]) -> bool:
    """Whether LangGraph prepares a task of `node` from the checkpoint, as its `_triggers`
    decides: a trigger channel that holds a value (a consumed one is empty, so absent from
    the channel values) and was updated since the node last saw it."""
    values = checkpoint.get("channel_values") or {}
    versions = checkpoint.get("channel_versions") or {}
    seen = (checkpoint.get("versions_seen") or {}).get(node) or {}
    return any(t in values and t in versions and seen.get(t) != versions[t] for t in triggers)


def ledger_apply(
    found: CheckpointTuple,
    answer: Mapping[str, Any],
    serde: SerializerProtocol,
    note_position: Any,
) -> CheckpointTuple:
    """`found` as the graph must resume from it given the ledger in `answer` (see the module's
    docstring). Raises SideEffectPending, SideEffectRecorded."""
    ledger = answer.get("ledger")
    if not isinstance(ledger, dict) or answer["checkpoint_ns"] != "":
        return found
    found = _resolutions_told(found, ledger, note_position)
    if not ledger.get("calls"):
        return found
    values = found.checkpoint["channel_values"]
    messages = values.get(MESSAGES_CHANNEL)
    if not isinstance(messages, list):
        return found
    index = next(
        (
            i
            for i in range(len(messages) - 1, -1, -1)
            if getattr(messages[i], "type", None) in ("ai", "AIMessageChunk")
            and getattr(messages[i], "tool_calls", None)
        ),
        None,
    )
    if index is None:
        return found
    end = index + 1
    while end < len(messages) and getattr(messages[end], "type", None) == "tool":
        end += 1
    answered = {str(getattr(m, "tool_call_id", "")) for m in messages[index + 1 : end]}
    waiting = [c for c in messages[index].tool_calls if str(c.get("id")) not in answered]
    by_id = {str(c["tool_call_id"]): c for c in ledger["calls"]}
    held = [by_id[str(c.get("id"))] for c in waiting if str(c.get("id")) in by_id]
    if not held:
        return found
    raw_writes: Sequence[Mapping[str, Any]] = answer.get("writes") or []
    errors = [w for w in raw_writes if w.get("channel") == ERROR and node_of(w["task_path"])]
    outcomes = {str(c["tool_call_id"]): _outcome(c, bool(errors)) for c in held}
    for call in held:
        if outcomes[str(call["tool_call_id"])] == "pending":
            raise _pending(call)
    recorded = [c for c in held if outcomes[str(c["tool_call_id"])] == "recorded"]
    if not recorded:
        return found  # nothing of it ran: the graph runs the calls now
    if len(recorded) < len(waiting):
        call = recorded[0]
        raise _recorded(
            call,
            "the same AI message asks for calls that have not run: a tool node runs them all, "
            "so ctxadmin cannot skip only this one",
        )
    version = int(found.checkpoint.get("v", 1) or 1)
    task_id, node, triggers = _task_for(found, ledger, errors, version, recorded[0])
    if node is not None and triggers is not None and task_id is None:
        return found  # the tool node is not what runs next from here: nothing to skip yet
    assert task_id is not None
    pending = list(found.pending_writes or [])
    if any(t == task_id and ch not in (ERROR, ERROR_SOURCE) for t, ch, _ in pending):
        return found  # the task finished already: LangGraph reapplies its writes
    results = [_result_message(c) for c in recorded]
    notes = [_resolution_note(c) for c in recorded if c.get("result") and c.get("resolution")]
    restored = [*messages[:end], *results, *messages[end:]]
    for note in notes:
        if not any(getattr(m, "id", None) == note.id for m in restored):
            position = note_position(restored)
            restored = [*restored[:position], note, *restored[position:]]
    template_writes = _template_writes(ledger, node, serde)
    writes = [
        *[(t, ch, v) for t, ch, v in pending if not (t == task_id and ch in (ERROR, ERROR_SOURCE))],
        (task_id, MESSAGES_CHANNEL, results),
        *[(task_id, ch, v) for ch, v in template_writes],
    ]
    checkpoint: Any = {**found.checkpoint, "channel_values": {**values, MESSAGES_CHANNEL: restored}}
    return found._replace(checkpoint=checkpoint, pending_writes=writes)


def _resolutions_told(
    found: CheckpointTuple, ledger: Mapping[str, Any], note_position: Any
) -> CheckpointTuple:
    """`found` with a note (stable id: added once, mirrored once) for each call its messages
    answer with a timeout that a person has resolved since: the agent's next run hears of it."""
    values = found.checkpoint["channel_values"]
    messages = values.get(MESSAGES_CHANNEL)
    resolved = [c for c in ledger.get("resolved") or [] if isinstance(c, dict)]
    if not resolved or not isinstance(messages, list):
        return found
    restored = list(messages)
    for call in resolved:
        note = _resolution_note(call)
        if not any(getattr(m, "id", None) == note.id for m in restored):
            position = note_position(restored)
            restored = [*restored[:position], note, *restored[position:]]
    if len(restored) == len(messages):
        return found
    checkpoint: Any = {**found.checkpoint, "channel_values": {**values, MESSAGES_CHANNEL: restored}}
    return found._replace(checkpoint=checkpoint)


def _task_for(
    found: CheckpointTuple,
    ledger: Mapping[str, Any],
    errors: Sequence[Mapping[str, Any]],
    version: int,
    call: Mapping[str, Any],
) -> tuple[str | None, str | None, tuple[str, ...] | None]:
    """(the id of the task that would run the call, its node, its verified triggers). The task
    id is None when the tool node is not triggered from this checkpoint. Raises
    SideEffectRecorded when nothing can be derived."""
    templates = [t for t in ledger.get("templates") or [] if isinstance(t, dict)]
    if errors:
        error = errors[0]
        node = node_of(error["task_path"])
        for template in templates:
            if node_of(str(template.get("task_path"))) == node:
                triggers = verified_triggers(template, version)
                if triggers is not None:
                    return str(error["task_id"]), node, triggers
        return str(error["task_id"]), node, None
    for template in templates:
        triggers = verified_triggers(template, version)
        if triggers is None:
            continue
        node = node_of(str(template["task_path"]))
        assert node is not None
        if not _triggered(found.checkpoint, node, triggers):
            return None, node, triggers
        step = found.metadata.get("step") if found.metadata else None
        if not isinstance(step, int):
            break
        checkpoint_id = str(found.config["configurable"]["checkpoint_id"])
        return pull_task_id(checkpoint_id, version, step + 1, node, triggers), node, triggers
    raise _recorded(
        call,
        "ctxadmin cannot derive the task of the tool node that would run it (no stored task of "
        "that node whose id LangGraph's derivation gives exactly): resume from a state past "
        "the call, or answer it with `update_state`",
    )


def _template_writes(
    ledger: Mapping[str, Any], node: str | None, serde: SerializerProtocol
) -> list[tuple[str, Any]]:
    """The non-message writes (the routing) of the tool node's stored task, decoded."""
    for template in ledger.get("templates") or []:
        if node is not None and node_of(str(template.get("task_path"))) == node:
            return [
                (str(w["channel"]), serde.loads_typed((w["type"], base64.b64decode(w["data"]))))
                for w in sorted(template.get("writes") or [], key=lambda w: int(w["idx"]))
            ]
    return []


def guard_decision(call: Mapping[str, Any] | None) -> BaseMessage | None:
    """What a tool-call guard does with a side-effecting call, given the ledger's record of it
    (None: the ledger holds nothing of it): None to run it; the recorded result to return
    instead. Raises SideEffectPending while its outcome is unknown."""
    if call is None:
        return None
    outcome = _outcome(call, False)
    if outcome == "pending":
        raise _pending(call)
    if outcome == "recorded":
        return _result_message(call)
    return None
