"""``rlperf report`` on real fixture sweeps: every figure and table, provenance, warm-up
left out, and the page checked in headless Chromium."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from rlperf.cli import main
from rlperf.report.browser import check_page, find_chromium
from rlperf.report.load import collect
from rlperf.report.summary import summarise
from tests.conftest import read_metrics

FIGURES = [
    "phase_times.png",
    "phase_breakdown.png",
    "utilisation.png",
    "memory.png",
    "scaling.png",
    "learning_curves.png",
    "inference_latency.png",
]
TABLES = [
    "summary",
    "sweep_status",
    "phases",
    "resources",
    "scaling",
    "speedup",
    "time_to_target",
    "inference_latency",
    "inference_fidelity",
    "runs",
]


@pytest.fixture(scope="module")
def report(fixture_sweeps: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    train, infer = fixture_sweeps
    out = tmp_path_factory.mktemp("report") / "out"
    # No --baseline: the sweep file names subprocess-1.
    assert main(["report", str(train), str(infer), "-o", str(out), "--target", "10"]) == 0
    return out


def test_every_figure_and_table_is_written(report: Path) -> None:
    page = (report / "index.html").read_text()
    for name in FIGURES:
        png = report / name
        assert png.stat().st_size > 5000, name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f'src="{name}"' in page
    for name in TABLES:
        assert (report / f"{name}.csv").stat().st_size > 0, name
        assert (report / f"{name}.md").read_text().startswith("**"), name
    assert "<script" not in page and "http://" not in page and "https://" not in page  # offline
    # one model, every run on the CPU: no GPU-only phases (Figure 4.7), no per-model panels
    assert not (report / "phase_times_gpu.png").exists()
    assert not (report / "phase_times_by_model.png").exists()


def test_page_says_where_each_figure_comes_from(report: Path) -> None:
    page = (report / "index.html").read_text()
    assert page.count('<div class="prov">Data') >= len(FIGURES)
    assert "rlperf train --preset" in page  # the sweep points' commands
    assert "python -m rlperf.sweep.infer_point" in page
    assert "Machine: " in page
    status = (report / "sweep_status.csv").read_text()
    assert "gpu-learner,skipped" in status and "needs GPU" in status


def test_tables_hold_the_measurements(report: Path, fixture_sweeps: tuple[Path, Path]) -> None:
    summary = (report / "summary.csv").read_text().splitlines()
    assert summary[0].startswith("configuration,status,algo,runner,engine,workers,envs")
    assert len(summary) == 1 + 3  # the skipped point has no run
    speedup = (report / "speedup.csv").read_text().splitlines()
    assert "speed-up" in speedup[0]
    base_row = next(r for r in speedup if r.startswith("subprocess-1,"))
    assert base_row.split(",")[1] == "1"  # the baseline against itself
    scaling = (report / "scaling.csv").read_text()
    assert "workers" in scaling and "knee" in scaling
    latency = (report / "inference_latency.md").read_text()
    assert "| model | torch | onnx |" in latency
    fidelity = (report / "inference_fidelity.csv").read_text()
    assert "pass" in fidelity
    target = (report / "time_to_target.csv").read_text().splitlines()
    assert len(target) == 4
    diag = (report / "index.html").read_text()
    assert "learner-bound" in diag or "actor-bound" in diag or "balanced" in diag


def test_summaries_leave_warmup_iterations_out(fixture_sweeps: tuple[Path, Path]) -> None:
    train, _ = fixture_sweeps
    runs = {r.label: r for r in collect([train]).runs}
    run = runs["inproc"]
    rows = read_metrics(run.path)
    assert [r["warmup"] for r in rows] == [True, False, False, False]
    s = summarise(run)
    assert s.steady == 3 and s.iterations == 4 and not s.warmup_only
    assert s.sps_median == pytest.approx(statistics.median(r["SPS"] for r in rows[1:]))
    assert sum(s.phase_ms.values()) == pytest.approx(
        1000 * statistics.mean(r["time_this_iter_s"] for r in rows[1:]), rel=1e-6
    )


def test_report_refuses_bad_input(
    fixture_sweeps: tuple[Path, Path], tmp_path: Path, capsys
) -> None:  # noqa: ANN001
    train, _ = fixture_sweeps
    run = train / "runs" / "inproc"
    cases = [
        (["report", str(train), "-o", str(run)], "is a run or sweep directory"),
        (
            ["report", str(train), "-o", str(tmp_path / "r"), "--baseline", "nope"],
            "baseline 'nope' is not a configuration",
        ),
        (
            ["report", str(train), "-o", str(tmp_path / "r"), "--target", "high"],
            "--target must be a number",
        ),
        (["report", "-o", str(tmp_path / "r")], "the following arguments are required: DIR"),
    ]
    for argv, message in cases:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err


def test_a_single_run_directory_is_a_report_too(
    fixture_sweeps: tuple[Path, Path], tmp_path: Path
) -> None:
    train, _ = fixture_sweeps
    assert main(["report", str(train / "runs" / "subprocess-2"), "-o", str(tmp_path / "one")]) == 0
    page = (tmp_path / "one" / "index.html").read_text()
    assert "subprocess-2" in page and "no scaling curve" in page
    manifest = json.loads((train / "runs" / "subprocess-2" / "manifest.json").read_text())
    assert manifest["cpu"]["model"] is None or manifest["cpu"]["model"] in page


CHROMIUM = find_chromium()
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no Chromium installed (make test installs Debian's chromium; set RLPERF_CHROMIUM to use another)",
)


@needs_chromium
def test_the_page_renders_in_headless_chromium(report: Path) -> None:
    check = check_page(report / "index.html")
    assert len(check.images) == len(FIGURES), check.images
    assert check.broken_images == [], check.describe()
    assert check.console_errors == [], check.console_errors
    assert not check.blank, "the screenshot is blank"
    assert check.ok


@needs_chromium
def test_the_browser_check_sees_a_broken_page(tmp_path: Path) -> None:
    page = tmp_path / "index.html"
    page.write_text(
        '<!DOCTYPE html><html><head><link rel="icon" href="data:,"></head><body>'
        '<h1>x</h1><img src="missing.png"><script>console.error("boom")</script></body></html>'
    )
    check = check_page(page)
    assert check.broken_images == ["missing.png"]
    assert any("boom" in e for e in check.console_errors)
    assert not check.ok
