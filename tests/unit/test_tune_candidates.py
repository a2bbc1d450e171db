"""``rlperf tune``'s search stages on fake machines: which points each stage proposes."""

from __future__ import annotations

from rlperf.config.load import apply_dict, load_preset
from rlperf.config.schema import RunConfig
from rlperf.sweep.machine import Machine
from rlperf.sweep.tune import (
    Candidate,
    architecture_candidates,
    parallelism_candidates,
    placement_candidates,
    precision_candidates,
    thread_candidates,
)

FAKE_TWO_CORES = Machine(cpus=frozenset({0, 1}), gpus=0)
FAKE_EIGHT_CORES = Machine(cpus=frozenset(range(8)), gpus=0)


def pong(algo: str = "ppo") -> RunConfig:
    cfg = RunConfig()
    apply_dict(cfg, load_preset("cleanrl-atari"), "test")
    cfg.algo = algo
    return cfg


def test_architecture_stage_covers_runners_and_engines() -> None:
    names = [c.name for c in architecture_candidates(pong(), FAKE_TWO_CORES, atari=True)]
    assert names[0] == "s1-inproc-gymnasium"
    assert "s1-inproc-ale-vector" in names and "s1-subprocess-w2" in names
    appo = [c.name for c in architecture_candidates(pong("appo"), FAKE_EIGHT_CORES, atari=True)]
    assert "s1-decoupled-w8" in appo and not any("subprocess" in n for n in appo)
    cartpole = [c.name for c in architecture_candidates(pong(), FAKE_TWO_CORES, atari=False)]
    assert cartpole == ["s1-inproc-gymnasium", "s1-subprocess-w2"]


def test_parallelism_stage_keeps_the_batch() -> None:
    cfg = pong()  # 8 envs x 128 steps
    inproc = Candidate("s1-inproc-envpool", {"runner.name": "inproc", "env.engine": "envpool"})
    for c in parallelism_candidates(inproc, cfg, FAKE_TWO_CORES):
        assert c.keys["env.num_envs"] * c.keys["ppo.num_steps"] == 8 * 128
    workers = Candidate("s1-subprocess-w2", {"runner.name": "subprocess", "runner.num_workers": 2})
    counts = [
        c.keys["runner.num_workers"] for c in parallelism_candidates(workers, cfg, FAKE_EIGHT_CORES)
    ]
    assert counts == [4, 8]  # half the cores, all of them (16 does not divide 8 envs)


def test_thread_stage() -> None:
    best = Candidate("s1-inproc-gymnasium", {"runner.name": "inproc"})
    threads = [c.keys["runner.torch_threads"] for c in thread_candidates(best, FAKE_EIGHT_CORES)]
    assert threads == [1, 4]  # all 8 cores is torch's default, already measured


def test_precision_stage_tries_bf16_only_where_the_machine_has_it() -> None:
    best = Candidate("s4-inproc-envpool-t2", {"runner.name": "inproc", "runner.torch_threads": 2})
    bf16_machine = Machine(cpus=frozenset({0, 1}), gpus=0, bf16=True)
    [point] = precision_candidates(best, pong(), bf16_machine)
    assert point.name == "s5-inproc-envpool-t2-bf16"
    assert point.keys == {**best.keys, "runner.precision": "bf16"}
    assert precision_candidates(best, pong(), FAKE_TWO_CORES) == []  # no native bf16
    already = Candidate("s4-x", {"runner.precision": "bf16"})
    assert precision_candidates(already, pong(), bf16_machine) == []


def test_placement_stage_puts_the_learner_and_actors_on_gpus_only_where_they_exist() -> None:
    inproc = Candidate("s1-inproc-envpool", {"runner.name": "inproc"})
    assert placement_candidates(inproc, FAKE_EIGHT_CORES) == []  # no GPU: no stage
    one_gpu = Machine(cpus=frozenset(range(8)), gpus=1)
    [point] = placement_candidates(inproc, one_gpu)
    assert point.name == "s2-inproc-envpool-gpu-actors-cuda0"
    assert point.keys["runner.learner_device"] == point.keys["runner.actor_device"] == "cuda:0"
    decoupled = Candidate("s1-decoupled-w8", {"runner.name": "decoupled"})
    two_gpus = Machine(cpus=frozenset(range(8)), gpus=2)
    actors = [c.keys["runner.actor_device"] for c in placement_candidates(decoupled, two_gpus)]
    assert actors == ["cpu", "cuda:0", "cuda:1"]
    hogwild = Candidate("s1-hogwild-w8", {"runner.name": "hogwild"})
    assert placement_candidates(hogwild, two_gpus) == []
