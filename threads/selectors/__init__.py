"""Every read, scoped by workspace. Another workspace's object is simply not found (404).

One module per subject; this package re-exports their public names.
"""

from threads.selectors.api_keys import (
    api_key_get_active,
    api_key_get_in,
    api_keys_for_workspaces,
)
from threads.selectors.audit import (
    audit_facets_for_member,
    audit_for_member,
)
from threads.selectors.checkpoints import (
    checkpoint_as_audit,
    checkpoint_get,
    checkpoints_for_thread,
    rollback_preview,
    summary_versions_replaced,
)
from threads.selectors.context import (
    CONTEXT_OVERRIDES,
    working_context,
)
from threads.selectors.event_bodies import (
    event_get_for_page,
    event_window_for_page,
)
from threads.selectors.events import (
    approvals_for_requests,
    closing_events_for_calls,
    event_dict,
    event_dicts,
    event_get,
    event_token_buckets,
    event_window,
    events_by_seqs,
    last_reset_at,
    retractions_by_target,
    side_effects_for_calls,
)
from threads.selectors.integrity import (
    chain_walk,
    checkpoint_checksum,
    checkpoint_is_safe,
    last_safe_checkpoint,
    last_safe_checkpoints,
    stored_events,
    stored_hashes,
    summary_checksum,
    thread_heads,
    thread_integrity,
    threads_due_full_verify,
    threads_integrity_for_member,
    unsafe_checkpoints_for_member,
)
from threads.selectors.queues import (
    approval_expired,
    approval_get_in,
    approval_rows,
    approvals_in,
    approvals_of_thread,
    fork_copied_from,
    side_effect_get_in,
    side_effect_rows,
    side_effects_in,
)
from threads.selectors.search import (
    MAX_HITS,
    SearchHit,
    events_search,
)
from threads.selectors.summaries import (
    summary_version_get,
    summary_versions_for_thread,
    summary_versions_full,
)
from threads.selectors.tasks import (
    task_run_get_in,
    task_runs_in_flight,
)
from threads.selectors.threads import (
    THREAD_SORTS,
    active_constraints,
    member_roles,
    member_workspace_ids,
    memberships_for_user,
    thread_get_for_member,
    thread_get_for_workspace,
    thread_list_page,
    thread_with_flags,
    threads_in,
    workspace_current_for_member,
    workspaces_for_user,
)
from threads.selectors.tools import (
    REPEAT_WINDOW,
    content_repeats,
    thread_tools,
)

__all__ = [
    "CONTEXT_OVERRIDES",
    "MAX_HITS",
    "SearchHit",
    "REPEAT_WINDOW",
    "THREAD_SORTS",
    "active_constraints",
    "api_key_get_active",
    "api_key_get_in",
    "api_keys_for_workspaces",
    "approval_expired",
    "approval_get_in",
    "fork_copied_from",
    "approval_rows",
    "approvals_for_requests",
    "approvals_in",
    "approvals_of_thread",
    "audit_facets_for_member",
    "audit_for_member",
    "chain_walk",
    "checkpoint_as_audit",
    "checkpoint_checksum",
    "checkpoint_get",
    "checkpoint_is_safe",
    "checkpoints_for_thread",
    "closing_events_for_calls",
    "content_repeats",
    "event_dict",
    "event_dicts",
    "event_get",
    "event_get_for_page",
    "event_token_buckets",
    "event_window",
    "event_window_for_page",
    "events_search",
    "events_by_seqs",
    "last_reset_at",
    "retractions_by_target",
    "last_safe_checkpoint",
    "last_safe_checkpoints",
    "member_roles",
    "member_workspace_ids",
    "memberships_for_user",
    "rollback_preview",
    "side_effect_get_in",
    "side_effect_rows",
    "side_effects_for_calls",
    "side_effects_in",
    "stored_events",
    "stored_hashes",
    "thread_heads",
    "summary_checksum",
    "summary_version_get",
    "summary_versions_for_thread",
    "summary_versions_full",
    "summary_versions_replaced",
    "task_run_get_in",
    "task_runs_in_flight",
    "thread_get_for_member",
    "workspace_current_for_member",
    "thread_get_for_workspace",
    "thread_integrity",
    "threads_due_full_verify",
    "thread_list_page",
    "thread_tools",
    "thread_with_flags",
    "threads_in",
    "threads_integrity_for_member",
    "unsafe_checkpoints_for_member",
    "working_context",
    "workspaces_for_user",
]
