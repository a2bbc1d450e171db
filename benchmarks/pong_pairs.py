"""Two arms' runs of the same seeds side by side: where each pair parts and what follows.

Arms that differ only after some point of a run (PPO's late phase, say) and share a fixed
schedule run the same updates until then; this prints, per seed found in both folders, the
first iteration whose policy loss differs, then for each run its env steps to the
mean-of-100 levels, where it stopped and why, where its own late phase began (PPO's
``ppo.late_phase_*``; arms may start it at different points) and the env steps from there to
the stop, and the policy's entropy over the last 30 k env steps:

    python benchmarks/pong_pairs.py docs/bench-pong-spread/bench-xeon-horizon/runs \
        docs/bench-pong-spread/bench-pong-lateent-cand/runs --first-prefix atari-fast-anneal3.6M

Reads metrics.jsonl and manifest.json only; a run folder's name ends in ``__s<seed>``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pong_climb import first_late_phase, first_reaching, near, read_records

LEVELS = (-15.0, 0.0, 10.0, 15.0, 17.0)


def updates(run: Path) -> list[dict]:
    """The run's iteration records that carry an update's losses."""
    return [r for r in read_records(run) if "losses/policy_loss" in r]


def by_seed(folder: Path, prefix: str | None) -> dict[str, Path]:
    """Run folders under ``folder`` by their seed suffix (``s1``...), optionally by name prefix."""
    runs = (d for d in folder.iterdir() if (d / "manifest.json").exists())
    return {
        d.name.rsplit("__", 1)[-1]: d for d in runs if prefix is None or d.name.startswith(prefix)
    }


def describe(records: list[dict], run: Path) -> str:
    manifest = json.loads((run / "manifest.json").read_text())
    reached = [first_reaching(records, level) for level in LEVELS]
    levels = "/".join("-" if r is None else f"{r['timesteps_total'] / 1e3:,.0f}" for r in reached)
    stop = records[-1]["timesteps_total"]
    entropy = near(records, "losses/entropy", stop, 30e3)
    late = first_late_phase(records)
    late_phase = (
        "no late phase"
        if late is None
        else f"late phase from {late['timesteps_total'] / 1e3:,.0f} k (iteration "
        f"{late['iteration']}), {(stop - late['timesteps_total']) / 1e3:,.0f} k to the stop"
    )
    return (
        f"{run.name}: levels {levels} k, stopped at {stop / 1e3:,.0f} k "
        f"({manifest.get('stop_reason')}), {late_phase}, entropy at the end {entropy:.2f}"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("first", type=Path, help="folder of the first arm's run folders")
    p.add_argument("second", type=Path, help="folder of the second arm's run folders")
    p.add_argument("--first-prefix", help="only the first folder's runs named so")
    p.add_argument("--second-prefix", help="only the second folder's runs named so")
    args = p.parse_args()
    firsts = by_seed(args.first, args.first_prefix)
    seconds = by_seed(args.second, args.second_prefix)
    for seed in sorted(firsts.keys() & seconds.keys(), key=lambda s: int(s.lstrip("s"))):
        a, b = updates(firsts[seed]), updates(seconds[seed])
        parted = next(
            (
                x["iteration"]
                for x, y in zip(a, b, strict=False)  # runs of different lengths
                if x["losses/policy_loss"] != y["losses/policy_loss"]
            ),
            None,
        )
        print(f"{seed}: parted at iteration {parted}")
        print("  " + describe(a, firsts[seed]))
        print("  " + describe(b, seconds[seed]))


if __name__ == "__main__":
    main()
