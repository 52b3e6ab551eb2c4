"""Server-drawn SVG charts over time buckets (the Operations page), drawn like the context
page's token chart: the same size and paddings, points computed here, the template only
places them. Each chart also gives its numbers as a table for people who cannot see it.

What a chart draws says what the numbers are (docs/operations.md): counts per hour are bars
(stacked, one bucket each: twenty folds in one hour are a bar, not a spike drawn out of the
hours around it), rates and levels are lines; a series is drawn only where it has a value (a
level that begins minutes ago starts there, not at the range's start), an isolated value is a
dot; a chart with nothing to draw says "no data yet" instead of an empty frame; and a series
named for something the badges colour (an unknown side effect, a pending approval, a rejected
fold) has the badge's colour."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from threads.views.context import CHART_H, CHART_W, PAD_B, PAD_L, PAD_R, PAD_T

COLOURS = ("#2353c8", "#b01c1c", "#17663a", "#8a5a00", "#6b3fa0", "#5a6270")
# The badges' tones (static/ctxadmin/app.css: --ok, --warn, --bad, --info, --muted): a series
# of something a badge shows keeps the badge's colour.
TONES = {
    "ok": "#17663a",
    "warn": "#8a4b00",
    "bad": "#b01c1c",
    "info": "#1f4f9c",
    "muted": "#5a6270",
}


@dataclass(frozen=True)
class Series:
    name: str
    values: Sequence[float | None]  # None: no value in that bucket (a gap, not a zero)
    tone: str = ""  # a TONES key: the colour of the badge that shows the same thing


def _colour(series: Series, k: int) -> str:
    return TONES.get(series.tone) or COLOURS[k % len(COLOURS)]


def starting_at_first(values: Sequence[float], began: Sequence[bool]) -> list[float | None]:
    """A level's values from the first bucket where something it counts had begun: before it
    there is no series yet (None), not a zero that draws it across the whole range."""
    first = next((i for i, b in enumerate(began) if b), len(values))
    return [None if i < first else v for i, v in enumerate(values)]


def _nice_top(top: float) -> float:
    """The smallest of 1, 2, 2.5, 5 × a power of ten at or above `top` (1 at least)."""
    if top <= 1:
        return 1.0
    magnitude = 10 ** math.floor(math.log10(top))
    return next(step * magnitude for step in (1, 2, 2.5, 5, 10) if top <= step * magnitude)


def _count_scale(top: float) -> tuple[int, int]:
    """A scale for counts: the tick step (1, 2 or 5 × a power of ten, whole) that draws at most
    five ticks above zero, and the top (a multiple of it at or above `top`)."""
    if top <= 1:
        return 1, 1
    magnitude = 10 ** max(math.floor(math.log10(top / 5)), 0)
    step = next(s * magnitude for s in (1, 2, 5, 10) if top <= 5 * s * magnitude)
    return math.ceil(top / step) * step, step


def line_chart(
    *,
    starts: Sequence[datetime],
    series: Sequence[Series],
    unit: str = "",
    percent: bool = False,
    legend: bool | None = None,
) -> dict:
    """Points of one chart: a polyline per series (split at gaps), y ticks, x ticks; a legend
    when there is more than one series, unless `legend` says otherwise."""
    n = len(starts)
    values = [v for s in series for v in s.values if v is not None]
    top = _nice_top(max([*values, 0.0]) * (100 if percent else 1))

    def x(i: int) -> float:
        return round(PAD_L + (CHART_W - PAD_L - PAD_R) * (i + 0.5) / max(n, 1), 1)

    def y(v: float) -> float:
        scaled = v * (100 if percent else 1)
        return round(CHART_H - PAD_B - (CHART_H - PAD_T - PAD_B) * scaled / top, 1)

    lines = []
    for k, s in enumerate(series):
        runs: list[list[tuple[float, float]]] = [[]]
        for i, v in enumerate(s.values):
            if v is None:
                runs.append([])
                continue
            runs[-1].append((x(i), y(v)))
        runs = [r for r in runs if r]
        # Every point is a dot on a short range; on a long one only a point alone in its run,
        # which a polyline of one point would not draw at all.
        dots = [{"x": px, "y": py} for r in runs for px, py in r if n <= 48 or len(r) == 1]
        lines.append(
            {
                "name": s.name,
                "colour": _colour(s, k),
                "runs": [" ".join(f"{px},{py}" for px, py in r) for r in runs if len(r) > 1],
                "dots": dots,
            }
        )
    step = max(n // 8, 1)
    suffix = "%" if percent else unit
    return {
        "kind": "line",
        "empty": not values,
        "w": CHART_W,
        "h": CHART_H,
        "x0": PAD_L,
        "x1": CHART_W - PAD_R,
        "y0": CHART_H - PAD_B,
        "lines": lines,
        "legend": len(series) > 1 if legend is None else legend,
        "yticks": [
            {"y": y(top * f / (100 if percent else 1)), "label": f"{top * f:g}{suffix}"}
            for f in (0, 0.25, 0.5, 0.75, 1.0)
        ],
        "xticks": [
            {"x": x(i), "label": start.strftime("%H:00" if n <= 48 else "%m-%d")}
            for i, start in enumerate(starts)
            if i % step == 0
        ],
    }


def bar_chart(
    *, starts: Sequence[datetime], series: Sequence[Series], legend: bool | None = None
) -> dict:
    """Counts per bucket as bars, the series stacked in each bucket's slot; y ticks at whole
    numbers. Empty (no data yet) when every count is zero."""
    n = len(starts)
    totals = [sum(s.values[i] or 0 for s in series) for i in range(n)]
    top, tick = _count_scale(max([*totals, 0.0]))
    slot = (CHART_W - PAD_L - PAD_R) / max(n, 1)
    width = round(max(slot * 0.7, 1.0), 1)

    def y(v: float) -> float:
        return round(CHART_H - PAD_B - (CHART_H - PAD_T - PAD_B) * v / top, 1)

    bars = []
    below = [0.0] * n
    for k, s in enumerate(series):
        colour = _colour(s, k)
        for i, v in enumerate(s.values):
            if not v:
                continue
            bars.append(
                {
                    "x": round(PAD_L + slot * i + (slot - width) / 2, 1),
                    "y": y(below[i] + v),
                    "w": width,
                    "h": round(y(below[i]) - y(below[i] + v), 1),
                    "colour": colour,
                    "title": f"{s.name}: {v:g} at {starts[i]:%H:00}",
                }
            )
            below[i] += v
    step = max(n // 8, 1)
    ticks = range(0, top + 1, tick)
    return {
        "kind": "bar",
        "empty": not any(totals),
        "w": CHART_W,
        "h": CHART_H,
        "x0": PAD_L,
        "x1": CHART_W - PAD_R,
        "y0": CHART_H - PAD_B,
        "bars": bars,
        "lines": [{"name": s.name, "colour": _colour(s, k)} for k, s in enumerate(series)],
        "legend": len(series) > 1 if legend is None else legend,
        "yticks": [{"y": y(t), "label": f"{t:g}"} for t in ticks],
        "xticks": [
            {
                "x": round(PAD_L + slot * (i + 0.5), 1),
                "label": start.strftime("%H:00" if n <= 48 else "%m-%d"),
            }
            for i, start in enumerate(starts)
            if i % step == 0
        ],
    }
