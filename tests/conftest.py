"""Shared helpers for tests that run the real CLI."""

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
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
KINDS = ("unit", "contract", "smoke", "learning", "fault", "determinism", "cuda")
"""The one sorting of the tests, a folder each (and a marker: ``pytest -m unit``):
unit: one piece of rlperf in this process, fakes named as fakes; contract: parts together
through their interfaces (algorithms x runners, exports x backends), without the CLI; smoke:
the CLI end to end on tiny budgets, as a user runs it; learning: a reward threshold with a
fixed seed; fault: kills, crashes, bad input, bad disks; determinism: replays and resumes
give the same numbers; cuda: needs a GPU (skips without). ``helpers`` and ``fixtures`` hold
what tests share."""

pytest_plugins = ["tests.fixtures.deploy_policy", "tests.fixtures.ray_cluster",
                  "tests.fixtures.report_sweeps"]  # fmt: skip

SHARED_FIXTURES = {"pong_run": "deploy", "two_nodes": "ray", "fixture_sweeps": "report"}
"""Fixtures that many modules share (the deploy exports, Ray's local cluster, the report's
sweeps), by the group whose tests stay on one worker so that each is built once."""

needs_export_extra = pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("onnxruntime", "ai_edge_litert")),
    reason="needs the export extra (ONNX Runtime, LiteRT)",
)
"""The deploy tests' mark: exports, quantization and inference need rlperf[export]."""


GROUP_SECONDS = TESTS / "group_seconds.json"
"""Seconds each group took in a recorded run (``pytest --record-group-seconds``): the suite
starts the longest groups first, so no long group is left to run alone at the end."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--record-group-seconds",
        action="store_true",
        help=f"write each test group's seconds to {GROUP_SECONDS.name} (the order of make test)",
    )


def pytest_configure(config: pytest.Config) -> None:
    for kind in KINDS:
        config.addinivalue_line("markers", f"{kind}: the tests under tests/{kind}/")


def _module_group(path: Path) -> str:
    """The group of a test module that shares no fixture: its path relative to tests/."""
    return "/".join((path.relative_to(TESTS) if path.is_absolute() else path).parts)


def _group(item: pytest.Item) -> str:
    shared = [group for name, group in SHARED_FIXTURES.items() if name in item.fixturenames]
    return shared[0] if shared else _module_group(Path(item.path))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Kinds and groups. Each test gets its folder's kind as a marker. Groups are for
    ``pytest -n N --dist loadgroup`` (make test): the tests that use a
    :data:`SHARED_FIXTURES` fixture stay on one worker, and every other module is a group
    of its own, so no fixture is built twice. First among the hooks: xdist's own one reads
    the groups.

    The longest groups of the recorded run come first (stable: the others keep pytest's
    order); make test keeps that order (``--no-loadscope-reorder``) instead of xdist's,
    which starts the groups with the most tests first."""
    seconds = json.loads(GROUP_SECONDS.read_text()) if GROUP_SECONDS.exists() else {}
    groups = {item.nodeid: _group(item) for item in items}
    items.sort(key=lambda item: -seconds.get(groups[item.nodeid], 0.0))
    for item in items:
        kind = Path(item.path).relative_to(TESTS).parts[0]
        if kind in KINDS:
            item.add_marker(getattr(pytest.mark, kind))
        item.add_marker(pytest.mark.xdist_group(groups[item.nodeid]))


_seconds_by_group: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Sum each group's setup, call and teardown (on xdist's controller: every worker's)."""
    path, _, rest = report.nodeid.partition("::")
    group = rest.rpartition("@")[2] if "@" in rest else _module_group(Path(*Path(path).parts[1:]))
    _seconds_by_group[group] = _seconds_by_group.get(group, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    worker = hasattr(session.config, "workerinput")
    if session.config.getoption("--record-group-seconds") and not worker and _seconds_by_group:
        ranked = sorted(_seconds_by_group.items(), key=lambda kv: -kv[1])
        GROUP_SECONDS.write_text(json.dumps({k: round(v, 1) for k, v in ranked}, indent=1) + "\n")


@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    """Tiny networks: one intra-op thread avoids contention on a busy machine (it is many
    times faster there), and keeps the numbers independent of the core count."""
    import torch  # here: OMP_WAIT_POLICY above must be set before torch's first import

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


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
