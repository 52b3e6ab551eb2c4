"""Citations of the repo's own documents resolve, none is by section number, and none points at a
document a clone lacks.

Code, tests, benchmarks, clients, templates and scripts cite a document by its path and the text
of one of its headings, exactly as it follows the `#`s: `docs/repairs.md, "Rollback"`; several
headings of one page `docs/repairs.md, "Rollback" and "Fork"`. The page must exist and hold that
heading, once. `ARCHITECTURE.md, "Layers"` is checked the same way once ARCHITECTURE.md exists.
Inside docs/ (and in the README) a reference is a Markdown link, `[Rollback](repairs.md#rollback)`;
its file must exist and its anchor be one of that file's headings (GitHub's anchors). A section
number (`§` and a digit) is no citation: it breaks when a section moves, so none is allowed outside
docs/, and inside docs/ one must name a numbered heading of its own file.

The documents the product was first specified in are not part of the repository, so a citation
of them cannot be followed by anyone who clones it; every such citation fails here, with what
to write instead. No database: plain file reads.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

# The section sign, spelt so that a search of the code for section numbers finds none here.
S = "\N{SECTION SIGN}"
ROOT = Path(__file__).resolve().parent.parent
THIS_FILE = Path(__file__).resolve()
CODE_DIRS = (
    "threads",
    "ctxadmin",
    "integrations",
    "sample_data",
    "bench",
    "tests",
    "clients",
    "scripts",
    "templates",
    "static",
)
ROOT_FILES = ("README.md", "pyproject.toml", "manage.py")
SUFFIXES = frozenset({".py", ".html", ".css", ".js", ".md", ".toml", ".txt", ".sh"})
SKIP_PARTS = frozenset({"__pycache__", "node_modules", ".venv", ".git", "data", "results"})
# Pages whose headings may repeat: the benches write a "Latest run" under each of their own
# sections. A citation of a repeated heading still fails.
REPEATING_HEADINGS = frozenset({"benchmarks.md"})

HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t]*$")
NUMBERED = re.compile(r"^(\d+(?:\.\d+)*)\.?[ \t]+")
SECTION = re.compile(r"§[ \t]?(\d+(?:\.\d+)*)")
QUOTE = r'\\?"([^"\\]{1,200})\\?"'
CITATION = re.compile(
    r"(?<![\w/.-])(docs/[\w-]+\.md|ARCHITECTURE\.md),\s+"
    + QUOTE
    + r"((?:(?:,\s+|\s+and\s+)"
    + QUOTE
    + r")*)"
)
MORE = re.compile(QUOTE)
DOC_MENTION = re.compile(r"(?<![\w/.-])docs/([a-z][\w-]*\.md)\b")
DOC_MENTION_IN_DOCS = re.compile(r"(?<![\w/.-])(?:docs/)?([a-z][\w-]*\.md)\b")
LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)\)")
# A line's indentation and comment marker, dropped when lines are joined to read a citation
# that runs over two of them.
LINE_PREFIX = re.compile(r"^[ \t]*(?:#+|//|/\*+|\*+|\{#|<!--)?[ \t]*")
# Case-sensitive on purpose: these words in capitals name documents outside the repository.
FOREIGN = re.compile(r"\bDESIGN\b|\bCONTRACT\b|\bINTERFACES\b|\bREAL_CLIENTS\b|\.\./shared")

# docs/api.md's headings by the titles the outside documents gave them.
API_HEADINGS = {
    "Checkpoints, integrity, rollback, fork": "Checkpoints, integrity, rollback, fork",
    "Side effects and approvals": "Side effects and approvals",
    "Summaries and folding": "Summaries and folding",
    "event canonical form": "Canonical forms and checksums",
    "Working context": "Working context — `GET /api/v1/threads/{id}/context/`",
    "Dashboard URLs": "Dashboard URLs",
    "Configuration": "Configuration",
    "`import_trace`": "Import formats",
    "Summaries": "Summaries and folding",
    "Threads": "Threads",
    "Events": "Events — `/api/v1/threads/{id}/events/`",
}
_TITLES = "|".join(re.escape(t) for t in sorted(API_HEADINGS, key=len, reverse=True))
INTEGRITY = "Integrity — `POST /api/v1/threads/{id}/verify/`, `GET /api/v1/threads/{id}/integrity/`"

Replacement = str | Callable[[re.Match[str]], str]

# Old citation → what to write instead, most specific first.
REPOINT: list[tuple[re.Pattern[str], Replacement]] = [
    (
        re.compile(rf"DESIGN {S}5, the articles in seeds/"),
        'docs/pipeline.md, "Rolling fold, verification, atomic commit"',
    ),
    # The outside design's section 11 was agent frameworks; its "Layout" is ARCHITECTURE's layers.
    (re.compile(rf"DESIGN(?:\.md)? {S}11(?!\.?\d)"), 'docs/langgraph.md, "Agent frameworks"'),
    (re.compile(r'DESIGN(?:\.md)?[:,]? "?Layout"?'), 'ARCHITECTURE.md, "Layers"'),
    (
        re.compile(r"DESIGN(?:\.md)? §(\d+(?:\.\d+)*)"),
        "the page of docs/ and the heading that hold it (docs/design.md lists the pages): "
        'docs/<page>.md, "<heading>"',
    ),
    (re.compile(r"REAL_CLIENTS(?:\.md)? §\d+(?:\.\d+)*"), 'docs/api.md, "Import formats"'),
    (
        re.compile(r"CONTRACT: checksum of"),
        'docs/api.md, "Canonical forms and checksums": checksum of',
    ),
    (
        re.compile(r"CONTRACT's integrity answer"),
        f'The integrity answer (docs/api.md, "{INTEGRITY}")',
    ),
    (
        re.compile(r"CONTRACT's working context"),
        f'The working context (docs/api.md, "{API_HEADINGS["Working context"]}")',
    ),
    (
        re.compile(r"written from CONTRACT alone"),
        'written from docs/api.md, "Canonical forms and checksums" alone',
    ),
    (
        re.compile(r"\(CONTRACT:(\s+)`seq`"),
        r'(docs/api.md, "Canonical forms and checksums":\1`seq`',
    ),
    (
        re.compile(r'schema_version 1 \(CONTRACT "Summaries"\)'),
        'schema_version 1 (docs/api.md, "Summary content (schema_version 1)")',
    ),
    (re.compile(r"\(CONTRACT(?:\.md)?\)"), '(docs/api.md, "Error shape")'),
    (
        re.compile(rf"CONTRACT(?:\.md)?[:,]?(\s+)\"?({_TITLES})\"?"),
        lambda m: f'docs/api.md, "{API_HEADINGS[m.group(2)]}"',
    ),
    (
        re.compile(r"INTERFACES: what the chain covers"),
        'docs/api.md, "Canonical forms and checksums": what the chain covers',
    ),
    (
        re.compile(r'\(INTERFACES(?: "Event dicts in the domain")?\)'),
        '(docs/event-log.md, "Event dicts in the domain")',
    ),
]


# --- files ---------------------------------------------------------------------------------


def _files(root: Path) -> Iterator[Path]:
    for name in CODE_DIRS:
        for path in sorted((root / name).rglob("*")):
            rel = path.relative_to(root)
            if SKIP_PARTS.intersection(rel.parts) or not path.is_file():
                continue
            if path.suffix in SUFFIXES or (path.suffix == "" and rel.parts[0] == "scripts"):
                yield path
    for name in ROOT_FILES:
        yield root / name
    yield from sorted((root / "docs").glob("*.md"))
    if (root / "ARCHITECTURE.md").is_file():
        yield root / "ARCHITECTURE.md"


def scanned_files(root: Path = ROOT) -> list[Path]:
    return [p for p in _files(root) if p.is_file() and p.resolve() != THIS_FILE]


def in_docs(path: Path, root: Path) -> bool:
    return path.parent == root / "docs"


def is_markdown(path: Path) -> bool:
    return path.suffix == ".md"


# --- headings and anchors ------------------------------------------------------------------


def _outside_fences(text: str) -> Iterator[tuple[int, str]]:
    fence = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
            continue
        if not fence:
            yield number, line


def headings(doc: Path) -> list[str]:
    """A Markdown file's headings as written after the `#`s, in order."""
    found = []
    for _, line in _outside_fences(doc.read_text(encoding="utf-8")):
        m = HEADING.match(line)
        if m:
            found.append(m.group(2).rstrip("#").rstrip())
    return found


def heading_text(heading: str) -> str:
    """A heading as a citation names it: without a number in front."""
    return NUMBERED.sub("", heading)


def numbers(doc: Path) -> set[str]:
    return {m.group(1) for h in headings(doc) if (m := NUMBERED.match(h))}


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, backticks and every character but letters,
    digits, `_`, `-` and spaces dropped, spaces turned into hyphens."""
    text = heading.replace("`", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(doc: Path) -> set[str]:
    """Every anchor GitHub gives the headings of `doc`; a repeated one gets -1, -2, …"""
    seen: dict[str, int] = {}
    out = set()
    for heading in headings(doc):
        base = slug(heading)
        count = seen.get(base, 0)
        out.add(base if count == 0 else f"{base}-{count}")
        seen[base] = count + 1
    return out


# --- problems ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    where: str
    found: str
    instead: str

    def __str__(self) -> str:
        return f"{self.where}: {self.found!r} → {self.instead}"


def _where(path: Path, root: Path, line: int) -> str:
    try:
        shown = path.relative_to(root)
    except ValueError:
        shown = path
    return f"{shown}:{line}"


def _joined(text: str) -> tuple[str, list[int]]:
    """`text` as one line, each line's indentation and comment marker dropped, so that a citation
    wrapped over two lines reads whole; and where each line starts in it."""
    parts = []
    starts = []
    offset = 0
    for line in text.splitlines():
        body = LINE_PREFIX.sub("", line, count=1)
        starts.append(offset)
        parts.append(body)
        offset += len(body) + 1
    return " ".join(parts), starts


def _line_at(starts: list[int], index: int) -> int:
    return max(i for i, s in enumerate(starts) if s <= index) + 1 if starts else 1


def citation_problems(path: Path, text: str, root: Path = ROOT) -> list[Problem]:
    """`docs/<page>.md, "<heading>"` citations in `text` whose page or heading does not exist,
    and mentions of docs/ pages that do not exist."""
    joined, starts = _joined(text)
    problems = []
    missing: set[int] = set()
    architecture = root / "ARCHITECTURE.md"
    for m in CITATION.finditer(joined):
        cited = root / m.group(1)
        where = _where(path, root, _line_at(starts, m.start()))
        if cited == architecture and not architecture.is_file():
            continue  # being written elsewhere: checked once it is here
        if not cited.is_file():
            problems.append(Problem(where, m.group(1), "no such page"))
            missing.add(m.start())
            continue
        held = [heading_text(h) for h in headings(cited)]
        for name in [m.group(2), *MORE.findall(m.group(3))]:
            name = " ".join(name.split())
            if name not in held:
                problems.append(
                    Problem(where, f'{m.group(1)}, "{name}"', f"{m.group(1)} has no such heading")
                )
            elif held.count(name) > 1:
                problems.append(
                    Problem(where, f'{m.group(1)}, "{name}"', "that heading is not unique there")
                )
    mentions = DOC_MENTION_IN_DOCS if in_docs(path, root) else DOC_MENTION
    for m in mentions.finditer(joined):
        if not (root / "docs" / m.group(1)).is_file() and m.start() not in missing:
            where = _where(path, root, _line_at(starts, m.start()))
            problems.append(Problem(where, m.group(0), "no such file under docs/"))
    return problems


def _prose(text: str) -> Iterator[tuple[int, str]]:
    """A Markdown file's lines outside fenced code, inline code blanked."""
    for number, line in _outside_fences(text):
        yield number, re.sub(r"`[^`]*`", lambda m: " " * len(m.group(0)), line)


def link_problems(path: Path, text: str, root: Path = ROOT) -> list[Problem]:
    """Markdown links from `path` to a file that does not exist, or to a heading its file lacks."""
    problems = []
    for number, line in _prose(text):
        for m in LINK.finditer(line):
            target = m.group(1)
            if re.match(r"[a-z][a-z+.-]*:", target):
                continue  # https:, mailto:
            file, _, anchor = target.partition("#")
            linked = (path.parent / file).resolve() if file else path
            where = _where(path, root, number)
            if linked == (root / "ARCHITECTURE.md").resolve() and not linked.exists():
                continue  # being written elsewhere: checked once it is here
            if not linked.exists():
                problems.append(Problem(where, target, "no such file"))
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                problems.append(Problem(where, target, f"{file or path.name} has no such heading"))
    return problems


def number_problems(path: Path, text: str, root: Path = ROOT) -> list[Problem]:
    """Section numbers: none outside docs/; inside docs/, only a numbered heading of the file."""
    problems = []
    lines = _prose(text) if is_markdown(path) else enumerate(text.splitlines(), 1)
    own = numbers(path) if in_docs(path, root) else set()
    for number, line in lines:
        for m in SECTION.finditer(line):
            if FOREIGN.search(line):
                continue  # test_no_foreign_documents says what to write instead
            if m.group(1) in own:
                continue
            problems.append(
                Problem(
                    _where(path, root, number),
                    m.group(0),
                    'cite the page and the heading: docs/<page>.md, "<heading>"'
                    if not in_docs(path, root)
                    else "link the heading: [Heading](page.md#heading)",
                )
            )
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
    return 'cite a page of docs/ and its heading instead: docs/<page>.md, "<heading>"'


def foreign_problems(path: Path, text: str, root: Path = ROOT) -> list[Problem]:
    """Citations in `text` of documents that are not in the repository."""
    return [
        Problem(
            _where(path, root, text.count("\n", 0, m.start()) + 1),
            m.group(0),
            suggestion(text, m.start()),
        )
        for m in FOREIGN.finditer(text)
    ]


def _report(title: str, problems: list[Problem]) -> str:
    return "\n".join([f"{title} ({len(problems)}):", *(f"  {p}" for p in problems)])


def _all(check: Callable[[Path, str, Path], list[Problem]], files: list[Path]) -> list[Problem]:
    return [p for path in files for p in check(path, path.read_text(encoding="utf-8"), ROOT)]


# --- the repository ------------------------------------------------------------------------


def test_the_scan_covers_code_and_docs() -> None:
    files = {p.relative_to(ROOT).as_posix() for p in scanned_files()}
    for expected in (
        "threads/models/events.py",
        "integrations/trace_imports/services/uploads.py",
        "sample_data/apps.py",
        "templates/threads/thread_list.html",
        "scripts/test",
        "README.md",
        "pyproject.toml",
        "docs/design.md",
        "docs/repairs.md",
    ):
        assert expected in files, f"{expected} is not scanned"


def test_doc_citations_resolve() -> None:
    problems = _all(citation_problems, scanned_files())
    if problems:
        pytest.fail(_report("citations that do not resolve", problems), pytrace=False)


def test_links_between_docs_resolve() -> None:
    pages = [p for p in scanned_files() if is_markdown(p)]
    problems = _all(link_problems, pages)
    if problems:
        pytest.fail(_report("links that do not resolve", problems), pytrace=False)


def test_no_section_numbers() -> None:
    problems = _all(number_problems, scanned_files())
    if problems:
        pytest.fail(_report("citations by section number", problems), pytrace=False)


# benchmarks.md repeats the benches' headings (one "Results" per bench): not checked.
@pytest.mark.parametrize(
    "name",
    sorted(p.name for p in (ROOT / "docs").glob("*.md") if p.name not in REPEATING_HEADINGS),
)
def test_headings_are_unique(name: str) -> None:
    texts = [heading_text(h) for h in headings(ROOT / "docs" / name)]
    repeated = sorted({t for t in texts if texts.count(t) > 1})
    assert not repeated, f"docs/{name}: headings that occur more than once: {repeated}"


def test_no_foreign_documents() -> None:
    problems = _all(foreign_problems, scanned_files())
    if problems:
        pytest.fail(
            _report("references to documents that are not in the repository", problems),
            pytrace=False,
        )


# --- the checker itself: it refuses what it must -------------------------------------------


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "design.md").write_text("# Design\n\n[Repairs](repairs.md)\n", encoding="utf-8")
    (docs / "repairs.md").write_text(
        "# Repairs\n\n## Checkpoints, rollback, fork\n\n### Rollback\n\n### Fork\n\n"
        "```\n# Not a heading\n```\n",
        encoding="utf-8",
    )
    (docs / "api.md").write_text(
        "# API\n\n### Rollback — `POST /api/v1/threads/{id}/rollback/`\n\n### Read\n\n### Read\n",
        encoding="utf-8",
    )
    (tmp_path / "threads").mkdir()
    return tmp_path


def _code(repo: Path, text: str) -> list[Problem]:
    path = repo / "threads" / "example.py"
    return [
        *citation_problems(path, text, repo),
        *number_problems(path, text, repo),
    ]


def test_checker_accepts_page_and_heading(repo: Path) -> None:
    assert not _code(repo, '# The pin (docs/repairs.md, "Rollback").\n')
    assert not _code(repo, '"""Both (docs/repairs.md, "Rollback" and "Fork")."""\n')
    assert not _code(repo, 'help_text="x (docs/repairs.md, \\"Fork\\")"\n')
    assert not _code(
        repo, '# (docs/repairs.md, "Checkpoints, rollback, fork", "Rollback" and "Fork")\n'
    )
    assert not _code(repo, '# (docs/api.md, "Rollback — `POST /api/v1/threads/{id}/rollback/`")\n')
    # Wrapped over two comment lines, or two docstring lines.
    assert not _code(repo, '# see docs/repairs.md,\n# "Checkpoints, rollback,\n# fork"\n')
    assert not _code(repo, '    """see docs/repairs.md,\n    "Rollback"."""\n')


def test_checker_refuses_a_missing_heading_or_page(repo: Path) -> None:
    (problem,) = _code(repo, '# The pin (docs/repairs.md, "Pins").\n')
    assert problem.where == "threads/example.py:1"
    assert problem.instead == "docs/repairs.md has no such heading"
    (problem,) = _code(repo, '# (docs/repairs.md, "Rollback" and\n# "Forks")\n')
    assert problem.found == 'docs/repairs.md, "Forks"'
    (problem,) = _code(repo, '# (docs/pins.md, "Rollback")\n')
    assert problem.instead == "no such page"
    # The API heading without its URL is not the heading.
    (problem,) = _code(repo, '# (docs/api.md, "Rollback")\n')
    assert problem.instead == "docs/api.md has no such heading"
    (problem,) = _code(repo, '# (docs/api.md, "Read")\n')
    assert problem.instead == "that heading is not unique there"
    (problem,) = _code(repo, '# (docs/repairs.md, "Not a heading")\n')
    assert "no such heading" in problem.instead


def test_checker_refuses_section_numbers(repo: Path) -> None:
    problems = _code(repo, f"# The pin (docs/design.md {S}6.3 and\n# {S}6.4).\n")
    assert [(p.where, p.found) for p in problems] == [
        ("threads/example.py:1", f"{S}6.3"),
        ("threads/example.py:2", f"{S}6.4"),
    ]
    page = repo / "docs" / "repairs.md"
    (problem,) = number_problems(page, f"As in {S}2.\n", repo)
    assert problem.instead.startswith("link the heading")
    numbered = repo / "docs" / "numbered.md"
    numbered.write_text(f"# N\n\n## 2. Two\n\nAs in {S}2, not {S}3.\n", encoding="utf-8")
    (problem,) = number_problems(numbered, numbered.read_text(encoding="utf-8"), repo)
    assert problem.found == f"{S}3"


def test_checker_reads_architecture_only_once_it_exists(repo: Path) -> None:
    citation = '# (ARCHITECTURE.md, "Layers")\n'
    link = "[Layers](../ARCHITECTURE.md#layers)\n"
    page = repo / "docs" / "repairs.md"
    assert not _code(repo, citation)
    assert not link_problems(page, link, repo)
    (repo / "ARCHITECTURE.md").write_text("# Architecture\n\n## Modules\n", encoding="utf-8")
    (problem,) = _code(repo, citation)
    assert problem.instead == "ARCHITECTURE.md has no such heading"
    (problem,) = link_problems(page, link, repo)
    assert problem.found == "../ARCHITECTURE.md#layers"
    (repo / "ARCHITECTURE.md").write_text("# Architecture\n\n## Layers\n", encoding="utf-8")
    assert not _code(repo, citation)
    assert not link_problems(page, link, repo)


def test_checker_follows_links(repo: Path) -> None:
    page = repo / "docs" / "api.md"
    assert not link_problems(page, "See [Rollback](repairs.md#rollback).\n", repo)
    assert not link_problems(page, "[Read](#read) or [the other](#read-1).\n", repo)
    assert not link_problems(
        page, "[Rollback](#rollback--post-apiv1threadsidrollback) [p](repairs.md)\n", repo
    )
    assert not link_problems(page, "`[not a link](nowhere.md)` [web](https://example.org)\n", repo)
    found = [
        (p.found, p.instead)
        for p in link_problems(
            page, "[a](repairs.md#pins) [b](pins.md#rollback) [c](#nope)\n", repo
        )
    ]
    assert found == [
        ("repairs.md#pins", "repairs.md has no such heading"),
        ("pins.md#rollback", "no such file"),
        ("#nope", "api.md has no such heading"),
    ]


def test_anchors_are_githubs() -> None:
    assert slug("Rollback — `POST /api/v1/threads/{id}/rollback/`") == (
        "rollback--post-apiv1threadsidrollback"
    )
    assert slug("Append-only, enforced by the database") == "append-only-enforced-by-the-database"
    assert slug("Summary content (schema_version 1)") == "summary-content-schema_version-1"


def test_foreign_documents_are_refused() -> None:
    path = ROOT / "threads" / "example.py"
    (problem,) = foreign_problems(path, f"# see DESIGN {S}11 for the frameworks\n")
    assert problem.instead == (
        f"write 'docs/langgraph.md, \"Agent frameworks\"' instead of 'DESIGN {S}11'"
    )
    (problem,) = foreign_problems(path, "# (CONTRACT Working context)\n")
    assert API_HEADINGS["Working context"] in problem.instead
