"""Server-drawn SVG line charts over time buckets (the Operations page), drawn like the context
page's token chart: the same size and paddings, points computed here, the template only
places them. Each chart also gives its numbers as a table for people who cannot see it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from threads.views.context import CHART_H, CHART_W, PAD_B, PAD_L, PAD_R, PAD_T

COLOURS = ("#2353c8", "#b01c1c", "#17663a", "#8a5a00", "#6b3fa0", "#5a6270")


@dataclass(frozen=True)
class Series:
    name: str
    values: Sequence[float | None]  # None: no value in that bucket (a gap, not a zero)


def _nice_top(top: float) -> float:
    """The smallest of 1, 2, 2.5, 5 × a power of ten at or above `top` (1 at least)."""
    if top <= 1:
        return 1.0
    magnitude = 10 ** math.floor(math.log10(top))
    return next(step * magnitude for step in (1, 2, 2.5, 5, 10) if top <= step * magnitude)


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
        runs: list[list[str]] = [[]]
        dots = []
        for i, v in enumerate(s.values):
            if v is None:
                runs.append([])
                continue
            runs[-1].append(f"{x(i)},{y(v)}")
            dots.append({"x": x(i), "y": y(v)})
        lines.append(
            {
                "name": s.name,
                "colour": COLOURS[k % len(COLOURS)],
                "runs": [" ".join(r) for r in runs if r],
                "dots": dots if n <= 48 else [],
            }
        )
    step = max(n // 8, 1)
    suffix = "%" if percent else unit
    return {
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
