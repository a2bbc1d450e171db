"""Figure 4.12 and the inference tables: one row per point, the first call and game shown."""

from __future__ import annotations

from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from rlperf.report import plots
from rlperf.report.load import InferenceData
from rlperf.report.table_builders import inference_tables


def _point(name: str, p50: float, first_call: float, first_game: float) -> InferenceData:
    """An inference point as an inference sweep saves it (torch on cuda, thesis-1)."""
    result = {
        "model": "thesis-1",
        "backend": "torch",
        "device": "cuda",
        "p50_ms": p50,
        "p99_ms": p50 * 2,
        "mean_ms": p50 * 1.1,
        "calls": 1000,
        "first_call_ms": first_call,
        "first_episode_mean_ms": first_game,
        "energy": {"joules_per_call": 0.002, "source": "NVML gpu0", "reason": None},
    }
    return InferenceData(Path(name), name, result, {})


POINTS = [
    _point("R1-8_workers_gpu0__thesis-1", 0.5, 900.0, 3.0),
    _point("R2-8_workers_gpu1__thesis-1", 0.6, 950.0, 3.5),
    _point("R8-0_workers_no_gpus__thesis-1", 0.4, 40.0, 0.9),
]


def test_every_point_is_its_own_row_with_its_first_call_and_game() -> None:
    rows = plots.inference_rows(POINTS)  # same model and backend: still three rows
    # the point's name, and the backend where the name does not say it
    assert [r.label for r in rows] == [f"{p.label} [torch (cuda)]" for p in POINTS]
    assert [(r.first_call_ms, r.first_episode_mean_ms) for r in rows] == [
        (900.0, 3.0),
        (950.0, 3.5),
        (40.0, 0.9),
    ]
    fig = Figure()
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    plots.draw_inference(ax, rows)
    assert [t.get_text() for t in ax.get_yticklabels()] == [r.label for r in rows]
    assert len(ax.patches) == 3  # one bar per point
    markers = {c.get_label(): c.get_offsets().tolist() for c in ax.collections if c.get_label()}
    assert markers["first call (cold)"] == [[900.0, 0], [950.0, 1], [40.0, 2]]
    assert markers["first game: mean per call, warm-up included"] == [
        [3.0, 0],
        [3.5, 1],
        [0.9, 2],
    ]
    assert ax.get_xscale() == "log"  # a cold call 2000x a step would flatten the bars


def test_the_figure_and_tables_are_written(tmp_path: Path) -> None:
    path = plots.inference(POINTS, tmp_path / "inference_latency.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    latency, points = inference_tables(POINTS)
    # Table 4.1 has one cell per model and backend (the first point); every point is below
    assert latency.rows == [["thesis-1", "0.500 / 1.000; 2.000 mJ"]]
    by_point = [dict(zip(points.headers, row, strict=True)) for row in points.rows]
    assert [p["point"] for p in by_point] == [p.label for p in POINTS]
    assert [p["first call ms"] for p in by_point] == [900.0, 950.0, 40.0]
    assert [p["first game ms"] for p in by_point] == [3.0, 3.5, 0.9]
    assert by_point[0]["energy source"] == "NVML gpu0"
