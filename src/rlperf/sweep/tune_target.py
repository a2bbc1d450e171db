"""``rlperf tune --objective time-to-target``: search for the least wall clock to a reward.

An Optuna study (TPE sampler, successive-halving pruner) over a search space of config keys
(``search_space.py``). Every trial is an ``rlperf train`` run of its own, in its own run
directory, trained in segments that end at wall-clock rungs (``--rung`` seconds, doubling up
to ``--max-trial``): after each segment the trial reports how far its reward metric is short
of the target, the pruner stops the trials that trail the others at that rung, and a trial
that goes on is resumed from its checkpoint (rlperf resumes exactly), never started over.

The objective is the trial's time to the target: the run's training seconds until its
metric (``stop.target_reward_metric``) first reached the target, plus the start-up and
shut-down of its first process. A trial that has not reached the target by its last rung
ends pruned, so the best trial is always one that reached it.

The study lives in SQLite (``DIR/study.db``, Optuna's RDB storage). Killing ``rlperf tune``
at any moment and running the same command again continues it: finished trials are kept and
never repeated, and a trial that was cut off is queued again with the same parameters and
resumed from its run directory's last checkpoint. One tune at a time may use a directory.

Output: ``DIR/tune.json`` (every trial, the best, parameter importances), ``DIR/best.yaml``
(the best trial's config as a preset for ``rlperf train --preset``), ``DIR/trials/trial-N/``
(the run directories) and ``DIR/logs/``; ``rlperf report DIR`` draws them.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rlperf.core.checkpoint import atomic_write_text
from rlperf.core.errors import UserInputError, make_output_dir
from rlperf.sweep.execute import SweepSignals
from rlperf.sweep.tune_trial import (
    CONFIGS_DIR,
    OBJECTIVE,
    TargetTune,
    TrialCrashed,
    TrialInvalid,
    TrialRunner,
    TuneInterrupted,
)

STUDY_NAME = "time-to-target"
SUMMARY_FILE = "tune.json"
BEST_PRESET = "best.yaml"
LOCK_FILE = "tune.lock"


@contextlib.contextmanager
def _directory_lock(out_dir: Path) -> Iterator[None]:
    make_output_dir(out_dir, "tune directory")
    with (out_dir / LOCK_FILE).open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UserInputError(
                f"another rlperf tune is running in {out_dir}; wait for it or choose another -o DIR"
            ) from None
        yield


def _open_study(tune: TargetTune) -> tuple[Any, Any]:
    """The study (created, or loaded and checked against ``tune.definition``) and its storage."""
    import optuna

    # Trials are reported by rlperf itself (one line each); Optuna would add a traceback for
    # every failed or interrupted trial.
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    storage = optuna.storages.RDBStorage(tune.storage_url)
    study = optuna.create_study(
        study_name=STUDY_NAME,
        storage=storage,
        direction="minimize",
        sampler=optuna.samplers.TPESampler(seed=tune.seed, n_startup_trials=5),
        pruner=optuna.pruners.SuccessiveHalvingPruner(
            min_resource=int(tune.rungs_s[0]), reduction_factor=2
        ),
        load_if_exists=True,
    )
    stored = study.user_attrs.get("definition")
    wanted = json.loads(json.dumps(tune.definition))
    if stored is None:
        study.set_user_attr("definition", wanted)
    elif stored != wanted:
        differ = sorted(k for k in wanted if stored.get(k) != wanted[k])
        raise UserInputError(
            f"{tune.out_dir} holds a study with another {', '.join(differ)}; continue it with "
            "its own command, or choose another -o DIR"
        )
    return study, storage


def requeue_cut_off(study: Any, storage: Any) -> list[int]:
    """Trials cut off by a kill (still RUNNING: nothing runs now, the directory is locked)
    or by a signal: marked failed and queued again with the same parameters and run
    directory, so the next trial resumes their run. Returns their numbers."""
    from optuna.trial import TrialState

    study_id = storage.get_study_id_from_name(study.study_name)
    trials = study.get_trials(deepcopy=False)
    requeued = {t.user_attrs.get("resumes") for t in trials}
    out = []
    for t in trials:
        if t.state == TrialState.RUNNING:
            trial_id = storage.get_trial_id_from_study_id_trial_number(study_id, t.number)
            storage.set_trial_state_values(trial_id, TrialState.FAIL)
        elif not (t.state == TrialState.FAIL and t.user_attrs.get("interrupted")):
            continue
        if t.number in requeued:
            continue
        attrs = {"resumes": t.number}
        for key in ("run_dir", "overhead_s", "base"):
            if key in t.user_attrs:
                attrs[key] = t.user_attrs[key]
        study.enqueue_trial(t.params, user_attrs=attrs, skip_if_exists=False)
        out.append(t.number)
    return out


def _finished(study: Any) -> list[Any]:
    from optuna.trial import TrialState

    return study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED))


def _seconds_used(study: Any) -> float:
    return sum(
        (t.datetime_complete - t.datetime_start).total_seconds()
        for t in study.get_trials(deepcopy=False)
        if t.datetime_complete is not None and t.datetime_start is not None
    )


def run_target_tune(tune: TargetTune, say: Callable[[str], None] = print) -> dict[str, Any]:
    """Run (or continue) the study until ``n_trials`` trials finished or the budget is spent;
    returns the summary also written to ``tune.json``. TuneInterrupted on a signal."""
    import optuna

    with _directory_lock(tune.out_dir), SweepSignals() as signals:
        study, storage = _open_study(tune)
        if not study.trials:  # the first trial is the base config, as far as the space allows
            base = tune.space.values_of(tune.base_config())
            study.enqueue_trial(base, user_attrs={"base": True})
        again = requeue_cut_off(study, storage)
        if again:
            say(f"resuming trial(s) cut off earlier: {', '.join(map(str, again))}")
        runner = TrialRunner(tune, signals, say)

        def record(study: Any, trial: Any) -> None:
            if trial.state == optuna.trial.TrialState.FAIL:
                why = trial.user_attrs.get("reason", "")
                say(f"  trial-{trial.number:04d}: failed: {why}")
            write_summary(tune, study, with_importances=False)

        while True:
            left = tune.n_trials - len(_finished(study))
            budget_left = None if tune.budget_s is None else tune.budget_s - _seconds_used(study)
            if left <= 0 or (budget_left is not None and budget_left <= 0):
                break
            done_before = tune.n_trials - left
            say(f"study: {done_before} of {tune.n_trials} trial(s) finished")
            try:
                study.optimize(
                    runner,
                    n_trials=left,
                    timeout=budget_left,
                    n_jobs=tune.parallel,
                    catch=(TrialInvalid, TrialCrashed),
                    callbacks=[record],
                    gc_after_trial=False,
                )
            except TuneInterrupted:
                write_summary(tune, study, with_importances=False)
                raise
            if len(_finished(study)) == done_before:  # every trial failed: stop, say why
                break
        return write_summary(tune, study, with_importances=True)


def _trial_row(t: Any) -> dict[str, Any]:
    return {
        "number": t.number,
        "state": t.state.name.lower(),
        "params": t.params,
        # Optuna gives a pruned trial its last intermediate value: not a time to target.
        "time_to_target_s": t.value if t.state.name == "COMPLETE" else None,
        "intermediate": {
            str(k): v if math.isfinite(v) else None
            for k, v in sorted(t.intermediate_values.items())
        },
        "run_dir": t.user_attrs.get("run_dir"),
        "reason": t.user_attrs.get("reason"),
        "resumes": t.user_attrs.get("resumes"),
        "base": bool(t.user_attrs.get("base")),
        "seconds": (t.datetime_complete - t.datetime_start).total_seconds()
        if t.datetime_complete and t.datetime_start
        else None,
    }


def _importances(study: Any) -> dict[str, float] | None:
    import optuna

    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if len(complete) < 2:
        return None
    try:
        return dict(optuna.importance.get_param_importances(study))
    except (RuntimeError, ValueError):  # e.g. every complete trial has the same parameters
        return None


def write_summary(tune: TargetTune, study: Any, with_importances: bool) -> dict[str, Any]:
    """``tune.json`` (and ``best.yaml`` once a trial reached the target)."""
    import optuna

    trials = [_trial_row(t) for t in study.get_trials(deepcopy=False)]
    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    best = min(complete, key=lambda t: t.value) if complete else None
    summary: dict[str, Any] = {
        **tune.definition,
        "machine": tune.machine,
        "metric": tune.base_config().stop.target_reward_metric,
        "storage": tune.storage_url,
        "dashboard": f"optuna-dashboard {tune.storage_url}",
        "seconds_used": _seconds_used(study),
        "trials": trials,
        "best": None,
        "importances": _importances(study) if with_importances else None,
    }
    if best is not None:
        run_dir = tune.out_dir / best.user_attrs["run_dir"]
        preset = tune.out_dir / BEST_PRESET
        header = (
            f"# rlperf tune --objective {OBJECTIVE}: trial {best.number} reached "
            f"{tune.target:g} in {best.value:.0f} s on {tune.machine or 'this machine'}\n"
            f"# run: {run_dir}\n"
        )
        config = tune.out_dir / CONFIGS_DIR / f"{run_dir.name}.yaml"
        atomic_write_text(preset, header + config.read_text(encoding="utf-8"))
        summary["best"] = {
            "number": best.number,
            "time_to_target_s": best.value,
            "params": best.params,
            "preset": BEST_PRESET,
            "command": f"rlperf train --preset {preset}",
        }
    atomic_write_text(tune.out_dir / SUMMARY_FILE, json.dumps(summary, indent=2) + "\n")
    return summary


def format_summary(summary: dict[str, Any]) -> str:
    """The best trial, its command, and how the others ended."""
    trials = summary["trials"]
    lines = [
        f"trials: {sum(t['state'] == 'complete' for t in trials)} reached the target, "
        f"{sum(t['state'] == 'pruned' for t in trials)} pruned, "
        f"{sum(t['state'] == 'fail' for t in trials)} failed; "
        f"{summary['seconds_used']:.0f} s of trials"
    ]
    best = summary["best"]
    if best is None:
        lines.append(f"no trial reached {summary['target']:g}: raise --max-trial or --trials")
        return "\n".join(lines)
    params = ", ".join(
        f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in best["params"].items()
    )
    lines += [
        f"fastest to {summary['target']:g}: trial {best['number']} in "
        f"{best['time_to_target_s']:.0f} s ({params})",
        f"  {best['command']}",
    ]
    if summary.get("importances"):
        ranked = sorted(summary["importances"].items(), key=lambda kv: -kv[1])
        lines.append("importances: " + ", ".join(f"{k} {v:.2f}" for k, v in ranked))
    lines.append(f"live view: {summary['dashboard']}")
    return "\n".join(lines)
