"""``rlperf study thesis``: the thesis's experiments, scaled to the machine at hand, to a report.

Every experiment matrix of the thesis is a shipped sweep; the study runs them one after
the other, each into its own sweep directory, and ends in one report:

=================  ==========================================  =============================
part               sweep                                       the thesis
=================  ==========================================  =============================
training           thesis-training                             Table 3.2, Figs 4.1-4.9
cpu                thesis-cpu                                  Table 3.3, Figs 4.10-4.11
cpu-scaled         thesis-cpu-scaled (written for the machine) Table 3.3 on this machine's
                                                               CPUs (sweep/thesis_cpu_scaled)
workers            thesis-workers                              the worker trends of Figs
                                                               4.2, 4.3 and 4.8 on the CPU
models             thesis-models                               Fig 3.3a (model selection)
inference          thesis-inference                            Table 3.4, Fig 4.12
backends           thesis-backends                             Table 4.1
=================  ==========================================  =============================

Points whose hardware is absent (GPUs, CPUs 0-8, an Edge TPU) are planned, checked and
recorded as skipped with the reason, so the report lists them beside what ran. Fig 3.3b
(``thesis-models-long``: 11000 iterations per model) is not part of the study: it is days
of training on any machine the study is meant for.

**Budgets.** The thesis's own budgets take days on a small machine (one iteration of its PPO
on model 3 is about a quarter of an hour on 2 vCPUs), so the study scales them
(:func:`study_budget`): the iteration counts grow with the machine's cores from a 2-vCPU
baseline of about 20 minutes in all, and without a GPU the SGD epochs per iteration are 3
instead of the thesis's 30 (the learn phase is the same minibatch pass repeated, so its time
scales with the epochs; the report states the overrides under every figure). Every override
is the command line of the sweep it belongs to, so each part can be rerun alone at any
budget: ``rlperf sweep thesis-training -o DIR stop.iterations=20``.

Like every sweep, running the study again resumes: completed points are kept.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_REPORT = Path("reports") / "thesis"
DEFAULT_RUNS = Path("runs") / "study-thesis"


@dataclass(frozen=True)
class StudyBudget:
    """How far each part of the study goes (the thesis's values in parentheses)."""

    train_iterations: int
    """Iterations per training point, the first one warm-up (20, 3 of them warm-up)."""
    update_epochs: int
    """SGD epochs per iteration (30)."""
    model_iterations: int
    """Iterations per model in the model selection (2000)."""
    infer_episodes: int
    """Greedy games per inference point (10)."""
    backend_calls: int
    """Timed calls per backend point (2000)."""
    extra: dict[str, list[tuple[str, Any]]] = field(default_factory=dict)
    """Further overrides by part (tests use it for tiny runs)."""

    def overrides(self, part: str) -> list[tuple[str, Any]]:
        """The command-line overrides of ``part``'s sweep."""
        training = [
            ("stop.iterations", self.train_iterations),
            ("telemetry.warmup_iterations", 1),
            ("ppo.update_epochs", self.update_epochs),
        ]
        by_part: dict[str, list[tuple[str, Any]]] = {
            "training": training,
            "cpu": training,
            "cpu-scaled": training,
            "workers": training,
            "models": [
                ("stop.iterations", self.model_iterations),
                ("telemetry.warmup_iterations", 0),
                ("ppo.update_epochs", self.update_epochs),
                ("checkpoint.every", 0),
                ("checkpoint.every_s", 0),  # a checkpoint would land in a timed iteration
            ],
            "inference": [("infer.episodes", self.infer_episodes)],
            "backends": [("infer.steps", self.backend_calls)],
        }
        return by_part[part] + self.extra.get(part, [])


PARTS: dict[str, str] = {
    "training": "thesis-training",
    "cpu": "thesis-cpu",
    "cpu-scaled": "thesis-cpu-scaled",
    "workers": "thesis-workers",
    "models": "thesis-models",
    "inference": "thesis-inference",
    "backends": "thesis-backends",
}
"""Study part -> the shipped sweep it runs, in the order they run."""


def study_budget(cores: int, gpus: int) -> StudyBudget:
    """The budget for a machine with ``cores`` CPUs and ``gpus`` GPUs: the 2-vCPU baseline
    (about 20 minutes; the issue's bound is 45), iteration counts growing with the cores,
    never above the thesis's; with a GPU the thesis's 30 epochs."""
    scale = max(1, cores // 2)
    return StudyBudget(
        train_iterations=min(20, 2 + scale),
        update_epochs=30 if gpus else 3,
        model_iterations=min(2000, scale),
        infer_episodes=min(10, 2 + scale),
        backend_calls=min(2000, 1000 * scale),
    )


def run_thesis(
    report_dir: Path = DEFAULT_REPORT,
    runs_dir: Path = DEFAULT_RUNS,
    *,
    parts: Sequence[str] = tuple(PARTS),
    budget: StudyBudget | None = None,
    browser_check: bool = True,
    say: Callable[[str], None] = print,
) -> int:
    """The thesis study; returns the exit code (0 when every point completed or was skipped
    and the report was written, 1 when a point failed: the report says which and why)."""
    from rlperf.report.browser import check_in_browser
    from rlperf.report.build import build_report
    from rlperf.sweep.machine import Machine
    from rlperf.sweep.plan import plan_points
    from rlperf.sweep.run import run_sweep
    from rlperf.sweep.spec import load_spec
    from rlperf.sweep.thesis_cpu_scaled import NAME, write_scaled_cpu_spec

    machine = Machine.detect()
    budget = budget or study_budget(machine.cores, machine.gpus)
    failed, dirs, commands = 0, [], []
    for part in parts:
        sweep = PARTS[part]
        if sweep == NAME:  # not shipped: written for this machine's CPUs
            sweep = str(write_scaled_cpu_spec(machine, runs_dir))
        spec, overrides = load_spec(sweep), budget.overrides(part)
        out = runs_dir / part
        planned = plan_points(spec, overrides, machine)
        runnable = sum(p.skip is None for p in planned)
        say(
            f"study thesis: {part} ({sweep}: {runnable} of {len(planned)} points run here) -> "
            f"{out} ({machine.describe()})"
        )
        result = run_sweep(spec, planned, out, overrides=overrides, say=say)
        if result.interrupted:
            return result.exit_code
        failed += result.count("failed")
        dirs.append(out)
        commands.append(
            " ".join(["rlperf sweep", sweep, "-o", str(out), *(f"{k}={v}" for k, v in overrides)])
        )
    say("study thesis: report")
    result = build_report(
        dirs,
        report_dir,
        title="rlperf thesis study: the thesis's experiments on this machine",
        command="rlperf study thesis  # = " + " ; ".join(commands),
    )
    code = 1 if failed else 0
    if browser_check:
        code = max(code, check_in_browser(result.index, say))
    if failed:
        say(f"study thesis: {failed} point(s) failed; the report shows which and why")
    print(f"report: {result.index}", flush=True)
    return code
