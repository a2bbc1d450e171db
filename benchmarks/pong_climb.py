"""Where each run's climb to a solved Pong was fast or slow, from its records alone.

For every run directory under the given paths (a bench directory, a run directory, or a
folder of either): the env steps at which the mean of the last 100 games first reached
each level, and what the learner did during the climb from 0 to 17 (the learning rate,
entropy bonus and the policy's entropy where the climb starts, the entropy where it ends or
the run stopped short of it; the mean approximate KL, clip
fraction, explained variance, value loss, policy entropy and the raw advantages' spread over
it), and two early signs of a slow start (the policy's entropy around 60 k env steps and the
mean game length around 150 k: a policy that collapsed onto a few actions before it could
return a ball loses its games quickly), with the raw advantages' spread around 60 k (runs
that record it), and where PPO's late phase (ppo.late_phase_return) began.
One Markdown table, one row a run:

    python benchmarks/pong_climb.py runs/bench/pong-steps3.6M

The levels and the climb's window are flags. Reads metrics.jsonl and manifest.json only.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

CLIMB_KEYS = {
    "kl": "losses/approx_kl",
    "clipfrac": "losses/clipfrac",
    "expl_var": "losses/explained_variance",
    "v_loss": "losses/value_loss",
    "entropy": "losses/entropy",
    "adv_std": "losses/advantage_std",
}
# The figures before the climb: the climb's own, and the gradient's norm before clipping
# (the shared torso's gradient sums the policy's and the value's).
LEAD_KEYS = {**CLIMB_KEYS, "grad_norm": "losses/grad_norm", "game_len": "episode_len_mean"}


def run_dirs(paths: list[Path]) -> list[Path]:
    """Every run directory (one holding metrics.jsonl) under ``paths``, sorted by name."""
    found = {
        m.parent for p in paths for m in [*p.glob("metrics.jsonl"), *p.rglob("*/metrics.jsonl")]
    }
    # A bench keeps failed or interrupted attempts under aside/: not runs to compare.
    return sorted(d for d in found if not {"superseded", "aside"} & set(d.parts))


def first_reaching(records: list[dict], level: float) -> dict | None:
    """The first record whose mean of 100 games is at ``level`` or above."""
    for r in records:
        mean = r.get("episode_reward_mean")
        if mean is not None and r.get("episodes_total", 0) >= 100 and mean >= level:
            return r
    return None


def climb(records: list[dict], start: float, end: float) -> dict[str, float | None]:
    """The learner's figures over the climb from ``start`` to ``end`` (or to the last record)."""
    first = first_reaching(records, start)
    if first is None:
        return {}
    last = first_reaching(records, end) or records[-1]
    window = [r for r in records if first["iteration"] <= r["iteration"] <= last["iteration"]]
    out: dict[str, float | None] = {
        "lr": first.get("losses/learning_rate"),
        "ent_coef": first.get("losses/ent_coef"),
        # The window's mean entropy leans on its length (a long climb spends longer with a
        # sharper policy), so the policy's breadth where the climb begins is shown apart.
        "entropy_at_start": near(records, "losses/entropy", first["timesteps_total"], 30e3),
        # Where the climb ends (or the run, if it never did): a policy that narrowed on a
        # plateau shows here, where the window's mean would blur it.
        "entropy_at_end": near(records, "losses/entropy", last["timesteps_total"], 30e3),
    }
    return {**out, **means(window, CLIMB_KEYS)}


def means(window: list[dict], keys: dict[str, str]) -> dict[str, float | None]:
    """The mean of each ``keys`` figure over the records of ``window`` (None: not recorded)."""
    out: dict[str, float | None] = {}
    for name, key in keys.items():
        values = [r[key] for r in window if isinstance(r.get(key), int | float)]
        out[name] = statistics.fmean(values) if values else None
    return out


def near(records: list[dict], key: str, step: float, half_width: float) -> float | None:
    """The mean of ``key`` over the records within ``half_width`` env steps of ``step``."""
    values = [
        r[key]
        for r in records
        if abs(r["timesteps_total"] - step) <= half_width and isinstance(r.get(key), int | float)
    ]
    return statistics.fmean(values) if values else None


def lead(records: list[dict], start: float, end: float, steps: float) -> dict | None:
    """The climb from ``start`` to ``end`` in env steps (``finished`` False: censored at the
    last record) and the mean of each ``LEAD_KEYS`` figure over the ``steps`` env steps up to
    the climb's start; None for a run that never reached ``start``."""
    first = first_reaching(records, start)
    if first is None:
        return None
    at = first["timesteps_total"]
    last = first_reaching(records, end)
    window = [r for r in records if at - steps <= r["timesteps_total"] <= at]
    reached = last or records[-1]
    length = reached["timesteps_total"] - at
    return {"length": length, "finished": last is not None, **means(window, LEAD_KEYS)}


def print_lead(rows: list[tuple[str, dict]], start: float, end: float, steps: float) -> None:
    """The ``--lead`` table and, per figure, its rank correlation with the climb's length."""
    from scipy.stats import spearmanr

    print(f"\nThe climb from {start:g} to {end:g} and the {steps / 1e3:g} k env steps before it:\n")
    head = ["run", f"{start:g} to {end:g}", *(f"{n} before" for n in LEAD_KEYS)]
    print("| " + " | ".join(head) + " |")
    print("|" + " --- |" * len(head))
    for name, row in rows:
        length = ("" if row["finished"] else "> ") + f"{row['length'] / 1e3:,.0f} k"
        print("| " + " | ".join([name, length, *(fmt(row[n]) for n in LEAD_KEYS)]) + " |")
    finished = [row for _, row in rows if row["finished"]]
    print(f"\nSpearman rank correlation with the climb's length, {len(finished)} finished climbs:")
    for n in LEAD_KEYS:
        pairs = [(row[n], row["length"]) for row in finished if row[n] is not None]
        if len(pairs) < 3:
            continue
        rho, p = spearmanr(*zip(*pairs, strict=True))
        print(f"- {n}: rho {rho:+.2f} (p {p:.2g}, n {len(pairs)})")


def read_records(run: Path) -> list[dict]:
    """The run's iteration records (metrics.jsonl)."""
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]


def first_late_phase(records: list[dict]) -> dict | None:
    """The record of the first update in PPO's late phase (``ppo.late_phase_*``), or None."""
    return next((r for r in records if r.get("losses/late_phase") == 1.0), None)


def late_phase_start(records: list[dict]) -> str:
    """The env steps of the first update in PPO's late phase, or -."""
    first = first_late_phase(records)
    return "-" if first is None else f"{first['timesteps_total'] / 1e3:,.0f} k"


def fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("paths", nargs="+", type=Path)
    p.add_argument("--levels", default="-15,0,10,15,17", help="mean-of-100 levels (comma list)")
    p.add_argument("--climb", default="0,17", help="the climb's window: from,to levels")
    p.add_argument("--entropy-at", type=float, default=60e3, help="env steps of the early entropy")
    p.add_argument("--length-at", type=float, default=150e3, help="env steps of the game length")
    p.add_argument(
        "--lead", type=float, help="also the figures over these env steps before the climb"
    )
    args = p.parse_args()
    levels = [float(x) for x in args.levels.split(",")]
    start, end = (float(x) for x in args.climb.split(","))
    head = [
        "run",
        *(f"{lv:g}" for lv in levels),
        "lr",
        "ent_coef",
        f"entropy at {start:g}",
        f"entropy at {end:g} or end",
        *CLIMB_KEYS,
        f"entropy {args.entropy_at / 1e3:g}k",
        f"adv_std {args.entropy_at / 1e3:g}k",
        f"game length {args.length_at / 1e3:g}k",
        "late phase from",
        "ended",
    ]
    print("| " + " | ".join(head) + " |")
    print("|" + " --- |" * len(head))
    leads: list[tuple[str, dict]] = []
    for run in run_dirs(args.paths):
        records = read_records(run)
        if not records:
            continue
        steps = [first_reaching(records, lv) for lv in levels]
        figures = climb(records, start, end)
        manifest = json.loads((run / "manifest.json").read_text())
        ended = f"{manifest.get('stop_reason')} at {records[-1]['timesteps_total'] / 1e3:,.0f} k"
        cells = [
            run.name,
            *("-" if r is None else f"{r['timesteps_total'] / 1e3:,.0f} k" for r in steps),
            fmt(figures.get("lr")),
            fmt(figures.get("ent_coef")),
            fmt(figures.get("entropy_at_start")),
            fmt(figures.get("entropy_at_end")),
            *(fmt(figures.get(k)) for k in CLIMB_KEYS),
            fmt(near(records, "losses/entropy", args.entropy_at, 10e3)),
            fmt(near(records, "losses/advantage_std", args.entropy_at, 10e3)),
            fmt(near(records, "episode_len_mean", args.length_at, 10e3), 4),
            late_phase_start(records),
            ended,
        ]
        print("| " + " | ".join(cells) + " |")
        if args.lead and (row := lead(records, start, end, args.lead)) is not None:
            given = next((p for p in args.paths if p in run.parents), run.parent)
            leads.append((f"{given.name}/{run.name}", row))
    if args.lead:
        print_lead(leads, start, end, args.lead)


if __name__ == "__main__":
    main()
