"""The thesis figures drawn from fake runs (see tests/helpers/report_fakes.py): memory per configuration (Figure
4.3), the GPU runs' phases on their own (4.7), and per-model panels with the models compared
(4.4-4.6); each figure only where the runs call for it."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlperf.report.analysis import accelerator_runs, configuration_name, model_comparison
from rlperf.report.build import build_report
from rlperf.report.plots import memory_figure, phases_by_model_figure
from rlperf.report.summary import RunSummary, summarise
from tests.helpers.report_fakes import fake_run, write_run

PHASES = {"sample": 100.0, "load": 5.0, "learn": 800.0, "update": 2.0, "other": 55.0}
GPU = ("cuda:0", "cuda:0")
MODELS = ("thesis-1", "thesis-3", "thesis-4")


def run(label: str, *, model: str = "nature", gpu: bool = False, learn: float = 800.0):  # noqa: ANN201
    return fake_run(
        label,
        sps=[1.0, 100.0, 100.0],
        phases={**PHASES, "learn": learn},
        model=model,
        devices=GPU if gpu else ("cpu", "cpu"),
        gpu_mem_mb={0: 2048.0} if gpu else None,
    )


def thesis_training() -> list:  # noqa: ANN001
    """thesis-training's shape: Exp1 on the CPU, Exp2 on a GPU, for three models (model 4
    without Exp2), learn slower with each model."""
    runs = []
    for k, model in enumerate(MODELS):
        runs.append(run(f"model={model}__Exp1-cpu", model=model, learn=800.0 * (k + 1)))
        if model != "thesis-4":
            runs.append(run(f"model={model}__Exp2-gpu", model=model, gpu=True, learn=40.0))
    return runs


def summaries(runs: list) -> list[RunSummary]:  # noqa: ANN001
    return [summarise(r) for r in runs]


def test_configuration_name_leaves_the_model_out() -> None:
    def name(label: str) -> str:
        return configuration_name(summarise(run(label, model="thesis-3")))

    assert name("model=thesis-3__Exp1-no_gpus_8_workers") == "Exp1-no_gpus_8_workers"
    assert name("thesis-training/model=thesis-3__Exp2-gpu0") == "thesis-training/Exp2-gpu0"
    assert name("model=thesis-3") == "default"  # thesis-models: one configuration per model
    assert name("ALE-Pong-v5__ppo__inproc") == "ALE-Pong-v5__ppo__inproc"  # no model part


def test_gpu_runs_are_drawn_apart_only_beside_cpu_only_runs() -> None:
    mixed = summaries([run("cpu"), run("gpu", gpu=True), run("gpu-actors", gpu=True)])
    mixed[2].learner_device = "cpu"  # actors on the GPU alone: not CPU-only either
    assert [s.label for s in accelerator_runs(mixed)] == ["gpu", "gpu-actors"]
    assert accelerator_runs(summaries([run("a"), run("b")])) == []
    assert accelerator_runs(summaries([run("a", gpu=True), run("b", gpu=True)])) == []


def test_gpu_memory_panel_marks_runs_without_gpu_data() -> None:
    fig = memory_figure(summaries([run("on-gpu", gpu=True), run("cpu-only")]))
    fig.canvas.draw()  # tick labels are set when drawn
    ram, gpu = fig.axes
    assert [t.get_text() for t in ram.get_yticklabels()] == ["on-gpu", "cpu-only"]  # shared
    assert [p.get_width() for p in gpu.patches] == [2048.0, 0.0]
    marks = [t for t in gpu.texts if t.get_text() == "no GPU"]
    assert len(marks) == 1 and marks[0].get_position()[1] == 1  # the second row: cpu-only
    assert [p.get_width() for p in ram.patches] == [1500.0, 1500.0]  # fakes' resident MiB


def test_per_model_panels_and_the_comparison() -> None:
    comparison = model_comparison(summaries(thesis_training()))
    assert comparison is not None and comparison.common == ["Exp1-cpu"]
    fig = phases_by_model_figure(comparison)
    fig.canvas.draw()
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible() and ax.axison]
    assert titles[:3] == ["(a) thesis-1", "(b) thesis-3", "(c) thesis-4"]
    assert titles[3].startswith("(d) models compared: mean over the 1 configurations")
    first, *_, compared = [ax for ax in fig.axes if ax.axison]
    assert [t.get_text() for t in first.get_yticklabels()] == ["Exp1-cpu", "Exp2-gpu"]
    # (d) compares Exp1 alone, the one configuration all three ran: learn 800, 1600, 2400 ms
    (learn,) = [c for c in compared.containers if c.get_label() == "learn"]
    assert [bar.get_width() for bar in learn] == [800.0, 1600.0, 2400.0]
    totals = {m: sum(comparison.mean_phase_ms(m).values()) for m in MODELS}
    assert totals["thesis-4"] - totals["thesis-1"] == pytest.approx(1600.0)
    assert model_comparison(summaries([run("a"), run("b")])) is None  # one model: no panels


def figures_of(runs: list, tmp_path: Path) -> tuple[set[str], str]:  # noqa: ANN001
    """(the PNG files, the page) of a report on ``runs`` written as run directories."""
    for r in runs:
        write_run(r, tmp_path / "runs")
    out = tmp_path / "report"
    result = build_report([tmp_path / "runs"], out)
    for png in result.figures:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return {p.name for p in result.figures}, (out / "index.html").read_text()


def under(page: str, figure: str) -> str:
    """The caption and provenance under ``figure`` on the page."""
    start = page.index(f'<img src="{figure}"')
    return page[start : page.index("</figure>", start)]


def test_report_of_cpu_and_gpu_runs_of_three_models(tmp_path: Path) -> None:
    names, page = figures_of(thesis_training(), tmp_path)
    assert {"memory.png", "phase_times_gpu.png", "phase_times_by_model.png"} <= names
    gpu_only = under(page, "phase_times_gpu.png")
    assert "Figure 4.7" in gpu_only and "Fake CPU" in gpu_only  # the machine, as everywhere
    assert "model=thesis-1__Exp2-gpu" in gpu_only and "model=thesis-3__Exp2-gpu" in gpu_only
    assert "Exp1-cpu" not in gpu_only  # the CPU-only runs' commands are not under it
    assert "Figures 4.4-4.6" in under(page, "phase_times_by_model.png")
    assert "Figure 4.3" in under(page, "memory.png")


def test_report_of_one_model_on_the_cpu_draws_neither(tmp_path: Path) -> None:
    names, _ = figures_of([run("one"), run("two", learn=400.0)], tmp_path)
    assert "memory.png" in names  # with "no GPU" for both (test_gpu_memory_panel_...)
    assert not {"phase_times_gpu.png", "phase_times_by_model.png"} & names
