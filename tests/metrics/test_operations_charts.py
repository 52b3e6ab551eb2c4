"""The Operations page's pictures tell the truth (docs/operations.md): counts per hour are
bars, rates and levels lines; an empty chart says "no data yet"; a level starts where its
first value exists; series have their badges' colours."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from tests import factories as f
from tests.metrics.test_operations_page import at, login, seed, stamp
from threads.models import Thread
from threads.views.charts import TONES, Series, bar_chart

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_fold_triggers", "clock")]

CHARTS = (
    "folds-chart",
    "rejection-chart",
    "overflow-chart",
    "p95-chart",
    "secrets-chart",
    "backlog-chart",
)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.metrics.test_operations_page import NOW
    from threads.views import operations

    monkeypatch.setattr(operations, "_now", lambda: NOW)


def svg(html: str, chart_id: str) -> str:
    match = re.search(rf'<svg[^>]*aria-labelledby="{chart_id}-title.*?</svg>', html, re.S)
    assert match is not None, chart_id
    return match.group(0)


def badge_colour(tone: str) -> str:
    css = (Path(settings.BASE_DIR) / "static" / "ctxadmin" / "app.css").read_text()
    match = re.search(rf"--{tone}:\s*(#[0-9a-fA-F]+)", css)
    assert match is not None
    return match.group(1).lower()


def test_an_empty_range_says_no_data_yet_for_every_chart(workspace: Any) -> None:
    html = login(workspace, "operator").get("/operations/").content.decode()
    for chart in CHARTS:
        assert f'id="{chart}-empty"' in html, chart
    assert "No data yet in this range" in html and "<svg" not in html


def test_counts_are_bars_and_rates_lines_in_the_badges_colours(
    workspace: Any, thread: Thread
) -> None:
    seed(workspace, thread, f.make_person(workspace, "olga", "operator"))
    html = login(workspace, "operator").get("/operations/").content.decode()
    assert "No data yet" not in html
    folds = svg(html, "folds-chart")
    # Four folds decided in three hours: four bars, no line drawn between the hours.
    assert len(re.findall(r"<rect ", folds)) == 4 and "<polyline" not in folds
    rejected = re.findall(r'<rect [^>]*fill="(#\w+)"><title>rejected', folds)
    assert rejected == [badge_colour("bad")]
    assert "<rect " not in svg(html, "overflow-chart")
    secrets = svg(html, "secrets-chart")  # counts: bars, red as the timeline's secret badge
    assert (
        re.findall(r'<rect [^>]*fill="(#\w+)"><title>events with secrets', secrets)
        == [badge_colour("bad")] * 2
    )
    backlog = svg(html, "backlog-chart")
    unknown = re.search(r"<g><title>unknown side effects</title>(.*?)</g>", backlog, re.S)
    assert unknown is not None
    assert f'stroke="{badge_colour("warn")}"' in unknown.group(1)  # amber, as the badge
    pending = re.search(r"<g><title>pending approvals</title>(.*?)</g>", backlog, re.S)
    assert pending is not None and f'stroke="{badge_colour("info")}"' in pending.group(1)
    assert TONES["warn"] == badge_colour("warn")


def _xs(group: str) -> list[float]:
    return sorted({float(x) for x in re.findall(r'cx="([\d.]+)"', group)})


def test_a_level_starts_where_its_first_value_exists(workspace: Any, thread: Thread) -> None:
    """A side effect that became unknown minutes ago is one point in the last hour, not a
    line across the day."""
    f.append(
        thread,
        {**f.call("s9", "refund", {"a": 9}, side_effect_key="k9"), "created_at": stamp(at(23, 20))},
        {**f.result("s9", status="timeout"), "created_at": stamp(at(23, 21))},
    )
    html = login(workspace, "operator").get("/operations/").content.decode()
    backlog = svg(html, "backlog-chart")
    unknown = re.search(r"<g><title>unknown side effects</title>(.*?)</g>", backlog, re.S)
    assert unknown is not None
    assert "<polyline" not in unknown.group(1)  # nothing before it
    assert len(_xs(unknown.group(1))) == 1
    # Its one dot is in the last hour's slot: right of every other hour's x tick.
    ticks = [
        float(x) for x in re.findall(r'<text x="([\d.]+)" y="\d+" text-anchor="middle"', backlog)
    ]
    assert _xs(unknown.group(1))[0] > max(ticks)


@pytest.mark.parametrize("most", [1, 3, 7, 11, 24, 25, 26, 99, 101, 730, 12345])
def test_count_ticks_are_whole_evenly_spaced_and_reach_the_tallest_bar(most: int) -> None:
    starts = [datetime(2026, 12, 3, h, tzinfo=UTC) for h in range(3)]
    chart = bar_chart(starts=starts, series=[Series("folds", [0, most, 1])])
    labels = [float(t["label"]) for t in chart["yticks"]]
    steps = {b - a for a, b in zip(labels, labels[1:], strict=False)}
    assert labels[0] == 0 and labels[-1] >= most and len(steps) == 1
    assert all(label == int(label) for label in labels) and 2 <= len(labels) <= 6
    assert labels[-1] - steps.pop() < most  # no tick row above the one the bar reaches
