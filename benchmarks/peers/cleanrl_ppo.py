"""CleanRL's shipped ``ppo_atari_envpool`` on Pong, timed from its own SPS reports.

Peer side of rlperf's side-by-side benchmark, like ``sb3_ppo.py``, but CleanRL is a set of
single-file scripts, not a library, so this wrapper does not train anything itself: it runs
the script from the ``cleanrl`` package unmodified (its defaults are the ``cleanrl-atari``
hyperparameters), reads the ``SPS: N`` line the script prints after every iteration, stops
it once the wall-clock budget is spent and prints ``RESULT {json}`` for ``compare.py``::

    benchmarks/.venv-cleanrl/bin/python benchmarks/peers/cleanrl_ppo.py --seconds 60 --threads 2

The script has no thread option, so a two-line launcher calls ``torch.set_num_threads`` and
then runs the module as ``__main__`` (``OMP_NUM_THREADS`` is set to the same value).

Timing model: the script prints one ``SPS:`` line at the end of every iteration (1024 env
steps plus its update). Each line is stamped with the wrapper's clock on arrival (the child
runs unbuffered), so line k marks the end of iteration k at ``k * 1024`` steps. Steady SPS
is measured from line 1 to the last line, excluding the first iteration as warm-up, as in
``sb3_ppo.py``. The script's own number is cumulative since its start (warm-up included)
and is reported as ``sps_script_cumulative``. The child's tensorboard ``runs/`` directory
goes to a temporary directory that is removed afterwards.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

MODULE = "cleanrl.ppo_atari_envpool"
ENV_ID = "Pong-v5"  # envpool's id: frameskip 4 with max-pool, no sticky actions, 84x84 gray
N_ENVS = 8
N_STEPS = 128
WARMUP_ITERATIONS = 1
SPS_RE = re.compile(r"^SPS:\s*(?P<sps>\d+(?:\.\d*)?)\s*$")
LAUNCHER = (
    "import runpy, sys, torch; torch.set_num_threads(int(sys.argv[1])); "
    "sys.argv = [sys.argv[2]] + sys.argv[3:]; "
    "runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)"
)
TAIL_LINES = 20


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options; defaults reproduce the cleanrl-atari comparison setting."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=60.0, help="wall-clock training budget")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--env-id", default=ENV_ID)
    p.add_argument("--module", default=MODULE, help="CleanRL script module to run")
    p.add_argument("--setup-timeout", type=float, default=300.0, help="max wait for 1st SPS")
    return p.parse_args(argv)


def child_command(args: argparse.Namespace) -> list[str]:
    """The CleanRL script with its defaults, plus the switches for a local CPU run."""
    return [
        sys.executable,
        "-u",
        "-c",
        LAUNCHER,
        str(args.threads),
        args.module,
        "--env-id",
        args.env_id,
        "--num-envs",
        str(N_ENVS),
        "--seed",
        str(args.seed),
        "--total-timesteps",
        "10000000",
        "--track",
        "False",
        "--capture-video",
        "False",
        "--cuda",
        "False",
    ]


def steady_state(stamps: list[tuple[float, int]], warmup: int = WARMUP_ITERATIONS):
    """Steady SPS from ``(arrival time, env steps)`` of the per-iteration SPS lines.

    ``stamps[k]`` is the end of iteration ``k + 1``; the window starts at the end of the
    warm-up iteration(s). ``sps`` is None when no iteration follows the warm-up.
    """
    out: dict[str, Any] = {
        "iterations": len(stamps),
        "timesteps": stamps[-1][1] if stamps else 0,
        "warmup_iterations": min(warmup, len(stamps)),
        "sps": None,
        "steady_timesteps": 0,
        "steady_seconds": 0.0,
    }
    if len(stamps) > warmup:
        (t0, s0), (t1, s1) = stamps[warmup - 1], stamps[-1]
        if t1 > t0:
            out.update(sps=(s1 - s0) / (t1 - t0), steady_timesteps=s1 - s0, steady_seconds=t1 - t0)
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the script for the budget and print one ``RESULT`` line."""
    args = parse_args(argv)
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "PYTHONUNBUFFERED": "1"}
    tail: list[str] = []
    stamps: list[tuple[float, int]] = []
    script_sps: list[float] = []
    t_launch = time.perf_counter()
    t_train0: float | None = None
    with tempfile.TemporaryDirectory(prefix="cleanrl-peer-") as workdir:
        proc = subprocess.Popen(
            child_command(args),
            cwd=workdir,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            start_new_session=True,  # own process group, so the stop reaches envpool's threads
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            now = time.perf_counter()
            tail = (tail + [line.rstrip()])[-TAIL_LINES:]
            match = SPS_RE.match(line.strip())
            if match:
                steps = (len(stamps) + 1) * N_ENVS * N_STEPS
                stamps.append((now, steps))
                script_sps.append(float(match.group("sps")))
                if t_train0 is None:
                    # Training start estimated from the script's own first report, so that
                    # the budget covers training only, as in sb3_ppo.py.
                    t_train0 = now - steps / max(script_sps[0], 1e-9)
                if now - t_train0 >= args.seconds:
                    break
            elif t_train0 is None and now - t_launch > args.setup_timeout:
                break
        stopped_by_us = proc.poll() is None
        if stopped_by_us:
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            rc = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            rc = proc.wait()

    summary = steady_state(stamps)
    out: dict[str, Any] = {
        "system": "cleanrl",
        "version": importlib.metadata.version("cleanrl"),
        "script": args.module,
        "sps": summary.pop("sps"),
        **summary,
        "seconds": stamps[-1][0] - t_train0 if stamps and t_train0 is not None else 0.0,
        "sps_script_cumulative": script_sps[-1] if script_sps else None,
        "threads": args.threads,
        "seed": args.seed,
        "env_id": args.env_id,
        "num_envs": N_ENVS,
        "envpool": _version("envpool"),
        "torch": _version("torch"),
        "setup_s": (t_train0 - t_launch) if t_train0 is not None else None,
    }
    if out["sps"] is None:
        # The script died (or never reported): keep its last words for the JSONL log.
        out["returncode"] = None if stopped_by_us else rc
        out["error"] = next((ln for ln in reversed(tail) if ln.strip()), "no output")
        print("\n".join(tail), file=sys.stderr)
    print("RESULT " + json.dumps(out), flush=True)
    return 0 if out["sps"] is not None else 2


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


if __name__ == "__main__":
    sys.exit(main())
