"""References to the repo's own documents resolve, and none points at a document a clone lacks.

Code, tests, benchmarks and templates cite `docs/<name>.md §N` or `§N.M`; further `§` numbers on
the same line belong to the same document ("docs/design.md §5.6 and §6.2"). The cited file must
exist and hold a heading with that number (`## 5. …`, `### 5.6 …`, see the top of
docs/design.md). Inside docs/*.md a bare `§N` cites the file it is written in.

The documents the product was first specified in are not part of the repository, so a citation
of them cannot be followed by anyone who clones it; every such citation fails here, with what
to write instead. No database: plain file reads.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
THIS_FILE = Path(__file__).resolve()
DOCS = ROOT / "docs"
CODE_DIRS = ("threads", "ctxadmin", "bench", "tests", "clients")
SKIP_PARTS = frozenset({"__pycache__", "node_modules", ".venv", ".git"})

HEADING = re.compile(r"^#{1,6}[ \t]+(\d+(?:\.\d+)*)\.?[ \t]", re.MULTILINE)
SECTION = re.compile(r"§[ \t]?(\d+(?:\.\d+)*)")
DOC_IN_CODE = re.compile(r"(?<![\w/.-])docs/([\w-]+\.md)\b")
DOC_IN_DOCS = re.compile(r"(?<![\w/.-])(?:docs/)?([\w-]+\.md)\b")
# Case-sensitive on purpose: these words in capitals name documents outside the repository.
# A line that starts a new comment, docstring or definition ends the citing paragraph.
PARAGRAPH_STARTS = ('"""', "'''", "def ", "class ", "@", "<", "{%")
FOREIGN = re.compile(r"\bDESIGN\b|\bCONTRACT\b|\bINTERFACES\b|\bREAL_CLIENTS\b|\.\./shared")

# docs/api.md's sections by the titles the outside documents gave them.
API_SECTIONS = {
    "Checkpoints, integrity, rollback, fork": "7",
    "Side effects and approvals": "8",
    "Summaries and folding": "5",
    "event canonical form": "7.6",
    "Working context": "4",
    "Dashboard URLs": "9",
    "Configuration": "11",
    "`import_trace`": "10.1",
    "Summaries": "5",
    "Threads": "2",
    "Events": "3",
}
_TITLES = "|".join(re.escape(t) for t in sorted(API_SECTIONS, key=len, reverse=True))

Replacement = str | Callable[[re.Match[str]], str]

# Old citation → new one, most specific first. `repoint.py` applies these in this order.
REPOINT: list[tuple[re.Pattern[str], Replacement]] = [
    (re.compile(r"DESIGN §5, the articles in seeds/"), "docs/design.md §5"),
    # The outside design's §11 (agent frameworks) is docs/design.md §15; §11 here is Layers.
    (re.compile(r"DESIGN(?:\.md)? §11(?!\.?\d)"), "docs/design.md §15"),
    (re.compile(r'DESIGN(?:\.md)?[:,]? "?Layout"?'), "docs/design.md §11"),
    (re.compile(r"DESIGN(?:\.md)? §(\d+(?:\.\d+)*)"), r"docs/design.md §\1"),
    (re.compile(r"REAL_CLIENTS(?:\.md)? §\d+(?:\.\d+)*"), "docs/api.md §10.1"),
    (re.compile(r"CONTRACT: checksum of"), "docs/api.md §7.6: checksum of"),
    (re.compile(r"CONTRACT's integrity answer"), "The integrity answer (docs/api.md §7.2)"),
    (re.compile(r"CONTRACT's working context"), "The working context (docs/api.md §4)"),
    (re.compile(r"written from CONTRACT alone"), "written from docs/api.md §7.6 alone"),
    (re.compile(r"\(CONTRACT:(\s+)`seq`"), r"(docs/api.md §7.6:\1`seq`"),
    (
        re.compile(r'schema_version 1 \(CONTRACT "Summaries"\)'),
        "schema_version 1 (docs/api.md §5.3)",
    ),
    (re.compile(r"\(CONTRACT(?:\.md)?\)"), "(docs/api.md §1.3)"),
    (
        re.compile(rf"CONTRACT(?:\.md)?[:,]?(\s+)\"?({_TITLES})\"?"),
        lambda m: f"docs/api.md §{API_SECTIONS[m.group(2)]}",
    ),
    (re.compile(r"INTERFACES: what the chain covers"), "docs/api.md §7.6: what the chain covers"),
    (re.compile(r'\(INTERFACES(?: "Event dicts in the domain")?\)'), "(docs/design.md §2.4)"),
]


def _files() -> Iterator[Path]:
    for name in CODE_DIRS:
        yield from sorted((ROOT / name).rglob("*.py"))
    yield from sorted((ROOT / "templates").rglob("*.html"))
    yield from sorted(DOCS.glob("*.md"))
    yield ROOT / "README.md"


def scanned_files() -> list[Path]:
    return [
        path
        for path in _files()
        if path.is_file()
        and path.resolve() != THIS_FILE
        and not SKIP_PARTS.intersection(path.relative_to(ROOT).parts)
    ]


@cache
def headings(doc: Path) -> tuple[str, ...]:
    """The section numbers a document's headings start with, in order."""
    return tuple(HEADING.findall(doc.read_text(encoding="utf-8")))


@dataclass(frozen=True)
class Problem:
    where: str
    found: str
    instead: str

    def __str__(self) -> str:
        return f"{self.where}: {self.found!r} → {self.instead}"


def _where(path: Path, text: str, index: int) -> str:
    return f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, index) + 1}"


def reference_problems(path: Path) -> list[Problem]:
    """Citations in `path` whose document or numbered heading does not exist."""
    text = path.read_text(encoding="utf-8")
    in_docs = path.suffix == ".md" and path.parent == DOCS
    doc_pattern = DOC_IN_DOCS if in_docs else DOC_IN_CODE
    problems = []
    offset = 0
    own = path if in_docs else None
    current = own
    was_comment = False
    for line in text.splitlines(keepends=True):
        tokens = sorted(
            [(m.start(), "doc", m.group(1)) for m in doc_pattern.finditer(line)]
            + [(m.start(), "section", m.group(1)) for m in SECTION.finditer(line)]
        )
        stripped = line.lstrip()
        is_comment = stripped.startswith("#")
        if not stripped or stripped.startswith(PARAGRAPH_STARTS) or is_comment != was_comment:
            current = own  # a cited document carries on to the end of its paragraph only
        was_comment = is_comment
        for start, kind, value in tokens:
            where = _where(path, text, offset + start)
            if kind == "doc":
                current = DOCS / value
                if not current.is_file():
                    problems.append(Problem(where, f"docs/{value}", "no such file under docs/"))
            elif current is None:
                if not FOREIGN.search(line):  # those are test_no_foreign_documents' business
                    problems.append(
                        Problem(where, f"§{value}", "name the document: docs/<name>.md §N")
                    )
            elif current.is_file() and value not in headings(current):
                problems.append(
                    Problem(
                        where,
                        f"{current.relative_to(ROOT)} §{value}",
                        f"{current.relative_to(ROOT)} has no heading numbered {value}",
                    )
                )
        offset += len(line)
    return problems


def _flat(text: str) -> str:
    return " ".join(text.split())


def suggestion(text: str, index: int) -> str:
    """What to write instead of the foreign citation at `index`, by the REPOINT table."""
    for pattern, replacement in REPOINT:
        for m in pattern.finditer(text):
            if m.start() <= index < m.end():
                new = replacement(m) if callable(replacement) else m.expand(replacement)
                return f"write {_flat(new)!r} instead of {_flat(m.group(0))!r}"
    return "cite docs/design.md §N or docs/api.md §N instead"


def foreign_problems(path: Path) -> list[Problem]:
    """Citations in `path` of documents that are not in the repository."""
    text = path.read_text(encoding="utf-8")
    return [
        Problem(_where(path, text, m.start()), m.group(0), suggestion(text, m.start()))
        for m in FOREIGN.finditer(text)
    ]


def _report(title: str, problems: list[Problem]) -> str:
    return "\n".join([f"{title} ({len(problems)}):", *(f"  {p}" for p in problems)])


def test_design_and_api_documents_exist() -> None:
    for name in ("design.md", "api.md"):
        assert headings(DOCS / name), f"docs/{name} has no numbered headings"


@pytest.mark.parametrize("name", sorted(p.name for p in DOCS.glob("*.md")))
def test_section_numbers_are_unique(name: str) -> None:
    numbers = headings(DOCS / name)
    repeated = sorted({n for n in numbers if numbers.count(n) > 1})
    assert not repeated, f"docs/{name}: sections numbered more than once: {repeated}"


def test_doc_references_resolve() -> None:
    problems = [p for path in scanned_files() for p in reference_problems(path)]
    if problems:
        pytest.fail(_report("references that do not resolve", problems), pytrace=False)


def test_no_foreign_documents() -> None:
    problems = [p for path in scanned_files() for p in foreign_problems(path)]
    if problems:
        pytest.fail(
            _report("references to documents that are not in the repository", problems),
            pytrace=False,
        )
