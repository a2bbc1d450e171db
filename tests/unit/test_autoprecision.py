"""runner.precision=auto: the fastest measured variant wins, bf16 only with a clear lead, the
figures are cached per machine and network, and the run's random streams are untouched."""

import json

import pytest
import torch
from torch import nn

from rlperf.config.schema import RunConfig
from rlperf.config.validate import validate
from rlperf.core.autoprecision import Variant, choose_precision, pick
from rlperf.core.errors import ConfigError

MACHINE = {"cpu": "Fake CPU", "isa": {"avx512_bf16": True}, "cores": 2}


def conv_net() -> nn.Module:
    return nn.Sequential(nn.Conv2d(4, 4, 3), nn.Flatten(), nn.Linear(4 * 6 * 6, 3))


def fake_timer(figures: dict[str, float], calls: list[str] | None = None):
    """A timer that returns fixed samples/s per variant (a fake: nothing is timed)."""

    def timer(module, obs, device, variant: Variant, seconds: float) -> float:
        if calls is not None:
            calls.append(variant.label)
        return figures[variant.label]

    return timer


OBS = torch.zeros(8, 4, 8, 8, dtype=torch.uint8)


def test_the_faster_variant_is_chosen_and_every_figure_recorded(tmp_path):
    calls: list[str] = []
    figures = {"fp32": 100.0, "fp32-cl": 150.0, "bf16": 120.0, "bf16-cl": 200.0}
    choice = choose_precision(
        conv_net(),
        OBS,
        torch.device("cpu"),
        MACHINE,
        timer=fake_timer(figures, calls),
        cache=tmp_path / "p.json",
    )
    assert (choice.precision, choice.channels_last) == ("bf16", True)
    assert choice.samples_per_s == figures
    assert choice.source == "measured" and choice.batch_size == 8
    assert sorted(set(calls)) == sorted(figures) and len(calls) == 3 * len(figures)

    slow_bf16 = {"fp32": 100.0, "fp32-cl": 150.0, "bf16": 60.0, "bf16-cl": 110.0}
    choice = choose_precision(
        conv_net(),
        OBS,
        torch.device("cpu"),
        {**MACHINE, "cpu": "Another CPU"},
        timer=fake_timer(slow_bf16),
        cache=tmp_path / "p.json",
    )
    assert (choice.precision, choice.channels_last) == ("fp32", True)
    assert choice.samples_per_s == slow_bf16


def test_bf16_needs_a_clear_lead_over_fp32():
    assert pick({"fp32": 100.0, "bf16": 103.0}) == Variant("fp32", False)
    assert pick({"fp32": 100.0, "bf16": 106.0}) == Variant("bf16", False)
    assert pick({"fp32": 100.0, "fp32-cl": 90.0, "bf16-cl": 101.0}) == Variant("fp32", False)


def test_a_cached_measurement_is_reused_on_the_same_machine_and_network(tmp_path):
    cache = tmp_path / "p.json"
    figures = {"fp32": 100.0, "fp32-cl": 90.0, "bf16": 300.0, "bf16-cl": 250.0}
    first = choose_precision(
        conv_net(), OBS, torch.device("cpu"), MACHINE, timer=fake_timer(figures), cache=cache
    )

    def must_not_time(*args):
        raise AssertionError("the cached figures should have been used")

    again = choose_precision(
        conv_net(), OBS, torch.device("cpu"), MACHINE, timer=must_not_time, cache=cache
    )
    assert again.source == "cache" and again.samples_per_s == figures
    assert (again.precision, again.channels_last) == (first.precision, first.channels_last)

    # Another network, another batch: measured afresh.
    calls: list[str] = []
    choose_precision(
        conv_net(),
        OBS[:4],
        torch.device("cpu"),
        MACHINE,
        timer=fake_timer(figures, calls),
        cache=cache,
    )
    assert calls
    assert len(json.loads(cache.read_text())) == 2


def test_remeasure_times_again_and_replaces_the_cached_figures(tmp_path):
    cache = tmp_path / "p.json"
    first_day = {"fp32": 100.0, "fp32-cl": 90.0, "bf16": 300.0, "bf16-cl": 250.0}
    slow_day = {"fp32": 60.0, "fp32-cl": 80.0, "bf16": 70.0, "bf16-cl": 75.0}
    device = torch.device("cpu")
    choose_precision(conv_net(), OBS, device, MACHINE, timer=fake_timer(first_day), cache=cache)
    again = choose_precision(
        conv_net(), OBS, device, MACHINE, timer=fake_timer(slow_day), cache=cache, remeasure=True
    )
    assert again.source == "measured" and again.samples_per_s == slow_day
    assert (again.precision, again.channels_last) == ("fp32", True)
    (entry,) = json.loads(cache.read_text()).values()
    assert entry["samples_per_s"] == slow_day  # the next run reads the new day's figures


def test_a_damaged_cache_is_measured_again(tmp_path):
    cache = tmp_path / "p.json"
    cache.write_text("{not json")
    figures = {"fp32": 100.0, "bf16": 50.0}
    mlp = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    choice = choose_precision(
        mlp,
        torch.zeros(16, 4),
        torch.device("cpu"),
        MACHINE,
        timer=fake_timer(figures),
        cache=cache,
    )
    assert choice.source == "measured" and set(choice.samples_per_s) == {"fp32", "bf16"}
    assert json.loads(cache.read_text())  # rewritten whole


def test_real_timing_leaves_the_network_and_the_random_streams_untouched(tmp_path):
    net = conv_net()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    obs = torch.rand(8, 4, 8, 8)
    torch.manual_seed(3)
    expected = torch.rand(3)
    torch.manual_seed(3)
    choice = choose_precision(
        net, obs, torch.device("cpu"), MACHINE, seconds=0.06, cache=tmp_path / "p.json"
    )
    assert torch.equal(torch.rand(3), expected)
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())
    assert set(choice.samples_per_s) == {"fp32", "fp32-cl", "bf16", "bf16-cl"}
    assert all(v > 0 for v in choice.samples_per_s.values())


def test_auto_is_refused_with_several_learners():
    cfg = RunConfig()
    cfg.runner.precision = "auto"
    validate(cfg)
    cfg.runner.num_learners = 2
    with pytest.raises(ConfigError, match="precision=auto"):
        validate(cfg)
    cfg.runner.num_learners, cfg.runner.precision = 1, "fp16"
    with pytest.raises(ConfigError, match="runner.precision must be one of fp32, bf16, auto"):
        validate(cfg)
