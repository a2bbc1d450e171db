"""Shared helpers for tests that run the real CLI."""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

# Tests never show a live display and never inherit a thread setting from the caller.
os.environ.setdefault("CI", "1")
# precision=auto caches its timings; tests keep theirs out of the user's home.
os.environ.setdefault("RLPERF_CACHE_DIR", tempfile.mkdtemp(prefix="rlperf-test-cache-"))
# The suite runs more processes than there are cores (two test workers, each with training
# processes and their env workers). Torch's OpenMP threads busy-wait for work by default,
# and on an oversubscribed machine the spinning threads take the cores from the ones with
# work: two PPO runs with env worker processes side by side on 2 vCPUs took 561 s, and
# 29 s with waiting threads that sleep (docs/benchmarks.md). Set before torch is imported
# (here and, inherited, in every process a test starts).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


TESTS = Path(__file__).resolve().parent
SHARED_DIRS = frozenset({"deploy", "report", "ray"})
"""Folders whose modules share fixtures wider than one module (the deploy exports, the
report's sweep, Ray's local cluster)."""


GROUP_SECONDS = TESTS / "group_seconds.json"
"""Seconds each group took in a recorded run (``pytest --record-group-seconds``): the suite
starts the longest groups first, so no long group is left to run alone at the end."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--record-group-seconds",
        action="store_true",
        help=f"write each test group's seconds to {GROUP_SECONDS.name} (the order of make test)",
    )


def _group(path: Path) -> str:
    """The group of the test module at ``path`` (relative to tests/, or absolute)."""
    parts = (path.relative_to(TESTS) if path.is_absolute() else path).parts
    return parts[0] if parts[0] in SHARED_DIRS else "/".join(parts)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Groups for ``pytest -n N --dist loadgroup`` (make test): the modules of a SHARED_DIRS
    folder stay on one worker, and every other module is a group of its own, so no fixture
    is built twice. First among the hooks: xdist's own one reads the groups.

    The longest groups of the recorded run come first (stable: the others keep pytest's
    order); make test keeps that order (``--no-loadscope-reorder``) instead of xdist's,
    which starts the groups with the most tests first."""
    seconds = json.loads(GROUP_SECONDS.read_text()) if GROUP_SECONDS.exists() else {}
    items.sort(key=lambda item: -seconds.get(_group(Path(item.path)), 0.0))
    for item in items:
        item.add_marker(pytest.mark.xdist_group(_group(Path(item.path))))


_seconds_by_group: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Sum each group's setup, call and teardown (on xdist's controller: every worker's)."""
    path, _, rest = report.nodeid.partition("::")
    group = rest.rpartition("@")[2] if "@" in rest else _group(Path(*Path(path).parts[1:]))
    _seconds_by_group[group] = _seconds_by_group.get(group, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    worker = hasattr(session.config, "workerinput")
    if session.config.getoption("--record-group-seconds") and not worker and _seconds_by_group:
        ranked = sorted(_seconds_by_group.items(), key=lambda kv: -kv[1])
        GROUP_SECONDS.write_text(json.dumps({k: round(v, 1) for k, v in ranked}, indent=1) + "\n")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """Stop when ``--dist loadgroup`` is not grouping. It fails silently (pytest 9.2's
    structured test ids and pytest-xdist 3.8: every group spread over all workers, the shared
    fixtures built on each) and the suite then takes minutes longer for no visible reason."""
    if node.config.getvalue("dist") == "loadgroup" and ids and not any("@" in i for i in ids):
        raise pytest.UsageError(
            "pytest-xdist's --dist loadgroup did not group the tests (their ids lack the @group "
            "suffix): install the pytest and pytest-xdist versions that pyproject.toml allows"
        )


def shm_segments_of(pids: set[int]) -> set[str]:
    """The /dev/shm entries that processes ``pids`` created and left: rlperf's segments and
    torch's carry their creator's pid (``rlperf_<pid>_...``, ``torch_<pid>_...``), so tests
    running beside each other never count each other's."""
    prefixes = tuple(f"{kind}_{pid}_" for kind in ("rlperf", "torch") for pid in pids)
    return {p.name for p in Path("/dev/shm").iterdir() if p.name.startswith(prefixes)}


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


def start_training(*args: str) -> subprocess.Popen:
    """Start ``rlperf train ARGS`` in the background, its output captured as text."""
    return subprocess.Popen(
        [sys.executable, "-m", "rlperf", "train", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_iterations(
    proc: subprocess.Popen, run_dir: Path, count: int, timeout: float = 60
) -> None:
    """Block until ``run_dir/metrics.jsonl`` holds ``count`` rows (the process must stay alive)."""
    metrics = run_dir / "metrics.jsonl"
    deadline = time.monotonic() + timeout
    while not (metrics.exists() and metrics.read_text().count("\n") >= count):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)


@pytest.fixture
def runs_root(tmp_path: Path) -> Path:
    return tmp_path / "runs"
