"""A 60-call code review of a billing change with large tool outputs (file reads, diffs,
test runs, searches of several KB each). Generated deterministically: same text every run."""

from __future__ import annotations

import difflib
import hashlib
from typing import Any

MODULES = [
    "billing/proration.py",
    "billing/plans.py",
    "billing/invoices.py",
    "billing/currency.py",
    "billing/credits.py",
    "billing/tasks.py",
    "billing/webhooks.py",
    "billing/api/views.py",
    "billing/migrations/0042_proration_credit.py",
    "billing/tests/test_proration.py",
]
NOUNS = [
    "amount",
    "credit",
    "invoice_line",
    "period",
    "plan_change",
    "seat_count",
    "discount",
    "tax",
    "balance",
    "refund",
    "usage",
    "coupon",
]
GREP_MAX_HITS = 60
VERBS = ["compute", "apply", "split", "round", "validate", "prorate", "merge", "allocate"]


def _pick(seed: str, options: list[str]) -> str:
    return options[int(hashlib.sha256(seed.encode()).hexdigest(), 16) % len(options)]


def _function(module: str, n: int, *, fixed: bool) -> list[str]:
    verb, noun = _pick(f"{module}{n}v", VERBS), _pick(f"{module}{n}n", NOUNS)
    name = f"{verb}_{noun}_{n}"
    rounding = "ROUND_HALF_EVEN" if fixed else "ROUND_HALF_UP"
    return [
        f"def {name}(subscription: Subscription, {noun}: Decimal, *, at: date) -> Decimal:",
        f'    """{verb.capitalize()} the {noun.replace("_", " ")} for the days left in the '
        f'period."""',
        "    period = subscription.current_period(at)",
        "    days_left = (period.end - at).days",
        "    if days_left <= 0:",
        '        return Decimal("0.00")',
        "    share = Decimal(days_left) / Decimal(period.length_days)",
        f"    value = ({noun} * share).quantize(CENT, rounding={rounding})",
        '    logger.debug("%s %s -> %s", subscription.pk, ' + f"{noun}, value)"
        if not fixed
        else '    logger.debug("prorated %s %s -> %s (%s days)", subscription.pk, '
        + f"{noun}, value, days_left)",
        "    return value",
        "",
        "",
    ]


def module_source(module: str, *, fixed: bool = True, functions: int = 10) -> str:
    lines = [
        f'"""{module} — part of the billing service."""',
        "",
        "from __future__ import annotations",
        "",
        "import logging",
        "from datetime import date",
        "from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal",
        "",
        "from billing.models import Subscription",
        "",
        'CENT = Decimal("0.01")',
        "logger = logging.getLogger(__name__)",
        "",
        "",
    ]
    for n in range(functions):
        lines += _function(module, n, fixed=fixed or n % 3 != 1)
    return "\n".join(lines)


def read_file(module: str) -> str:
    source = module_source(module)
    return "\n".join(f"{i:4d}  {line}" for i, line in enumerate(source.splitlines(), start=1))


def diff(module: str) -> str:
    old = module_source(module, fixed=False).splitlines(keepends=True)
    new = module_source(module, fixed=True).splitlines(keepends=True)
    return "".join(difflib.unified_diff(old, new, f"a/{module}", f"b/{module}", n=6))


def _banner(text: str) -> str:
    return f" {text} ".center(80, "=")


def test_run(run: int, *, failing: bool) -> str:
    lines = [
        _banner("test session starts"),
        "platform linux -- Python 3.11.9, pytest-8.3.4, pluggy-1.5.0",
        "django: version: 5.2, settings: billing.settings.test (from ini)",
        f"collected 84 items (run {run})",
        "",
    ]
    for n in range(84):
        module = MODULES[n % 3]
        name = f"test_{_pick(f'{run}{n}', VERBS)}_{_pick(f'{n}{run}', NOUNS)}_{n}"
        outcome = "FAILED" if failing and n in (17, 52) else "PASSED"
        lines.append(
            f"billing/tests/test_{module.split('/')[-1]}::{name} {outcome} "
            f"[{(n + 1) * 100 // 84:3d}%]"
        )
    if failing:
        lines += [
            "",
            _banner("FAILURES"),
            "____________________ test_prorate_amount_17 ____________________",
            "    def test_prorate_amount_17(subscription_factory):",
            "        sub = subscription_factory(plan='pro', price=Decimal('49.00'))",
            ">       assert prorate_amount_17(sub, Decimal('49.00'), at=date(2026, 2, 15)) "
            "== Decimal('24.50')",
            "E       AssertionError: assert Decimal('24.51') == Decimal('24.50')",
            "billing/tests/test_proration.py:212: AssertionError",
            _banner("short test summary info"),
            "FAILED billing/tests/test_proration.py::test_prorate_amount_17",
            "FAILED billing/tests/test_proration.py::test_split_credit_52",
            _banner("2 failed, 82 passed in 6.12s"),
        ]
    else:
        lines += ["", _banner("84 passed in 5.87s")]
    return "\n".join(lines)


def grep(pattern: str) -> str:
    hits = []
    for module in MODULES:
        for i, line in enumerate(module_source(module, fixed=False).splitlines(), start=1):
            if pattern in line:
                hits.append(f"{module}:{i}:{line}")
    return "\n".join(hits[:GREP_MAX_HITS])


ASKS = [
    "Please review PR #482 (billing: prorate credits on mid-period plan changes). Focus on "
    "money correctness; I don't care about style nits.",
    "Also check that migration 0042 is reversible — we may have to roll back on Monday.",
    "The failing test worries me. Is the rounding change the cause?",
    "OK. Finish the review and give me a verdict with the blocking issues first.",
]


def code_review_events(log: Any) -> None:
    log.say(
        "system",
        "You are a senior reviewer for the billing service. Read the code before "
        "judging it; quote file and line for every finding.",
        after=0,
    )
    calls = 0
    for unit, ask in enumerate(ASKS):
        log.say("user", ask, after=120)
        log.say(
            "assistant", "Looking at the change set first." if unit == 0 else "Checking that now."
        )
        for step in range(15):
            calls += 1
            call_id = f"call_{calls:02d}"
            module = MODULES[(calls * 7) % len(MODULES)]
            kind = ("read_file", "git_diff", "run_tests", "grep")[(step + unit) % 4]
            if kind == "read_file":
                log.call(call_id, "read_file", {"path": module})
                log.result(call_id, "succeeded", read_file(module))
            elif kind == "git_diff":
                log.call(call_id, "git_diff", {"base": "main", "head": "pr-482", "path": module})
                log.result(call_id, "succeeded", diff(module))
            elif kind == "run_tests":
                failing = unit in (1, 2)
                log.call(call_id, "run_tests", {"args": ["-q", "billing/tests"]})
                log.result(
                    call_id,
                    "failed" if failing else "succeeded",
                    test_run(calls, failing=failing),
                    after=8,
                )
            else:
                pattern = _pick(
                    call_id, ["ROUND_HALF_UP", "quantize(CENT", "days_left", "current_period"]
                )
                log.call(call_id, "grep", {"pattern": pattern, "path": "billing/"})
                log.result(call_id, "succeeded", grep(pattern))
            if step % 5 == 4:
                log.say(
                    "assistant",
                    f"Notes so far ({calls} tool calls): the PR switches "
                    "rounding from ROUND_HALF_UP to ROUND_HALF_EVEN in most proration helpers "
                    "but not in every third one, so credits and charges can round "
                    "differently by one cent.",
                )
    log.say(
        "assistant",
        "Verdict: request changes.\n"
        "Blocking: (1) mixed rounding modes — billing/proration.py uses ROUND_HALF_UP in "
        "every third helper (e.g. line 32) while the rest use ROUND_HALF_EVEN, which is "
        "what makes test_prorate_amount_17 and test_split_credit_52 fail by one cent. "
        "(2) migration 0042 has no reverse for the credit backfill, so it is not "
        "reversible as written.\n"
        "Non-blocking: add a property test that charge + credit == price for every day of "
        "the period.",
    )
