"""A thread's run status: what the thread waits for, if anything (docs/dashboard.md,
"Run status").

The status is derived from the log and from the agent's reads, through the times the thread
row keeps (threads.models.Thread: agent_appended_at, agent_read_at, agent_owed_at,
agent_owed_since). One SQL expression computes it for the list, its filter and the detail
answer (threads.selectors.threads); this module holds the names, the windows and the
precedence.
"""

from __future__ import annotations

from datetime import timedelta

RUNNING = "running"
WAITING_FOR_PERSON = "waiting_for_person"
WAITING_FOR_AGENT = "waiting_for_agent"
STALLED = "stalled"
IDLE = "idle"

# Precedence, first that holds wins. A person's move first: an agent held at an unknown side
# effect, a pending approval or a held call cannot go on whatever else it owes, so it is not
# stalled. Then a stalled agent (it owes a pickup for longer than the workspace allows), then
# one that owes a pickup, then one that is active, else idle.
RUN_STATUSES: tuple[str, ...] = (WAITING_FOR_PERSON, STALLED, WAITING_FOR_AGENT, RUNNING, IDLE)

# `running`: the agent appended an event or read its context, approvals or its saved graph state
# within this window.
RUNNING_WINDOW = timedelta(seconds=60)
# A side effect still `running` this long after its call is a held call: the tool has had its
# time, and an agent that asks the ledger is held at it until a person resolves it
# (docs/repairs.md, "How the ledger drives resume").
HELD_CALL_AFTER = RUNNING_WINDOW
# An agent's read is written at most this often while nothing waits for it (a busy thread's
# reads cost no write each); a read that picks something up is always written.
READ_RECORD_EVERY = timedelta(seconds=5)
DEFAULT_STALL_AFTER_SECONDS = 15 * 60

LABELS = {
    RUNNING: "running",
    WAITING_FOR_PERSON: "waiting for a person",
    WAITING_FOR_AGENT: "waiting for the agent",
    STALLED: "stalled",
    IDLE: "idle",
}
