"""The report's section on a time-to-target tuning study (``rlperf tune``)."""

from __future__ import annotations

from rlperf.report import tune_plots
from rlperf.report.render import Section
from rlperf.report.table_builders import tune_trials_table


def tune_section(tune, col, figure, tables) -> Section:  # noqa: ANN001
    """The section of an ``rlperf tune --objective time-to-target`` study: what it did,
    its best trial and the base config's, every trial's curve, the parameter importances."""
    summary = tune.summary
    sec = Section("tune", f"Tuning: time to {summary.get('target')}")
    best = summary.get("best")
    sec.paragraphs.append(
        f"rlperf tune --objective time-to-target in {tune.path}: each trial trained in "
        "segments ending at wall-clock rungs, was pruned where it trailed the others, and "
        "otherwise resumed from its checkpoint. Its time to target is the training time until "
        f"the {summary.get('metric')} return first reached the target, plus its first "
        f"process's start-up. {summary.get('seconds_used', 0):.0f} s of trials in all."
    )
    if best:
        sec.paragraphs.append(
            f"Best: trial {best['number']} in {best['time_to_target_s']:.0f} s; its config is "
            f"the preset {tune.path / best['preset']} (rlperf train --preset FILE)."
        )
    for trial in tune.trials:
        if trial.get("base") and trial["state"] in ("complete", "pruned"):
            reached = trial.get("time_to_target_s")
            sec.paragraphs.append(
                f"The base config (trial {trial['number']}, the study's first): "
                + (f"{reached:.0f} s." if reached is not None else f"{trial.get('reason')}.")
            )
    runs = {r.label: r for r in col.runs if r.sweep == "tune"}
    mine = [runs[label] for label in tune.run_labels.values() if label in runs]
    sec.figures.append(
        figure(
            "tune_curves.png",
            lambda p: tune_plots.tune_curves(tune, runs, p),
            "The reward metric of every trial against its training time; pruned and "
            "unfinished trials faded.",
            "reward against training time for every trial of the search",
            mine,
        )
    )
    if summary.get("importances"):
        sec.figures.append(
            figure(
                "tune_importances.png",
                lambda p: tune_plots.importances(summary["importances"], p),
                "Optuna's parameter importances for the time to target (fANOVA over the "
                "trials that reached it).",
                "bar chart of parameter importances",
                mine,
            )
        )
    else:
        sec.paragraphs.append(
            "No parameter importances: they need at least two trials that reached the target."
        )
    sec.tables += tables(tune_trials_table(tune))
    return sec
