"""Secrets in an event's text (docs/event-log.md, "Secrets at ingest"), without a database: what
the plugins find and how the flag names it, what they leave alone (prose, ids, hashes, plain
JSON), one scan of a batch flagging only its events that hold a secret, and the literal each
expression is first looked for by, which must never hide a match the expression would make."""

from __future__ import annotations

import random
import re
import string
import sys
from typing import Any

import pytest

from threads.domain.canonical import canonical_text
from threads.domain.secrets import MAX_FLAGS, PLUGINS, secret_scanner

# Well-known fake values: AWS's documented example key pair, and made-up tokens of each format.
AWS_KEY_ID = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
GITHUB_TOKEN = "ghp_" + "x1Y2z3" * 6
PRIVATE_KEY = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
    "-----END RSA PRIVATE KEY-----"
)
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
    "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
)
SLACK = "xoxb-123456789012-1234567890123-abcdefghijklmnopqrstuvwx"
STRIPE = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"

SECRETS = {
    "AWS Access Key": AWS_KEY_ID,
    "GitHub Token": GITHUB_TOKEN,
    "Private Key": PRIVATE_KEY,
    "JSON Web Token": JWT,
    "Slack Token": SLACK,
    "Stripe Access Key": STRIPE,
    "Basic Auth Credentials": "postgres://app:hunter2-hunter2@db.internal:5432/prod",
}

ORDINARY = [
    "Your refund of $120 for order 10086 was approved; it reaches your card in 3-5 days.",
    "The request id is 123e4567-e89b-12d3-a456-426614174000.",
    "sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "commit 9fceb02d0ae598e95dc970b74767f19372d61af8, see https://example.com/docs?page=2",
    "Please enter your password: it is required to continue. The API key field is empty.",
    "ACCOUNTING REPORT FOR ASIA PACIFIC, TASK LIST, 2026-03-01T12:00:00Z",
    "Flight HAT170 from JFK to SFO departs 10:30; seat 12C; 192.168.0.1 answered.",
    "dGhpcyBpcyBqdXN0IGJhc2U2NCBvZiBhbiBvcmRpbmFyeSBzZW50ZW5jZQ==",
]


def scan(*events: dict[str, Any]) -> list[list[dict[str, str]]]:
    return secret_scanner().scan([(event, canonical_text(event)) for event in events])


@pytest.mark.parametrize(("kind", "secret"), sorted(SECRETS.items()))
def test_each_kind_is_found_and_named_by_its_field(kind: str, secret: str) -> None:
    (flags,) = scan({"result": {"output": f"here it is: {secret} (keep it safe)"}})
    assert flags == [{"type": kind, "field": "result.output"}]
    assert secret not in canonical_text(flags)


def test_fields_name_where_the_secret_is() -> None:
    event = {
        "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": PRIVATE_KEY}],
        "arguments": {"api_key": AWS_KEY_ID, "headers": {"Authorization": f"Bearer {JWT}"}},
        "result": f"aws_secret_access_key = '{AWS_SECRET}'",
        "metadata": {"trace": {"token": GITHUB_TOKEN}},
    }
    (flags,) = scan(event)
    assert flags == [
        {"type": "Private Key", "field": "content[1].text"},
        {"type": "AWS Access Key", "field": "arguments.api_key"},
        {"type": "JSON Web Token", "field": "arguments.headers.Authorization"},
        {"type": "AWS Access Key", "field": "result"},
        {"type": "GitHub Token", "field": "metadata.trace.token"},
    ]


def test_a_key_that_is_a_secret_or_no_plain_name_is_never_shown() -> None:
    (flags,) = scan(
        {
            "arguments": {AWS_KEY_ID: "yes"},
            "metadata": {"a key with spaces and <b>": {"token": GITHUB_TOKEN}},
        }
    )
    assert flags == [
        {"type": "AWS Access Key", "field": "arguments.*"},
        {"type": "GitHub Token", "field": "metadata.*.token"},
    ]
    assert AWS_KEY_ID not in canonical_text(flags)


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_not_flagged(text: str) -> None:
    assert scan({"content": text}, {"result": {"note": text, "items": [text, 42, None]}}) == [
        [],
        [],
    ]


def test_a_plain_json_result_is_not_flagged() -> None:
    result = {
        "reservation_id": "4WQ150",
        "user_id": "chen_jackson_3290",
        "flights": [{"flight_number": "HAT170", "date": "2024-05-22", "price": 1048}],
        "payment_history": [{"payment_id": "credit_card_4421486", "amount": 1048}],
        "uuid": "8f14e45f-ceea-467a-9575-6a8e5c1b3b7e",
        "digest": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    }
    assert scan({"result": result, "metadata": {"trace_id": "tau-12-0-3", "turn": 4}}) == [[]]


def test_a_batch_flags_only_its_events_that_hold_one() -> None:
    events: list[dict[str, Any]] = [{"content": text} for text in ORDINARY]
    events.insert(2, {"result": AWS_KEY_ID})
    events.insert(6, {"arguments": {"url": SECRETS["Basic Auth Credentials"]}})
    found = scan(*events)
    assert [i for i, flags in enumerate(found) if flags] == [2, 6]
    assert found[2] == [{"type": "AWS Access Key", "field": "result"}]
    assert found[6] == [{"type": "Basic Auth Credentials", "field": "arguments.url"}]


def test_flags_are_distinct_and_bounded() -> None:
    (flags,) = scan({"result": [AWS_KEY_ID] * (MAX_FLAGS + 5), "content": AWS_KEY_ID * 3})
    assert len(flags) == MAX_FLAGS
    assert flags[0] == {"type": "AWS Access Key", "field": "result[0]"}
    (flags,) = scan({"content": f"{AWS_KEY_ID} and again {AWS_KEY_ID}"})
    assert flags == [{"type": "AWS Access Key", "field": "content"}]


def test_every_expression_has_a_literal_to_look_for_first() -> None:
    """The cost of a batch without a secret is one pass of an automaton over its literals
    (docs/benchmarks.md, "Secret detection at ingest — `bench/ingest_secrets.py`"): an
    expression without one would run over every batch."""
    scanner = secret_scanner()
    assert {type(probe.plugin) for probe in scanner.probes} == set(PLUGINS)
    assert all(probe.needles for probe in scanner.probes)


def _variants(secret: str) -> list[str]:
    """Strings around a secret: alone, in prose, in JSON-ish text, in upper or lower case."""
    return [
        secret,
        f"prefix {secret} suffix",
        f'{{"k": "{secret}"}}',
        f"line one\n{secret}\nline three",
        secret.upper(),
        secret.lower(),
    ]


def test_the_literal_first_never_hides_a_match() -> None:
    """Wherever an expression matches, its literal is there: in the event's JSON text (what the
    automaton reads) and in the string (what the probe checks again)."""
    rng = random.Random(7)
    alphabet = string.ascii_letters + string.digits + "_-.:/=+@ \n\"'"
    samples = [v for secret in SECRETS.values() for v in _variants(secret)]
    samples += [f"aws key = '{AWS_SECRET}'", f'AWS_PASSWORD: "{AWS_SECRET}"']
    samples += [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(5, 300))) for _ in range(3000)
    ]
    samples += ORDINARY
    scanner = secret_scanner()
    for probe in scanner.probes:
        (expression,) = probe.plugin.denylist
        for sample in samples:
            if any(True for _ in probe.plugin.analyze_string(sample)):
                assert probe.may_match(sample), (probe.secret_type, sample)
                found = scanner.scan([({"content": sample}, canonical_text({"content": sample}))])
                assert {"type": probe.secret_type, "field": "content"} in found[0], sample
            else:
                assert not expression.search(sample) or probe.may_match(sample)


def test_folded_literals_hold_no_letter_another_script_matches() -> None:
    """A case-insensitive expression matches some non-ASCII characters for ASCII letters (ı and
    İ for i, ſ for s, K for k): a literal looked for in lower-cased text must hold none of those
    letters, and every other letter it holds matches only itself, upper or lower case."""
    folded = [probe for probe in secret_scanner().probes if probe.folded]
    assert folded
    letters = {c for probe in folded for needle in probe.needles or () for c in needle}
    for code in range(sys.maxunicode + 1):
        char = chr(code)
        if 0xD800 <= code <= 0xDFFF:
            continue
        for letter in letters & set(string.ascii_lowercase):
            if re.fullmatch(letter, char, re.IGNORECASE):
                assert char.lower() == letter, (letter, hex(code))
