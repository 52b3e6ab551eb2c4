"""ARCHITECTURE.md names every module of the apps, each under the heading of its package, so
the map cannot fall behind the territory: a module added, moved or renamed without the map
fails here, naming it. No database: plain file reads."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAP = ROOT / "ARCHITECTURE.md"
APPS = ("ctxadmin", "threads", "integrations", "sample_data")


def sections(text: str) -> dict[str, str]:
    """Each `### heading` of the map with the text under it."""
    parts = re.split(r"^### (.+)$", text, flags=re.MULTILINE)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def app_modules() -> list[Path]:
    return sorted(
        path.relative_to(ROOT)
        for app in APPS
        for path in (ROOT / app).rglob("*.py")
        if "migrations" not in path.parts and path.name != "__init__.py"
    )


def unnamed(text: str, modules: list[Path]) -> list[str]:
    """The modules no section of their package names (as `name.py` or `dir/name.py`)."""
    found = sections(text)
    missing = []
    for module in modules:
        homes: list[str] = []
        # The section of the most specific folder a heading names (`threads/domain` before
        # `threads`).
        for folder in (str(p) for p in module.parents if str(p) != "."):
            named = re.compile(rf"(?<![\w/]){re.escape(folder)}(?![\w/])")
            homes = [body for heading, body in found.items() if named.search(heading)]
            if homes:
                break
        name = re.compile(rf"[`/]{re.escape(module.name)}`")
        if not any(name.search(body) for body in homes):
            missing.append(str(module))
    return missing


def test_the_map_names_every_module() -> None:
    missing = unnamed(MAP.read_text(), app_modules())
    assert missing == [], "ARCHITECTURE.md does not name:\n" + "\n".join(missing)


def test_the_check_sees_a_module_left_out() -> None:
    text = "### threads/domain — pure rules\n`canonical.py` canonical JSON\n"
    modules = [Path("threads/domain/canonical.py"), Path("threads/domain/chain.py")]
    assert unnamed(text, modules) == ["threads/domain/chain.py"]
    # Named under another package's heading does not count.
    text += "### threads/models\n`chain.py`\n"
    assert unnamed(text, modules) == ["threads/domain/chain.py"]
