"""rlperf shortens libgomp's spin before torch loads it, and leaves a chosen one alone."""

import os
import subprocess
import sys

import pytest

from rlperf.core.openmp_spin import MARK_VAR, SPIN_COUNT, SPIN_VAR, WAIT_POLICY_VAR

# What a fresh interpreter sees after `import rlperf`: the variable and who set it.
PROBE = (
    "import os, sys\n"
    "{before}\n"
    "import rlperf\n"
    "import rlperf.core.openmp_spin as spin\n"
    "print(os.environ.get('GOMP_SPINCOUNT'), spin.spin_set_by)\n"
)


def probe(env_extra: dict[str, str], before: str = "") -> list[str]:
    env = {k: v for k, v in os.environ.items() if k not in (SPIN_VAR, WAIT_POLICY_VAR, MARK_VAR)}
    env.update(env_extra)
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(before=before)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.split()


def test_rlperf_sets_its_spin_count_before_torch_loads() -> None:
    assert probe({}) == [str(SPIN_COUNT), "rlperf"]


@pytest.mark.parametrize(
    ("env_extra", "expected"),
    [
        ({SPIN_VAR: "500"}, ["500", "environment"]),
        ({WAIT_POLICY_VAR: "PASSIVE"}, ["None", "environment"]),
        # a process that rlperf started (a bench's run) inherits rlperf's spin and says so
        ({SPIN_VAR: "10000", MARK_VAR: "10000"}, ["10000", "rlperf"]),
        ({SPIN_VAR: "500", MARK_VAR: "10000"}, ["500", "environment"]),
    ],
)
def test_a_spin_or_wait_policy_already_set_is_kept_and_named(
    env_extra: dict[str, str], expected: list[str]
) -> None:
    assert probe(env_extra) == expected


def test_too_late_once_torch_is_loaded() -> None:
    # libgomp has read the environment already: setting the variable would only mislead
    # the manifest, which then says that libgomp's default holds.
    assert probe({}, before="import torch") == ["None", "None"]


def test_the_manifest_threads_record_the_spin() -> None:
    from rlperf.core import openmp_spin
    from rlperf.telemetry.system import thread_env

    threads = thread_env()
    assert threads[SPIN_VAR] == os.environ.get(SPIN_VAR)
    assert threads[WAIT_POLICY_VAR] == os.environ.get(WAIT_POLICY_VAR)
    # the suite sets OMP_WAIT_POLICY before anything imports rlperf (tests/conftest.py)
    assert threads["openmp_spin_set_by"] == openmp_spin.spin_set_by == "environment"


def test_the_doctor_says_who_set_the_spin() -> None:
    from rlperf.telemetry.doctor import format_doctor

    def spin_line(set_by: str | None) -> str:
        threads = {SPIN_VAR: "10000", "openmp_spin_set_by": set_by}
        text = format_doctor({"threads": threads})
        return next(line for line in text.splitlines() if SPIN_VAR in line)

    assert spin_line("rlperf").split()[1:] == ["10000", "(set", "by", "rlperf)"]
    assert spin_line("environment").split()[1:] == ["10000"]
