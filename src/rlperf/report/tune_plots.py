"""The figures of a time-to-target tuning study: every trial's reward against its training
time, and Optuna's parameter importances (drawn as the other report figures are)."""

from __future__ import annotations

from pathlib import Path

from rlperf.report.load import RunData, TuneData
from rlperf.report.plots import _bar_height, _figure, _hbars, _save


def tune_curves(tune: TuneData, runs: dict[str, RunData], path: Path) -> Path:
    """Every trial's reward metric against training time: the best bold, pruned trials faded,
    the target and the rungs marked."""
    from rlperf.report.analysis import reward_metric

    summary = tune.summary
    metric = str(summary.get("metric", "mean100"))
    best = (summary.get("best") or {}).get("number")
    fig = _figure(10, 4.6)
    ax = fig.subplots()
    faded = False
    for trial in tune.trials:
        label = tune.run_labels.get(int(trial["number"]))
        run = runs.get(label or "")
        if run is None or label != f"trial-{trial['number']:04d}":
            continue  # no run yet, or a cut-off trial whose run a later trial continued
        pts = [
            (r["time_total_s"], value)
            for r in run.records
            if (value := reward_metric(r, metric)) is not None
        ]
        if not pts:
            continue
        secs, reward = zip(*pts, strict=True)
        state = trial["state"]
        if trial["number"] == best:
            ax.plot(secs, reward, color="#c44e52", linewidth=2.4, label=f"{label} (best)", zorder=3)
        elif state == "complete":
            ax.plot(secs, reward, linewidth=1.2, label=f"{label} (reached)")
        else:
            shown = None if faded else "pruned, not reached or failed"
            ax.plot(secs, reward, color="#8c8c8c", linewidth=0.9, alpha=0.35, label=shown)
            faded = True
    ax.axhline(float(summary["target"]), color="#55a868", linestyle="--", label="target")
    for rung in summary.get("rungs_s") or []:
        ax.axvline(float(rung), color="#dddddd", linewidth=0.8, zorder=0)
    ax.set_xlabel("training time (s); grey lines: the rungs where trials may be pruned")
    ax.set_ylabel(f"{summary.get('metric', 'mean100')} return")
    ax.set_title("Trials of the time-to-target search (pruned trials faded)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    return _save(fig, path)


def importances(values: dict[str, float], path: Path) -> Path:
    """Optuna's parameter importances (how much of the objective's variance each explains)."""
    ranked = sorted(values.items(), key=lambda kv: -kv[1])
    fig = _figure(8, _bar_height(len(ranked)))
    ax = fig.subplots()
    _hbars(ax, [k for k, _ in ranked], [v for _, v in ranked], "#4c72b0", "")
    ax.set_xlabel("importance for time to target (share, fANOVA)")
    ax.set_title("Which settings the time to target depended on", fontsize=10)
    return _save(fig, path)
