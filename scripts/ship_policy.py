"""Turn a training run into a small policy directory that ships with rlperf (and its tests).

    python scripts/ship_policy.py RUN_DIR src/rlperf/deploy/policies/pong --games 5 \\
        --history "rlperf train ..." --history ...

The output is a run directory that ``rlperf export/quantize/infer/enjoy`` accept: the run's
``config.yaml`` (its runs root reset, nothing of the machine it ran on), one checkpoint
holding only the policy's weights and the run's counters (no optimizer or env state: a few
MB), and ``provenance.json``: how the run was made (its manifest's command with paths
redacted, the ``--history`` commands before it, versions, CPU, env steps and wall clock),
its last training record, and the greedy returns of ``--games`` evaluation games played by
the shipped weights.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import yaml

MANIFEST_KEYS = (
    "rlperf_command", "git_sha", "versions", "cpu", "env_steps", "time_total_s", "stop_reason",
)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--games", type=int, default=5, help="greedy evaluation games")
    parser.add_argument(
        "--history",
        action="append",
        default=[],
        help="an earlier command of the run (the manifest holds only the last one), in order",
    )
    args = parser.parse_args()

    from rlperf.core.checkpoint import checkpoint_name, load_checkpoint, save_checkpoint
    from rlperf.deploy.backends import TorchBackend
    from rlperf.deploy.infer import run_greedy
    from rlperf.deploy.policy import load_run_policy

    run_dir, out = args.run_dir, args.out_dir
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    config["runs_root"] = "runs"
    (out / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    state = load_checkpoint(run_dir)
    weights = state["algorithm"]["policy"]
    counters = state.get("counters") or {}
    steps = int(counters.get("env_steps") or 0)
    iteration = int(counters.get("iteration") or 0)
    save_checkpoint(
        out / "checkpoints",
        checkpoint_name(iteration, steps),
        {"algorithm": {"policy": weights}, "counters": counters},
        1,
    )

    policy = load_run_policy(out)
    games = run_greedy(TorchBackend(policy, threads=1), policy, episodes=args.games, seed=1000)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    records = (run_dir / "metrics.jsonl").read_text().splitlines()
    last = json.loads(records[-1])
    command = list(manifest.get("rlperf_command") or [])
    redacted = {"--runs-root": "runs", "--resume": "RUN_DIR"}
    for i, word in enumerate(command[:-1]):
        if word in redacted:  # where it ran is of that machine, not of the policy
            command[i + 1] = redacted[word]
    provenance = {
        "run": {**{k: manifest.get(k) for k in MANIFEST_KEYS}, "rlperf_command": command},
        "earlier_commands": args.history,
        "last_record": {
            k: last.get(k)
            for k in ("iteration", "timesteps_total", "time_total_s", "episode_reward_mean")
        },
        "greedy_returns": [e.reward for e in games.episodes],
        "greedy_seeds": f"1000..{1000 + args.games - 1} (evaluation env: true games)",
    }
    (out / "provenance.json").write_text(json.dumps(provenance, indent=2) + "\n")
    print(json.dumps(provenance["greedy_returns"]))


if __name__ == "__main__":
    main()
