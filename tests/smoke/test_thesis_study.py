"""``rlperf study thesis`` end to end on a tiny budget: a real sweep (RLlib-style workers on a
local Ray cluster), skipped points with their reasons, one report."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from rlperf.cli import main
from rlperf.studies.thesis_study import PARTS, StudyBudget, run_thesis, study_budget

TINY = StudyBudget(
    train_iterations=2,
    update_epochs=1,
    model_iterations=1,
    infer_episodes=1,
    backend_calls=50,
    extra={
        # two workers with 16 steps each: every training point is seconds, whatever its model
        "training": [("workers", 2), ("ppo.num_steps", 16), ("ppo.minibatch_size", 16)],
    },
)


def _ledger(sweep_dir: Path) -> dict[str, dict]:
    latest: dict[str, dict] = {}
    for line in (sweep_dir / "sweep.jsonl").read_text().splitlines():
        record = json.loads(line)
        latest[record["point"]] = record
    return latest


def test_the_thesis_study_runs_what_this_machine_allows_into_one_report(
    tmp_path: Path, two_nodes
) -> None:
    # The points join the Ray cluster the Ray tests share (runner.ray_address): a private
    # local Ray per point took 5 of each point's 8 s; a run that starts its own is tested in
    # tests/cuda/test_rllib_workers_cuda.py's CPU case.
    training = [*TINY.extra["training"], ("runner.ray_address", two_nodes.address)]
    lines: list[str] = []
    code = run_thesis(
        tmp_path / "report",
        tmp_path / "runs",
        parts=("training",),  # the inference sweeps' planning and points are tested elsewhere
        budget=dataclasses.replace(TINY, extra={"training": training}),
        browser_check=False,
        say=lines.append,
    )
    assert code == 0, "\n".join(lines)
    training = _ledger(tmp_path / "runs" / "training")
    assert len(training) == 30  # Table 3.2: ten experiments for each of models 1, 3 and 4
    ran = {p for p, r in training.items() if r["status"] == "completed"}
    assert ran == {f"model=thesis-{m}__Exp1-no_gpus_8_workers" for m in (1, 3, 4)}
    skipped = [r for r in training.values() if r["status"] == "skipped"]
    assert len(skipped) == 27 and all(r["reason"].startswith("needs GPU") for r in skipped)
    for model in (1, 3, 4):
        run = (
            tmp_path
            / "runs"
            / "training"
            / "runs"
            / f"model=thesis-{model}__Exp1-no_gpus_8_workers"
        )
        rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        assert len(rows) == 2 and all(r["update_time_ms"] > 0 for r in rows)
    page = (tmp_path / "report" / "index.html").read_text()
    # what ran and what could not, with why, in one report; the budget's overrides under it
    assert "Exp1-no_gpus_8_workers" in page and "needs GPU" in page
    assert "ppo.update_epochs=1" in page


def test_the_budget_follows_the_machine_and_never_exceeds_the_thesis() -> None:
    small, big, gpu = study_budget(2, 0), study_budget(64, 0), study_budget(16, 1)
    assert (small.train_iterations, small.update_epochs) == (3, 3)
    assert big.train_iterations == 20 and big.backend_calls == 2000 and big.infer_episodes == 10
    assert gpu.update_epochs == 30  # the thesis's epochs where a GPU learns
    assert small.overrides("training")[0] == ("stop.iterations", 3)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--parts", "training,gpu"], "unknown part(s) gpu; parts: " + ", ".join(PARTS)),
        (["--budget-s", "5"], "--budget-s is the quick study's"),
    ],
)
def test_bad_study_options_are_one_line_errors(argv, message, capsys) -> None:
    assert main(["study", "thesis", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
