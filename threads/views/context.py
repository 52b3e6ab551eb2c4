"""The working context tab: what the agent receives, the budget it fits in, what is trimmed,
and a server-drawn chart of history tokens over the log with the folds marked."""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from threads import selectors
from threads.domain.budget import MAX_TOKENS
from threads.domain.errors import BudgetTooSmall
from threads.models import SummaryPhase, SummaryVersion, Thread
from threads.views.common import HtmxHttpRequest, thread_for
from threads.views.present import (
    headline_and_body,
    is_long,
    preview_line,
    repeat_rows,
    tool_rows,
)
from threads.views.threads import thread_tabs

CHART_W, CHART_H = 760, 220
PAD_L, PAD_R, PAD_T, PAD_B = 56, 14, 14, 28


def budget_segments(budget: dict[str, Any], high: float, low: float) -> dict[str, Any]:
    """Widths (percent of the window) of each section of the bar, and the watermarks' places.

    The watermarks are fractions of the available budget B, which starts after the fixed input.
    """
    window = max(int(budget["window"]), 1)
    sections = budget.get("sections", {})
    fixed = int(budget["fixed"])
    # The tool definitions are part of the fixed input (docs/pipeline.md,
    # "Tool definitions and repeated content"): their own segment, at most what `fixed` holds (an
    # agent's own fixed_tokens may count them smaller).
    tools = min(int(sections.get("tools", 0)), fixed)
    parts = [
        *([("tools", "Tool definitions", tools)] if "tools" in sections else []),
        ("fixed", "Other fixed input" if "tools" in sections else "Fixed input", fixed - tools),
        ("summary", "Summary", int(sections.get("summary", 0))),
        ("events", "Events", int(sections.get("events", 0))),
    ]
    used = sum(n for _, _, n in parts)
    tail = [
        ("reasoning", "Reasoning reserve", int(budget["reasoning_reserve"])),
        ("output", "Reserved output", int(budget["reserved_output"])),
        ("margin", "Safety margin", int(budget["safety_margin"])),
    ]
    free = max(window - used - sum(n for _, _, n in tail), 0)
    segments = [
        {
            "key": key,
            "label": label,
            "tokens": n,
            "width": round(100 * n / window, 3),
            "share": n / window,
        }
        for key, label, n in [*parts, ("free", "Free", free), *tail]
    ]
    available = max(int(budget["available"]), 0)

    def at(fraction: float) -> float:
        return round(100 * min((int(budget["fixed"]) + fraction * available) / window, 1), 3)

    return {
        "segments": segments,
        "tools_share": int(sections.get("tools", 0)) / window,
        "high_at": at(high),
        "low_at": at(low),
        "high_tokens": int(high * available),
        "low_tokens": int(low * available),
    }


def token_chart(thread: Thread, versions: list[SummaryVersion], budget_available: int) -> dict:
    """Points of an SVG chart: the history the agent would carry at each point of the log
    (head summary tokens + raw tokens since it), raw tokens, and where folds landed."""
    width, buckets = selectors.event_token_buckets(thread=thread)
    if not buckets:
        return {}
    # Cumulative raw tokens at each bucket end.
    ends: list[int] = []
    cumulative: list[int] = []
    total = 0
    for index, tokens in buckets:
        total += tokens
        ends.append(min((index + 1) * width, thread.last_seq))
        cumulative.append(total)

    def raw_until(seq: int) -> float:
        """Raw tokens of events 1..seq, interpolated inside a bucket."""
        if seq <= 0:
            return 0.0
        i = bisect_right(ends, seq - 1)
        if i >= len(ends):
            return float(cumulative[-1])
        before = cumulative[i - 1] if i else 0
        start = ends[i - 1] if i else 0
        span = max(ends[i] - start, 1)
        return before + (cumulative[i] - before) * (seq - start) / span

    folds = sorted(
        (v for v in versions if v.phase in (SummaryPhase.COMMITTED, SummaryPhase.ROLLED_BACK)),
        key=lambda v: v.covered_until,
    )
    history: list[tuple[int, float]] = []
    for end, raw in zip(ends, cumulative, strict=True):
        # The newest version whose range ends by here is the one an agent would stand on.
        standing = [v for v in folds if v.covered_until <= end]
        head = max(standing, key=lambda v: v.version) if standing else None
        if head is None:
            history.append((end, float(raw)))
        else:
            history.append((end, head.tokens + raw - raw_until(head.covered_until)))
    top = max([h for _, h in history] + [float(budget_available), 1.0]) * 1.08
    x_max = max(thread.last_seq, 1)

    def x(seq: float) -> float:
        return round(PAD_L + (CHART_W - PAD_L - PAD_R) * seq / x_max, 1)

    def y(tokens: float) -> float:
        return round(CHART_H - PAD_B - (CHART_H - PAD_T - PAD_B) * tokens / top, 1)

    line = " ".join(f"{x(s)},{y(t)}" for s, t in [(0, 0.0), *history])
    area = f"{x(0)},{y(0)} {line} {x(history[-1][0])},{y(0)}"
    high = thread.high_watermark * budget_available
    ticks = [round(top * f / 1.08) for f in (0, 0.25, 0.5, 0.75, 1.0)]
    return {
        "w": CHART_W,
        "h": CHART_H,
        "line": line,
        "area": area,
        "x0": PAD_L,
        "x1": CHART_W - PAD_R,
        "y0": CHART_H - PAD_B,
        "high_y": y(high),
        "avail_y": y(budget_available),
        "high": int(high),
        "available": budget_available,
        "yticks": [{"y": y(t), "label": f"{t:,}"} for t in ticks],
        "xticks": [{"x": x(s), "label": s} for s in _seq_ticks(x_max)],
        "folds": [
            {
                "x": x(v.covered_until),
                "version": v.version,
                "until": v.covered_until,
                "rolled_back": v.phase == SummaryPhase.ROLLED_BACK,
            }
            for v in folds
        ],
        "last_history": int(history[-1][1]),
        "raw_total": cumulative[-1],
    }


def _seq_ticks(x_max: int) -> list[int]:
    return sorted({1, *(round(x_max * f) for f in (0.25, 0.5, 0.75)), x_max})


@login_required
@require_GET
def thread_context(request: HtmxHttpRequest, id: str) -> HttpResponse:
    thread = thread_for(request, id)
    overrides: dict[str, Any] = {}
    refused: dict[str, str] = {}
    for name in selectors.CONTEXT_OVERRIDES:
        value = request.GET.get(name, "").strip()
        if not value:
            continue
        # As the API's context parameters: whole numbers a thread's setting can hold.
        if value.isascii() and value.isdigit() and int(value) <= MAX_TOKENS:
            overrides[name] = int(value)
        else:
            refused[name] = f"{value[:40]!r} is not a whole number up to {MAX_TOKENS}; not used"
    context: dict[str, Any] = {
        **thread_tabs(request, thread, "context"),
        "overrides": overrides,
        "refused_overrides": refused,
        "override_fields": [
            (name, name.replace("_", " "), overrides.get(name, ""))
            for name in selectors.CONTEXT_OVERRIDES
        ],
    }
    try:
        answer = selectors.working_context(thread=thread, overrides=overrides)
    except BudgetTooSmall as exc:
        context["too_small"] = {"message": exc.message, "fields": exc.fields}
        return render(request, "threads/thread_context.html", context, status=422)
    budget = answer["budget"]
    events = []
    for event in answer["events"]:
        headline, body = headline_and_body(event["kind"], event)
        events.append(
            {
                "seq": event["seq"],
                "kind": event["kind"],
                "headline": headline,
                "body": body,
                "tokens": event.get("token_count", 0),
                "long": is_long(body),
                "preview": preview_line(body),
            }
        )
    versions = selectors.summary_versions_for_thread(thread=thread)
    tools = selectors.thread_tools(thread=thread, definitions=False)
    repeats = selectors.content_repeats(thread=thread)
    context.update(
        answer=answer,
        budget=budget,
        bar=budget_segments(budget, thread.high_watermark, thread.low_watermark),
        events=events,
        use=(budget["used"] / budget["available"]) if budget["available"] > 0 else None,
        chart=token_chart(thread, versions, int(budget["available"])),
        tools=tool_rows(tools, int(budget["window"])),
        repeats=repeat_rows(repeats, {event["seq"] for event in answer["events"]}),
        repeat_window=selectors.REPEAT_WINDOW,
    )
    return render(request, "threads/thread_context.html", context)
