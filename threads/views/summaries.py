"""Summaries tab: versions, a version against the events it cites, version-to-version diff,
and "Fold now" with a polled progress region."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import trigger_client_event

from threads import selectors
from threads.domain.diff import diff_versions, label, uncited_important
from threads.domain.errors import DomainError
from threads.domain.fold import SECTION_TITLES
from threads.domain.summary_render import entry_text
from threads.models import Role, SummaryPhase
from threads.services.fold_requests import fold_request
from threads.views.common import (
    HtmxHttpRequest,
    found,
    local_url,
    problem,
    progress_context,
    progress_started,
    require,
    thread_for,
)
from threads.views.present import shown_value
from threads.views.threads import thread_tabs

# The fact-by-fact view reads the events of the version's own range, at most this many.
MAX_RANGE_EVENTS = 5000
SECTIONS = tuple(SECTION_TITLES.items())


def _entry_text(section: str, entry: dict[str, Any]) -> str:
    """The entry as the agent reads it (entry_text), or its label when that says nothing."""
    return entry_text(section, entry) or label(section, entry)


def _entry_meta(section: str, entry: dict[str, Any]) -> list[str]:
    keys = {
        "facts": ("authority", "confidence", "previous_value", "observed_at"),
        "tool_state": ("idempotency_key",),
        "requests": ("truncated",),
        "pending": ("blocking",),
    }.get(section, ())
    # A flag that is on reads as its name ("blocking"); other values as text or JSON.
    shown = []
    for key in keys:
        if entry.get(key) in (None, "", False):
            continue
        name = key.replace("_", " ")
        shown.append(name if entry[key] is True else f"{name}: {shown_value(entry[key])}")
    return shown


def _sections(content: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for key, title in SECTIONS:
        entries = content.get(key) or []
        if not isinstance(entries, list):
            continue
        out.append(
            {
                "key": key,
                "title": title,
                "entries": [
                    {
                        "text": _entry_text(key, e),
                        "meta": _entry_meta(key, e),
                        "sources": [
                            s for s in e.get("source_event_ids") or [] if isinstance(s, int)
                        ],
                        "status": e.get("status", ""),
                        "side_effect": bool(e.get("side_effect")),
                    }
                    for e in entries
                    if isinstance(e, dict)
                ],
            }
        )
    return out


def _readable_diff(diff: dict[str, Any]) -> list[dict[str, Any]]:
    """diff_versions' sections as the page lists them: a line of text per entry, its sources,
    and the raw entry one click away."""
    titles = dict(SECTIONS)
    out = []
    for key, change in diff["sections"].items():

        def line(entry: dict[str, Any], section: str = key) -> dict[str, Any]:
            return {
                "text": _entry_text(section, entry),
                "sources": entry.get("source_event_ids") or [],
                "raw": entry,
            }

        out.append(
            {
                "title": titles.get(key, key),
                "added": [line(e) for e in change["added"]],
                "removed": [line(e) for e in change["removed"]],
                "changed": change["changed"],
            }
        )
    return out


@login_required
@require_GET
def summary_list(request: HtmxHttpRequest, id: str) -> HttpResponse:
    thread = thread_for(request, id)
    versions = selectors.summary_versions_for_thread(thread=thread)
    rows: list[dict[str, Any]] = []
    for v in versions:
        checks = (v.verification or {}).get("checks", [])
        rows.append(
            {
                "version": v,
                "ok": (v.verification or {}).get("ok"),
                "failed": [c for c in checks if not c.get("ok")],
                "checks": len(checks),
            }
        )
    fold = selectors.task_runs_in_flight(thread=thread, kind="fold")
    # Rejected candidates, each with the checks that refused it (docs/repairs.md, "Rollback").
    rejected = [row for row in rows if row["version"].phase == SummaryPhase.REJECTED]
    context = {
        **thread_tabs(request, thread, "summaries"),
        "rows": rows,
        "run": fold,
        "rejected": rejected,
    }
    return render(request, "threads/summary_list.html", context)


@login_required
@require_GET
def summary_detail(request: HtmxHttpRequest, id: str, version: int) -> HttpResponse:
    thread = thread_for(request, id)
    summary = found(selectors.summary_version_get, thread=thread, version=version)
    content = summary.content or {}
    context: dict[str, Any] = {
        **thread_tabs(request, thread, "summaries"),
        "summary": summary,
        "content": content,
        "task": content.get("task") or {},
        "sections": _sections(content),
        "checks": (summary.verification or {}).get("checks", []),
        "verification_ok": (summary.verification or {}).get("ok"),
        "versions": [v.version for v in selectors.summary_versions_for_thread(thread=thread)],
    }
    against = request.GET.get("against", "").strip()
    if against.isdigit():
        old = found(selectors.summary_version_get, thread=thread, version=int(against))
        context["against"] = old
        diff = diff_versions(old.content or {}, content)
        context["diff"] = diff
        context["diff_sections"] = _readable_diff(diff)
        context["tokens_saved"] = old.tokens - summary.tokens
        context["tokens_more"] = summary.tokens - old.tokens
    # Uncited important events: those of this version's own range (a rolling fold cites the
    # older ones through the versions before it).
    start = max(summary.covered_from, summary.covered_until - MAX_RANGE_EVENTS + 1, 1)
    events = selectors.event_dicts(thread, after=start - 1, until=summary.covered_until)
    context["uncited"] = uncited_important(content, events)
    context["range_capped"] = start > max(summary.covered_from, 1)
    context["range_from"] = start
    return render(request, "threads/summary_detail.html", context)


@login_required
@require_POST
def fold_now(request: HtmxHttpRequest, id: str) -> HttpResponse:
    thread = thread_for(request, id)
    require(request, thread.workspace, Role.OPERATOR)
    back = reverse("summary-list", args=[thread.pk])
    try:
        run = fold_request(
            thread=thread,
            trigger={"kind": "manual", "reason": f"fold requested by {request.user}"},
            actor=request.user,
        )
    except DomainError as exc:
        return problem(request, exc, back)
    return progress_started(request, run, back, reloads=True)


@login_required
@require_GET
def task_progress(request: HtmxHttpRequest, task_id: str) -> HttpResponse:
    """A task's progress region. It polls itself until the task has finished: the finished
    state renders without the trigger, so htmx stops asking."""
    run = found(
        selectors.task_run_get_in,
        workspace_ids=selectors.member_workspace_ids(request.user),
        id=task_id,
    )
    back = local_url(request, request.GET.get("back", ""))
    context = progress_context(run, back, reloads=request.GET.get("reloads") == "1")
    response = render(request, "threads/_task_progress.html#progress", context)
    if context["finished"]:
        # Regions that show the task's outcome (an import's report) reload on this event.
        trigger_client_event(response, "task-finished", {"task_id": run.id})
    return response
