"""The layering (ARCHITECTURE.md, "Layers") holds, and nothing dodges it.

import-linter (its contract is in pyproject.toml, run by ./scripts/test) checks which layer
imports which. These tests add what it cannot see: an import of the project's own modules
tucked inside a function body, which keeps a circle out of sight at import time.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("threads", "integrations", "sample_data", "ctxadmin")
# Django's app registry calls ready() once every app is loaded: importing there is the
# documented way to wire a module that needs the models, not a dodge.
ALLOWED = {
    ("threads/apps.py", "ready"),
    ("integrations/langgraph_checkpointer/apps.py", "ready"),
    ("integrations/trace_imports/apps.py", "ready"),
}


def _hidden_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[str] = []
    rel = str(path.relative_to(ROOT))

    def visit(node: ast.AST, function: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            name = function
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = child.name
            if function is not None and (rel, function) not in ALLOWED:
                modules: list[str] = []
                if isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                    modules = [child.module]
                elif isinstance(child, ast.Import):
                    modules = [alias.name for alias in child.names]
                for module in modules:
                    if module.split(".")[0] in PACKAGES:
                        line = getattr(child, "lineno", 0)
                        found.append(f"{rel}:{line} imports {module} inside {function}()")
            visit(child, name)

    visit(tree, None)
    return found


def test_no_project_import_hides_inside_a_function() -> None:
    hidden = [
        line
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if "migrations" not in path.parts
        for line in _hidden_imports(path)
    ]
    assert hidden == [], "\n".join(hidden)


def test_the_checker_sees_a_hidden_import(tmp_path: Path) -> None:
    # The checker itself must be able to fail.
    module = ROOT / "threads" / "_probe_hidden_import.py"
    module.write_text("def f():\n    from threads.tasks import fold_thread_task\n")
    try:
        assert _hidden_imports(module) == [
            "threads/_probe_hidden_import.py:2 imports threads.tasks inside f()"
        ]
    finally:
        module.unlink()


def test_import_linter_contract_holds() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run(
        [str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
