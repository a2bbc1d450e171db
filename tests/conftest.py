"""Shared helpers for tests that run the real CLI."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Tests never show a live display and never inherit a thread setting from the caller.
os.environ.setdefault("CI", "1")


def read_metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def rlperf_subprocess(*args: str, timeout: float = 300, **kwargs) -> subprocess.CompletedProcess:
    """Run the CLI in a fresh Python process (what a user's shell does)."""
    return subprocess.run(
        [sys.executable, "-m", "rlperf", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        **kwargs,
    )


@pytest.fixture
def runs_root(tmp_path: Path) -> Path:
    return tmp_path / "runs"
