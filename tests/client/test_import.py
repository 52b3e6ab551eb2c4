"""The package stands alone: importing it never imports Django (or anything of the server)."""

from __future__ import annotations

import subprocess
import sys


def test_import_does_not_import_django() -> None:
    code = (
        "import sys, ctxadmin_client\n"
        "print('django' in sys.modules, any(m.startswith('threads') for m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.split() == ["False", "False"]
