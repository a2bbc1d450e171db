"""Checkpoints: round trip without pickle, atomic writes, corruption detected, pruning."""

import json
import os

import numpy as np
import pytest
import torch

from rlperf.core import checkpoint as ckpt
from rlperf.core.errors import CheckpointError


def _state(value: float) -> dict:
    return {
        "weights": {"w": torch.full((2, 3), value), "b": torch.zeros(3, dtype=torch.bfloat16)},
        "optimizer": {
            "state": {0: {"step": torch.tensor(5.0)}},
            "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999)}],
        },
        "env": [
            {"ale": np.frombuffer(b"\x00\x01\x02", dtype=np.uint8), "rng": {"state": 2**100 + 7}}
        ],
        "counters": {"iteration": int(value), "ema": None, "name": "x"},
    }


def test_round_trip_keeps_tensors_arrays_and_json(tmp_path):
    ckpt.save_checkpoint(tmp_path, "ckpt_1", _state(1.0), keep=3)
    loaded = ckpt.load_checkpoint(tmp_path)
    assert torch.equal(loaded["weights"]["w"], torch.full((2, 3), 1.0))
    assert loaded["weights"]["b"].dtype == torch.bfloat16
    assert (
        isinstance(loaded["env"][0]["ale"], np.ndarray)
        and loaded["env"][0]["ale"].tobytes() == b"\x00\x01\x02"
    )
    assert loaded["env"][0]["rng"]["state"] == 2**100 + 7
    assert loaded["optimizer"]["state"]["0"]["step"].item() == 5.0
    assert loaded["counters"] == {"iteration": 1, "ema": None, "name": "x"}


def test_unsupported_objects_are_refused(tmp_path):
    with pytest.raises(TypeError, match="cannot checkpoint"):
        ckpt.save_checkpoint(tmp_path, "ckpt_1", {"f": object()}, keep=1)


def test_latest_pointer_and_pruning(tmp_path):
    for i in range(1, 5):
        ckpt.save_checkpoint(tmp_path, ckpt.checkpoint_name(i, i * 10), _state(float(i)), keep=2)
    names = [p.name for p in ckpt.list_checkpoints(tmp_path)]
    assert names == [ckpt.checkpoint_name(3, 30), ckpt.checkpoint_name(4, 40)]
    assert ckpt.load_checkpoint(tmp_path)["counters"]["iteration"] == 4


def test_interrupted_write_leaves_the_previous_checkpoint_loadable(tmp_path, monkeypatch):
    ckpt.save_checkpoint(tmp_path, "ckpt_00000001", _state(1.0), keep=3)

    def killed(*args, **kwargs):  # the process dies between writing and renaming
        raise KeyboardInterrupt

    monkeypatch.setattr(ckpt.os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        ckpt.save_checkpoint(tmp_path, "ckpt_00000002", _state(2.0), keep=3)
    monkeypatch.undo()
    assert ckpt.load_checkpoint(tmp_path)["counters"]["iteration"] == 1
    assert any(p.name.startswith(".tmp-") for p in tmp_path.iterdir())  # the torn write stays aside


def test_truncated_checkpoint_is_a_clear_error_naming_the_previous(tmp_path):
    ckpt.save_checkpoint(tmp_path, "ckpt_00000001", _state(1.0), keep=3)
    newest = ckpt.save_checkpoint(tmp_path, "ckpt_00000002", _state(2.0), keep=3)
    tensors = newest / ckpt.TENSORS_FILE
    tensors.write_bytes(tensors.read_bytes()[:-10])
    with pytest.raises(CheckpointError, match="corrupted.*previous checkpoint .*ckpt_00000001"):
        ckpt.load_checkpoint(tmp_path)
    assert ckpt.load_checkpoint(tmp_path / "ckpt_00000001")["counters"]["iteration"] == 1


def test_flipped_byte_and_bad_json_are_detected(tmp_path):
    path = ckpt.save_checkpoint(tmp_path, "ckpt_00000001", _state(1.0), keep=3)
    data = bytearray((path / ckpt.TENSORS_FILE).read_bytes())
    data[-1] ^= 0xFF
    (path / ckpt.TENSORS_FILE).write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="checksum"):
        ckpt.load_checkpoint(path)
    (path / ckpt.TREE_FILE).write_text("{not json")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        ckpt.load_checkpoint(path)
    os.remove(path / ckpt.TREE_FILE)
    with pytest.raises(CheckpointError, match="incomplete"):
        ckpt.load_checkpoint(path)


def test_no_pickle_anywhere(tmp_path):
    path = ckpt.save_checkpoint(tmp_path, "ckpt_1", _state(1.0), keep=1)
    assert sorted(p.name for p in path.iterdir()) == sorted([ckpt.TENSORS_FILE, ckpt.TREE_FILE])
    json.loads((path / ckpt.TREE_FILE).read_text())  # plain JSON


def test_resuming_from_an_older_checkpoint_sets_newer_ones_aside(tmp_path):
    root = tmp_path / "checkpoints"
    for i in (1, 2, 3):
        ckpt.save_checkpoint(root, ckpt.checkpoint_name(i, i), _state(float(i)), keep=5)
    aside = tmp_path / "superseded" / "first"
    moved = ckpt.set_aside_newer(root / ckpt.checkpoint_name(1, 1), aside)
    assert [p.name for p in moved] == [ckpt.checkpoint_name(2, 2), ckpt.checkpoint_name(3, 3)]
    assert ckpt.load_checkpoint(root)["counters"]["iteration"] == 1  # latest follows
    assert (aside / ckpt.checkpoint_name(3, 3) / ckpt.TENSORS_FILE).is_file()
    ckpt.save_checkpoint(root, ckpt.checkpoint_name(2, 2), _state(20.0), keep=1)
    assert [p.name for p in ckpt.list_checkpoints(root)] == [ckpt.checkpoint_name(2, 2)]
    assert ckpt.load_checkpoint(root)["counters"]["iteration"] == 20
    # a second abandoned line goes to its own directory: the first one is never overwritten
    second = tmp_path / "superseded" / "second"
    ckpt.save_checkpoint(root, ckpt.checkpoint_name(3, 3), _state(30.0), keep=5)
    ckpt.set_aside_newer(root / ckpt.checkpoint_name(2, 2), second)
    assert ckpt.load_checkpoint(aside / ckpt.checkpoint_name(3, 3))["counters"]["iteration"] == 3
    assert ckpt.load_checkpoint(second / ckpt.checkpoint_name(3, 3))["counters"]["iteration"] == 30


def test_saving_the_same_name_again_replaces_it(tmp_path):
    ckpt.save_checkpoint(tmp_path, "ckpt_1", _state(1.0), keep=3)
    ckpt.save_checkpoint(tmp_path, "ckpt_1", _state(2.0), keep=3)
    assert ckpt.load_checkpoint(tmp_path)["counters"]["iteration"] == 2
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_a_tree_naming_a_missing_tensor_is_a_checkpoint_error(tmp_path):
    path = ckpt.save_checkpoint(tmp_path, "ckpt_1", _state(1.0), keep=1)
    meta = json.loads((path / ckpt.TREE_FILE).read_text())
    meta["state"] = {"weights": {"__tensor__": "no.such.tensor"}}
    (path / ckpt.TREE_FILE).write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match="does not match its tensors"):
        ckpt.load_checkpoint(path)
