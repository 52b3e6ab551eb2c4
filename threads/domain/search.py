"""Message search, the pure part (docs/search.md, "Message search"): what a query's terms are, and a
snippet as the plain and highlighted parts the page shows."""

from __future__ import annotations

import re
from dataclasses import dataclass

# A word as SQLite's unicode61 tokenizer sees one: a run of letters and digits.
_WORD = re.compile(r"[^\W_]+")
# A query holds at most this many terms: a search box is not a document. Every term is
# required, so a longer query is refused (or finds nothing), never cut.
MAX_QUERY_TERMS = 16


def _all_terms(q: str) -> list[str]:
    terms: list[str] = []
    for term in q.replace("\x00", " ").lower().split():
        if _WORD.search(term) and term not in terms:
            terms.append(term)
    return terms


def search_terms(q: str) -> list[str]:
    """The query's terms: its whitespace-separated parts that hold a word, lowercased, each
    once, in order; none when there are more than MAX_QUERY_TERMS (`too_many_terms`). A term
    of several words (`lookup_order`, `rotterdam-port`) is matched as a phrase: its words next
    to each other, in order."""
    terms = _all_terms(q)
    return [] if len(terms) > MAX_QUERY_TERMS else terms


def too_many_terms(q: str) -> int | None:
    """The number of the query's terms when it is over MAX_QUERY_TERMS, else None."""
    count = len(_all_terms(q))
    return count if count > MAX_QUERY_TERMS else None


def term_words(term: str) -> list[str]:
    """The words of a term, as SQLite's unicode61 tokenizer splits them (lowercase already)."""
    return _WORD.findall(term)


def fts5_query(terms: list[str]) -> str:
    """An FTS5 MATCH expression finding every word of every term (AND). Each word is a quoted
    string, so no query syntax of FTS5 (NEAR, column filters, `*`, `-`) can come from the
    person's text. The index keeps no token positions (`detail = none`), so a term of several
    words is matched here as its words anywhere; `holds_phrases` then keeps the rows where they
    stand next to each other, in order."""
    words = [word for term in terms for word in term_words(term)]
    return " ".join('"' + word.replace('"', '""') + '"' for word in dict.fromkeys(words))


def has_phrase(terms: list[str]) -> bool:
    """Whether some term is several words: FTS5's hits then need `holds_phrases`."""
    return any(len(term_words(term)) > 1 for term in terms)


def holds_phrases(text: str, terms: list[str]) -> bool:
    """Whether the words of `text` hold each term's words next to each other, in order (the
    phrase check FTS5 cannot make without positions). Words are split as `term_words` does,
    any case."""
    words = _WORD.findall(text.lower())
    for term in terms:
        phrase = term_words(term)
        if len(phrase) < 2:
            continue
        size, first = len(phrase), phrase[0]
        if not any(
            word == first and words[at : at + size] == phrase for at, word in enumerate(words)
        ):
            return False
    return True


@dataclass(frozen=True, slots=True)
class SnippetPart:
    text: str
    hit: bool


def snippet_parts(snippet: str, start: str, end: str) -> list[SnippetPart]:
    """Split a database snippet whose hits are wrapped in `start`…`end` into parts. The marks
    never occur in the indexed text (they are stripped when it is indexed), so each mark is the
    database's; an unmatched one is dropped rather than guessed at."""
    parts: list[SnippetPart] = []
    rest = snippet
    while rest:
        at = rest.find(start)
        if at < 0:
            parts.append(SnippetPart(rest.replace(end, ""), False))
            break
        if at:
            parts.append(SnippetPart(rest[:at].replace(end, ""), False))
        rest = rest[at + len(start) :]
        stop = rest.find(end)
        hit, rest = (rest, "") if stop < 0 else (rest[:stop], rest[stop + len(end) :])
        hit = hit.replace(start, "")
        if hit:
            parts.append(SnippetPart(hit, True))
    return [p for p in parts if p.text]
