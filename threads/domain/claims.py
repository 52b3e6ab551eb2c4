"""What a piece of summary text claims about the world, read conservatively (docs/pipeline.md,
"Verify").

Verification cannot understand prose, so it does not try to: it looks for the few words that
state an outcome (succeeded, paid, refunded, failed, approved, ...), the words that withdraw
one (unknown, pending, timed out, may, ...) and the names of the calls in the ledger (tool
name, tool_call_id, idempotency key). A clause that states an outcome for a call is compared
with the ledger's status for that call; a clause that states a money-moving or plain success
without naming a call is compared with every side-effecting call. Deterministic and pure: the
same text and ledger give the same answer. It errs towards refusing: a summary that needs
prose to say what happened has the tool state for that, which the log decides.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from threads.domain.render import content_text

SUCCESS = "success"
FAILURE = "failure"
UNCERTAIN = "uncertain"
APPROVED = "approved"
REJECTED = "rejected"

# Words that state a success on their own, whether or not a call is named.
STRONG_SUCCESS = frozenset(
    {
        "succeeded",
        "succeed",
        "succeeds",
        "success",
        "successful",
        "successfully",
        "paid",
        "refunded",
        "reimbursed",
        "credited",
        "transferred",
        "charged",
        "repaid",
    }
)
# Words that state a success only about a call the clause names.
WEAK_SUCCESS = frozenset(
    {
        "completed",
        "complete",
        "done",
        "processed",
        "issued",
        "happened",
        "executed",
        "finished",
        "worked",
        "delivered",
        "returned",
        "applied",
        "ok",
        "okay",
        "through",  # "went through"
        "performed",
        "fulfilled",
        "settled",
    }
)
FAILURE_WORDS = frozenset(
    {
        "failed",
        "fail",
        "fails",
        "failure",
        "failing",
        "unsuccessful",
        "unsuccessfully",
        "errored",
        "error",
        "declined",
        "bounced",
        "crashed",
        "rejected",
        "denied",
        "refused",
        "cancelled",
        "canceled",
        "aborted",
    }
)
UNCERTAIN_WORDS = frozenset(
    {
        "unknown",
        "unclear",
        "uncertain",
        "unconfirmed",
        "unverified",
        "unresolved",
        "timeout",
        "pending",
        "awaiting",
        "waiting",
        "may",
        "might",
        "whether",
        "unsure",
        "perhaps",
        "possibly",
        "running",
        "ongoing",
        "outstanding",
        "undetermined",
    }
)
UNCERTAIN_PHRASES = (
    "timed out",
    "time out",
    "not known",
    "not yet",
    "not sure",
    "not confirmed",
    "not verified",
    "cannot tell",
    "can't tell",
    "in progress",
    "no result",
    "no answer",
    "to be confirmed",
    "needs a person",
    "needs an operator",
)
NEGATIONS = frozenset(
    {"not", "never", "no", "nothing", "without", "neither", "nor", "none", "cannot", "unable"}
)
APPROVE_WORDS = frozenset(
    {"approved", "approve", "approves", "authorized", "authorised", "granted", "allowed"}
)
REJECT_WORDS = frozenset({"rejected", "reject", "denied", "refused", "declined", "vetoed"})
APPROVE_PHRASES = ("signed off", "sign off", "green light", "go-ahead", "go ahead", "okayed")
PRONOUNS = frozenset({"it", "they", "this", "that", "both", "these", "those", "each"})
# Words that mean money moved, when the clause speaks of money.
MONEY_WORDS = frozenset(
    {"money", "funds", "amount", "eur", "usd", "gbp", "dollars", "euros", "cash", "payment"}
)
MONEY_MOVES = frozenset(
    {"sent", "returned", "back", "wired", "deposited", "received", "got", "moved", "made"}
)
APPROVAL_NOUNS = ("approv", "authori", "permission", "sign-off", "signoff")
# Clause boundaries: sentence punctuation, commas, and the conjunctions that join two claims.
_CLAUSE_SPLIT = re.compile(
    r"[.;!?\n]+|,|\b(?:and|but|while|whereas|although|though|however|so|then|because|after|"
    r"before|yet|whilst|until|once)\b",
    re.IGNORECASE,
)
_TOKEN = re.compile(r"[a-z0-9]+(?:[.'][a-z0-9]+)*")
STOPWORDS = frozenset(
    {
        "the",
        "and",
        "for",
        "was",
        "were",
        "are",
        "has",
        "had",
        "have",
        "been",
        "with",
        "that",
        "this",
        "from",
        "into",
        "its",
        "our",
        "their",
        "his",
        "her",
        "them",
        "they",
        "you",
        "your",
        "will",
        "would",
        "should",
        "could",
        "can",
        "per",
        "via",
        "all",
        "any",
        "let",
        "please",
        "user",
        "agent",
        "customer",
    }
)


def normalise(text: Any) -> str:
    """Lowercase, one space between words, no trailing punctuation: for verbatim compares."""
    if not isinstance(text, str):
        text = str(text)
    text = text.replace("’", "'").replace("‘", "'").lower()
    return " ".join(text.split()).strip(" .;:!?,")


def tokens(text: Any) -> list[str]:
    return _TOKEN.findall(normalise(text).replace("n't", " not").replace("_", " "))


def content_tokens(text: Any) -> set[str]:
    """The words of `text` that carry meaning: numbers and words of three letters or more,
    without stopwords and without the outcome vocabulary (which the ledger judges)."""
    return {
        t
        for t in tokens(text)
        if (t[0].isdigit() or len(t) >= 3)
        and t not in STOPWORDS
        and t not in STRONG_SUCCESS
        and t not in WEAK_SUCCESS
        and t not in FAILURE_WORDS
        and t not in UNCERTAIN_WORDS
    }


def is_negated(text: Any) -> bool:
    return any(t in NEGATIONS for t in tokens(text))


def clauses(text: Any) -> list[str]:
    return [c.strip() for c in _CLAUSE_SPLIT.split(normalise(text)) if c and c.strip()]


def _has_phrase(clause: str, phrases: Iterable[str]) -> bool:
    spaced = f" {clause} "
    return any(f" {p} " in spaced or f" {p}" in spaced for p in phrases)


@dataclass(frozen=True)
class Claim:
    """One clause's claim: an outcome (SUCCESS, FAILURE or UNCERTAIN) and/or an approval
    verdict (APPROVED, REJECTED); `strong` when the outcome words need no named call."""

    clause: str
    outcome: str | None
    strong: bool
    approval: str | None
    refers_back: bool = False  # "it", "they", "both": the calls the clause before named


def claim_of(clause: str) -> Claim:
    words = tokens(clause)
    wordset = set(words)
    negated = bool(wordset & NEGATIONS)
    approval: str | None = None
    if wordset & APPROVE_WORDS or _has_phrase(clause, APPROVE_PHRASES):
        approval = REJECTED if negated else APPROVED
    elif wordset & REJECT_WORDS and any(n in clause for n in APPROVAL_NOUNS):
        approval = REJECTED
    refers_back = bool(wordset & PRONOUNS)
    doubt = wordset & UNCERTAIN_WORDS
    # "no longer pending" withdraws the doubt: it says the outcome is known.
    if (doubt and not _negates(words, doubt)) or _has_phrase(clause, UNCERTAIN_PHRASES):
        return Claim(clause, UNCERTAIN, False, None, refers_back)
    success = wordset & (STRONG_SUCCESS | WEAK_SUCCESS)
    money = bool(wordset & MONEY_WORDS) or any(c in clause for c in "$€£")
    if money:
        success |= wordset & MONEY_MOVES
    failure = wordset & FAILURE_WORDS
    outcome: str | None = None
    strong = False
    if failure:
        # "did not fail" is a success; "failed" is a failure, negated or not, for safety.
        outcome = SUCCESS if negated and not success and _negates(words, failure) else FAILURE
        strong = True
    elif success:
        outcome = FAILURE if negated else SUCCESS
        strong = bool(success & STRONG_SUCCESS) or negated or money
    return Claim(clause, outcome, strong, approval, refers_back)


def _negates(words: Sequence[str], targets: set[str]) -> bool:
    """A negation within the two words before one of `targets`."""
    for index, word in enumerate(words):
        if word in targets and any(w in NEGATIONS for w in words[max(0, index - 3) : index]):
            return True
    return False


def claims(text: Any) -> list[Claim]:
    """The claim of every clause of `text`, in order (outcome and approval None where the
    clause states nothing)."""
    return [claim_of(c) for c in clauses(text)]


# --- the ledger's calls, as text names them ---------------------------------------------------


def _name_pattern(name: str) -> re.Pattern[str] | None:
    name = normalise(name)
    if len(name) < 2 or name.isdigit():
        return None
    return re.compile(r"(?<![a-z0-9])" + re.escape(name) + r"(?![a-z0-9])")


def _tool_stems(tool: str) -> list[str]:
    """The words a tool's name is written with in prose: the whole name and each part of four
    letters or more ("issue_refund" → issue, refund); "refunded" names "refund"."""
    name = normalise(tool)
    parts = [p for p in re.split(r"[^a-z0-9]+", name) if len(p) >= 4]
    return sorted({name.replace("_", " "), *parts}) if name else []


@dataclass
class CallRef:
    call_seq: int
    tool: str
    tool_call_id: str
    status: str
    side_effect: bool


def calls_named(text: Any, calls: Sequence[CallRef]) -> tuple[list[CallRef], bool]:
    """The calls `text` names, and whether it names them by id (tool_call_id or idempotency
    key: exactly those calls) rather than by tool name only (any call of that tool)."""
    low = normalise(text).replace("_", " ")
    raw = normalise(text)
    by_id = []
    for call in calls:
        for name in (call.tool_call_id,):
            pattern = _name_pattern(name)
            if pattern is not None and (pattern.search(raw) or pattern.search(low)):
                by_id.append(call)
                break
    if by_id:
        return by_id, True
    words = tokens(low)
    by_tool = [
        call
        for call in calls
        if any(
            any(w.startswith(stem) for w in words) if " " not in stem else stem in low
            for stem in _tool_stems(call.tool)
        )
    ]
    return by_tool, False


def agrees(outcome: str, status: str) -> bool:
    """Whether an outcome a text states agrees with a call's status in the ledger."""
    if outcome == SUCCESS:
        return status == "succeeded"
    if outcome == FAILURE:
        return status in ("failed", "cancelled")
    return True


def event_text(event: Mapping[str, Any]) -> str:
    """An event's words, as a model reads them (and the payload's values)."""
    kind = event.get("kind")
    if kind == "message":
        return content_text(event.get("content"))
    parts: list[str] = []
    for name in ("tool_name", "tool_call_id", "action", "reason", "evidence", "decision"):
        value = event.get(name)
        if isinstance(value, str):
            parts.append(value)
    for name in ("arguments", "result", "payload", "verified_facts"):
        parts.extend(_flatten(event.get(name)))
    return " ".join(parts)


def _flatten(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, Mapping):
        out: list[str] = []
        for key, item in value.items():
            out.append(str(key))
            out.extend(_flatten(item))
        return out
    if isinstance(value, list | tuple):
        return [text for item in value for text in _flatten(item)]
    return [str(value)]


def contains_words(text: Any, source: Any, share: float = 0.5) -> bool:
    """`text` says nothing `source` does not: every number of `text` is in `source`, and at
    least `share` of its other meaningful words are (at least one word when it has any)."""
    wanted = content_tokens(text)
    if not wanted:
        return True
    have = set(tokens(source))
    numbers = {t for t in wanted if t[0].isdigit()}
    if not numbers <= have:
        return False
    words = wanted - numbers
    if not words:
        return True
    found = sum(1 for w in words if w in have or any(h.startswith(w[:5]) for h in have))
    return found >= share * len(words)
