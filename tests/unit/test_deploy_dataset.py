"""Recorded observation files: shape, dtype, resets, no pickle, checked on load."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rlperf.config.schema import RunConfig
from rlperf.core.errors import UserInputError
from rlperf.deploy.dataset import load_observations, record_observations, save_observations
from tests.conftest import needs_export_extra

pytestmark = needs_export_extra


def test_pong_observations_have_the_runs_shape_and_dtype(pong_run, pong_obs) -> None:
    from rlperf.deploy.policy import load_run_policy

    shape = load_run_policy(pong_run).obs_shape
    assert pong_obs["calib"].shape == (300, *shape) and pong_obs["calib"].dtype == np.uint8
    assert len(np.unique(pong_obs["calib"][:, -1].reshape(300, -1), axis=0)) > 250  # frames move


def test_recording_resets_on_episode_end(tmp_path: Path) -> None:
    cfg = RunConfig()
    cfg.env.id = "CartPole-v1"
    obs, resets = record_observations(cfg, 0, 400, seed=3)
    assert obs.shape == (400, 4) and obs.dtype == np.float32
    assert resets >= 5  # random CartPole games last ~20 steps
    path = tmp_path / "obs.npy"
    save_observations(path, obs)
    np.testing.assert_array_equal(load_observations(path, (4,), np.dtype(np.float32)), obs)
    with pytest.raises(UserInputError, match="already exists"):
        save_observations(path, obs)


def test_bad_datasets_are_one_line_errors(tmp_path: Path) -> None:
    good = np.zeros((5, 4, 84, 84), np.uint8)
    np.save(tmp_path / "float.npy", good.astype(np.float32))
    with pytest.raises(UserInputError, match="dtype float32; this run's observations are uint8"):
        load_observations(tmp_path / "float.npy", (4, 84, 84), np.dtype(np.uint8))
    np.save(tmp_path / "small.npy", good[:, :, :42, :42])
    with pytest.raises(UserInputError, match=r"shape \(5, 4, 42, 42\); expected \(N, 4, 84, 84\)"):
        load_observations(tmp_path / "small.npy", (4, 84, 84), np.dtype(np.uint8))
    np.save(tmp_path / "objects.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(UserInputError, match="not a readable .npy"):
        load_observations(tmp_path / "objects.npy")
    (tmp_path / "frames.txt").write_text("0 1 2\n")
    with pytest.raises(UserInputError, match="is not a .npy file"):
        load_observations(tmp_path / "frames.txt")
    with pytest.raises(UserInputError, match="does not exist"):
        load_observations(tmp_path / "missing.npy")
