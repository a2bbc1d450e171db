"""The import floors of docs/architecture.md, enforced by import-linter's contracts in
pyproject.toml: no module imports one on a floor above it, runners and algorithms never
import each other, and nothing imports the command line."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_import_floors_hold() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", "from importlinter.cli import lint_imports_command as c; c()"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout
