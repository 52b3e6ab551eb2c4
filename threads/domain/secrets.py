"""Secrets in an event's text, found at ingest (docs/event-log.md, "Secrets at ingest"): which
detect-secrets plugins run, how an event's strings are read and named, and the flags an event
gets: `{"type": <the plugin's secret type>, "field": <where>}`, never the secret itself.

Pure. Only the plugins' own `analyze_string` runs, each on a string: never `analyze_line`, which
with the package's settings may ask a vendor's API over the network whether a key is live, and
never those settings (process-global state that `transient_settings` swaps under every thread of
the process). The scanner is built once per process (`secret_scanner`).

What it costs, and why it is built so (docs/benchmarks.md,
"Secret detection at ingest — `bench/ingest_secrets.py`"):
- every expression has a literal that each of its matches contains, read from the expression
  itself with `re`'s own parser (`AKIA`, `ghp_`, `BEGIN RSA PRIVATE KEY`);
- one Aho-Corasick pass over a whole batch's canonical JSON (which the append has encoded
  already) finds which events hold which literals; only those events' strings are walked, and
  given only to the plugins whose literal is there: on a batch with no secret no plugin runs;
- a string shorter than an expression's shortest match is not given to it.
"""

from __future__ import annotations

import bisect
import copy
import itertools
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

from ahocorasick_rs import BytesAhoCorasick
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector

# The plugins that run: each matches one vendor's token format (a fixed prefix or shape) or a
# private key block or a password in a URL, so ordinary prose, ids and hashes do not match.
# Left out (docs/event-log.md, "Secrets at ingest"): the two high-entropy plugins (a sha256, a
# base64 id or a UUID-like string is high-entropy), KeywordDetector (`password: required` in a
# sentence), IPPublicDetector (an address is no secret, and tool results hold many), the
# keyword-assignment vendors (Artifactory, Cloudant, IBM Cloud IAM, IBM COS HMAC, SoftLayer:
# each costs as much as all the rest, and Artifactory's `AP…` matches upper-case words), and
# Discord's and Telegram's bot tokens (no literal part to look for first: each expression would
# run over every batch, at about the cost of all the others together).
PLUGINS: tuple[type[RegexBasedDetector], ...] = (
    AWSKeyDetector,
    AzureStorageKeyDetector,
    BasicAuthDetector,
    GitHubTokenDetector,
    GitLabTokenDetector,
    JwtTokenDetector,
    MailchimpDetector,
    NpmDetector,
    OpenAIDetector,
    PrivateKeyDetector,
    PypiTokenDetector,
    SendGridDetector,
    SlackDetector,
    SquareOAuthDetector,
    StripeDetector,
    TwilioKeyDetector,
)

# At most this many flags an event: enough to say which fields to look at.
MAX_FLAGS = 20
# A field is named up to this many characters ("…" after).
MAX_FIELD_CHARS = 200
# A key shown by its name in a field: a plain name. Any other key, and a key that holds a secret
# itself, is shown as "*", so that a field never carries more of the event than a name.
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,63}")
# Letters a case-insensitive expression also matches with a non-ASCII character that lower()
# does not map to them alone (re matches "ı" and "İ" for i, "ſ" for s, "K" for k): never part
# of a folded literal.
_FOLD_UNSAFE = frozenset("iIsSkK")
# Alternatives of a literal kept when expressions branch (ghp_|gho_|…); past this, fewer.
_MAX_ALTERNATIVES = 32

Flag = dict[str, Any]
Path = tuple[str | int, ...]


@dataclass(frozen=True)
class _Probe:
    """One expression of one plugin, run as that plugin with only that expression (so that the
    plugin's own checks of a match, a JWT's decoding, still apply)."""

    plugin: RegexBasedDetector
    secret_type: str
    # One of these is in every string the expression matches; None: no literal to look for.
    needles: frozenset[str] | None
    folded: bool  # the needles are lower case, looked for in the lower-cased text
    min_length: int  # of any match

    def may_match(self, text: str) -> bool:
        if len(text) < self.min_length:
            return False
        if self.needles is None:
            return True
        # Folded literals hold no i, s or k: the only letters a case-insensitive expression
        # matches with a character that lower() does not turn into them (ı, ſ, İ).
        haystack = text.lower() if self.folded else text
        return any(needle in haystack for needle in self.needles)

    def matches(self, text: str) -> bool:
        return self.may_match(text) and any(True for _ in self.plugin.analyze_string(text))


class SecretScanner:
    """The configured plugins as probes, and one automaton over all their literals, ready to
    scan batches of events."""

    def __init__(self, plugins: Iterable[RegexBasedDetector]) -> None:
        self.probes = [probe for plugin in plugins for probe in _probes(plugin)]
        # Literals as bytes, looked for in UTF-8: no byte of a non-ASCII character is ASCII, so
        # an ASCII literal is in the bytes where it is in the text. The folded ones in the
        # ASCII-lower-cased bytes (they hold no letter a non-ASCII character matches).
        self.needles: list[tuple[bytes, bool, list[_Probe]]] = []
        for folded in (False, True):
            by_needle: dict[str, list[_Probe]] = {}
            for probe in self.probes:
                if probe.needles is not None and probe.folded == folded:
                    for needle in sorted(probe.needles):
                        by_needle.setdefault(needle, []).append(probe)
            for needle, probes in sorted(by_needle.items()):
                self.needles.append((needle.encode(), folded, probes))
        self.plain = BytesAhoCorasick([n for n, folded, _ in self.needles if not folded])
        self.folded = BytesAhoCorasick([n for n, folded, _ in self.needles if folded])
        self.folded_from = sum(1 for _, folded, _ in self.needles if not folded)

    def scan(self, events: Sequence[tuple[Mapping[str, Any], str]]) -> list[list[Flag]]:
        """Each event's flags, in order ([] for most). An event comes as (its fields, its
        text): the mapping of its top-level fields (its kind's, `metadata`, ...) to their values,
        whose names begin its flags' fields, and a text that holds each of its strings as JSON
        writes them (its canonical JSON: the append has it already)."""
        texts = [text.encode() for _, text in events]
        joined = b"\n".join(texts)
        starts = list(itertools.accumulate((len(t) + 1 for t in texts[:-1]), initial=0))
        # Which events hold a literal of which probe: one pass of each automaton.
        candidates: dict[int, set[int]] = {}  # id(probe) -> event indexes
        for automaton, text, offset in (
            (self.plain, joined, 0),
            (self.folded, joined.lower(), self.folded_from),
        ):
            for needle, begin, _ in automaton.find_matches_as_indexes(text, overlapping=True):
                event = bisect.bisect_right(starts, begin) - 1
                for probe in self.needles[offset + needle][2]:
                    candidates.setdefault(id(probe), set()).add(event)
        flags: list[dict[tuple[int, str, str], None]] = [{} for _ in events]
        for probe in self.probes:
            indexes = range(len(events)) if probe.needles is None else candidates.get(id(probe))
            for index in sorted(indexes or ()):
                for order, (path, value) in enumerate(_walk(events[index][0])):
                    if probe.matches(value):
                        flags[index][(order, self._field(path), probe.secret_type)] = None
        return [
            [{"type": kind, "field": field} for _, field, kind in _distinct(sorted(found))]
            for found in flags
        ]

    def values(self, fields: Mapping[str, Any]) -> list[str]:
        """The secret values themselves in an event's fields, each once, in the order found:
        for a redaction to look for elsewhere (docs/event-log.md, "Redaction"). Never stored,
        logged or answered."""
        found: dict[str, None] = {}
        for _, value in _walk(fields):
            for probe in self.probes:
                if probe.may_match(value):
                    for secret in probe.plugin.analyze_string(value):
                        found.setdefault(secret, None)
        return list(found)

    def holds_secret(self, text: str) -> bool:
        return any(probe.matches(text) for probe in self.probes)

    def _field(self, path: Path) -> str:
        """Where in the event: `content`, `arguments.api_key`, `content[1].text`, `metadata.*`."""
        name = ""
        for part in path:
            if isinstance(part, int):
                name += f"[{part}]"
                continue
            shown = part if _PLAIN_KEY.fullmatch(part) and not self.holds_secret(part) else "*"
            name += f".{shown}" if name else shown
        return name if len(name) <= MAX_FIELD_CHARS else name[: MAX_FIELD_CHARS - 1] + "…"


def _distinct(found: list[tuple[int, str, str]]) -> Iterator[tuple[int, str, str]]:
    seen: set[tuple[str, str]] = set()
    for order, field, kind in found:
        if (field, kind) in seen:
            continue
        seen.add((field, kind))
        yield order, field, kind
        if len(seen) == MAX_FLAGS:
            return


@cache
def secret_scanner() -> SecretScanner:
    """The scanner of PLUGINS, built once per process."""
    return SecretScanner(plugin() for plugin in PLUGINS)


def event_secrets(events: Sequence[tuple[Mapping[str, Any], str]]) -> list[list[Flag]]:
    """Each event's flags (see SecretScanner.scan)."""
    return secret_scanner().scan(events)


def event_secret_values(fields: Mapping[str, Any]) -> list[str]:
    """The secret values in an event's fields (SecretScanner.values)."""
    return secret_scanner().values(fields)


# --- reading an event's strings -------------------------------------------------------------


def _walk(value: Any, path: Path = ()) -> Iterator[tuple[Path, str]]:
    """Every string in `value` with where it is; a key's path ends with the key itself."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if path:  # the top level's names are the event's own fields
                yield (*path, key), key
            yield from _walk(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _walk(item, (*path, index))


# --- a literal every match contains, from the expression itself -----------------------------


def _probes(plugin: RegexBasedDetector) -> list[_Probe]:
    probes = []
    for expression in plugin.denylist:
        single = copy.copy(plugin)
        single.denylist = (expression,)  # type: ignore[misc]
        parsed = sre_parse.parse(expression.pattern, expression.flags)
        folded = bool(parsed.state.flags & re.IGNORECASE)
        literals = _Literals(folded)
        literals.walk(list(parsed), folded)
        literals.close()
        probes.append(
            _Probe(
                plugin=single,
                secret_type=str(plugin.secret_type),
                needles=max(
                    (found for found in literals.found if all(map(_json_plain, found))),
                    key=_strength,
                    default=None,
                ),
                folded=folded,
                min_length=max(int(parsed.getwidth()[0]), 1),
            )
        )
    return probes


def _json_plain(needle: str) -> bool:
    """JSON writes it as it is (no quote, backslash or control character), so that it is
    in an event's JSON text wherever it is in one of its strings."""
    return not any(c in '"\\' or ord(c) < 0x20 or c == "\x7f" for c in needle)


def _strength(needles: frozenset[str]) -> tuple[int, int]:
    return min(len(n) for n in needles), -len(needles)


class _Literals:
    """Reads a parsed expression for the strings one of which every match holds contiguously:
    runs of literal characters, across groups and across branches whose alternatives each
    begin with literals (`(?:A3T|ABIA|AKIA)` gives {A3T, ABIA, AKIA})."""

    def __init__(self, folded: bool) -> None:
        self.found: list[frozenset[str]] = []
        self.current: set[str] = {""}
        self.folded = folded
        # What the expression begins with, once the first run of literals has ended (empty
        # when it does not begin with one); None while it goes on.
        self.lead: frozenset[str] | None = None

    def close(self) -> None:
        run = frozenset(self.current) if "" not in self.current else frozenset()
        if run:
            self.found.append(run)
        if self.lead is None:
            self.lead = run
        self.current = {""}

    def extend(self, tails: set[str]) -> None:
        grown = {head + tail for head in self.current for tail in tails}
        if len(grown) > _MAX_ALTERNATIVES:
            self.close()
            grown = set(tails) if len(tails) <= _MAX_ALTERNATIVES else {""}
        self.current = grown

    def literal(self, code: int, folded: bool) -> str | None:
        char = chr(code)
        if not folded:
            return char
        if not char.isascii() or char in _FOLD_UNSAFE:
            return None
        return char.lower()

    def walk(self, items: Sequence[tuple[Any, Any]], folded: bool) -> None:
        for op, av in items:
            if op is sre.LITERAL:
                char = self.literal(av, folded)
                if char is None:
                    self.close()
                else:
                    self.extend({char})
            elif op is sre.IN and (chars := self._literal_set(av, folded)) is not None:
                self.extend(chars)
            elif op is sre.SUBPATTERN:
                _, add, remove, sub = av
                inner = (folded or bool(add & re.IGNORECASE)) and not remove & re.IGNORECASE
                if inner == folded:
                    self.walk(list(sub), folded)  # the group's content, in line
                else:
                    self.close()
                    self.walk(list(sub), inner)
                    self.close()
            elif op is sre.BRANCH:
                leads = [self._lead(list(alternative), folded) for alternative in av[1]]
                if all(lead for lead, _ in leads):
                    self.extend(set().union(*(lead for lead, _ in leads)))
                    if not all(whole for _, whole in leads):
                        self.close()
                else:
                    self.close()
            elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT) and av[0] >= 1:
                self.close()
                self.walk(list(av[2]), folded)
                self.close()
            else:
                self.close()

    def _literal_set(self, av: Sequence[tuple[Any, Any]], folded: bool) -> set[str] | None:
        """A class of a few plain characters (`[rs]`) as alternatives; None for any other."""
        if len(av) > 8 or any(op is not sre.LITERAL for op, _ in av):
            return None
        chars = {self.literal(code, folded) for _, code in av}
        return None if None in chars else {c for c in chars if c is not None}

    def _lead(self, items: list[tuple[Any, Any]], folded: bool) -> tuple[set[str], bool]:
        """The literals an alternative begins with, and whether they are all of it."""
        alternative = _Literals(self.folded)
        alternative.walk(items, folded)
        if alternative.lead is None:  # literals to its end
            return (
                {s for s in alternative.current if s} if "" not in alternative.current else set()
            ), True
        return set(alternative.lead), False
