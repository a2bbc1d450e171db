"""``runner.compile``: the network is compiled in place, trains, and checkpoints as eager."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlperf.config.schema import RunConfig
from rlperf.core.checkpoint import list_checkpoints, load_checkpoint
from rlperf.core.errors import ConfigError
from rlperf.training import resolve
from tests.conftest import read_metrics, rlperf_subprocess

CARTPOLE = ("--preset", "cartpole", "-i", "3", "--no-progress", "telemetry.tensorboard=false")


def _checkpoint_keys(run_dir: Path) -> set[str]:
    return set(_flat_keys(load_checkpoint(list_checkpoints(run_dir / "checkpoints")[-1])))


def _flat_keys(tree: object, prefix: str = "") -> list[str]:
    if isinstance(tree, dict):
        return [k for key, v in tree.items() for k in _flat_keys(v, f"{prefix}{key}.")]
    return [prefix.rstrip(".")]


def test_a_compiled_run_trains_and_checkpoints_like_an_eager_one(runs_root: Path) -> None:
    for name, switch in (("eager", "false"), ("compiled", "true")):
        done = rlperf_subprocess(
            "train", *CARTPOLE, "--runs-root", str(runs_root), "-s", name,
            f"runner.compile={switch}", timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert [r["iteration"] for r in read_metrics(runs_root / name)] == [1, 2, 3]
    # Compiled in place: the parameter names (and so checkpoints and exports) are unchanged.
    names = _checkpoint_keys(runs_root / "eager")
    assert any(n.endswith("weight") for n in names)
    assert names == _checkpoint_keys(runs_root / "compiled")
    assert not any("_orig_mod" in n for n in names)


def test_compile_with_a_runner_that_cannot_use_it_is_a_config_error() -> None:
    cfg = RunConfig()
    cfg.runner.compile = True
    cfg.runner.name = "decoupled"
    cfg.algo = "impala"
    with pytest.raises(ConfigError, match="runner.compile works with the inproc and subprocess"):
        resolve.check(cfg)  # the runner's facts decide (runners/facts.py)
