"""Source 004's config.yaml keys are read as rlperf config; bad ones are one-line errors."""

import pytest

from rlperf.config.load import apply_dict, load_preset
from rlperf.config.rnd_keys import translate_rnd_keys
from rlperf.config.schema import RunConfig
from rlperf.core.errors import ConfigError

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny networks


def _config(data):
    cfg = RunConfig()
    apply_dict(cfg, translate_rnd_keys(data, "test"), "test")
    return cfg


def test_004_keys_map_to_rlperf_keys():
    cfg = _config(
        {
            "EnvName": "MontezumaRevengeNoFrameskip-v4",
            "MaxStepsPerEpisode": 4500,
            "ImageHeight": 84,
            "ImageWidth": 84,
            "UseStickyAction": True,
            "StickyActionProb": 0.25,
            "NumWorkers": 128,
            "RolloutSteps": 128,
            "NumInitSteps": 1024,
            "ExtRewardDiscount": 0.999,
            "IntRewardDiscount": 0.99,
            "ExtCoeff": 0.0,
            "IntCoeff": 1.0,
            "LearningRate": 0.0001,
            "ClipGradNorm": 10.0,
            "BatchSize": 4096,
            "EpochSteps": 4,
            "NumEpochs": 10000,
            "RNDUpdateProportion": 0.25,
            "PPOEntropyCoeff": 0.001,
            "PPORewardEps": 0.1,
            "PPOAdvLambda": 0.95,
            "UseVTraceCorrection": False,
            "SavePath": "ignored.ckpt",
            "UseTPU": False,
            "algo": "rnd",
        }
    )
    assert cfg.algo == "rnd" and cfg.env.id == "ALE/MontezumaRevenge-v5"
    assert (cfg.env.num_envs, cfg.env.dim, cfg.env.max_episode_steps) == (128, 84, 4500)
    assert cfg.env.repeat_action_probability == 0.25
    r = cfg.rnd
    assert (r.num_steps, r.num_init_steps, r.update_epochs) == (128, 1024, 4)
    assert (r.minibatch_size, r.num_minibatches) == (4096, None)
    assert (r.gamma, r.int_gamma, r.ext_coef, r.int_coef) == (0.999, 0.99, 0.0, 1.0)
    assert (r.learning_rate, r.max_grad_norm, r.update_proportion) == (1e-4, 10.0, 0.25)
    assert (r.ent_coef, r.clip_coef, r.gae_lambda, r.vtrace) == (0.001, 0.1, 0.95, False)
    assert cfg.stop.iterations == 10000


def test_sticky_actions_off():
    cfg = _config({"UseStickyAction": False, "StickyActionProb": 0.25})
    assert cfg.env.repeat_action_probability == 0.0


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ({"NumWorker": 8}, "did you mean NumWorkers"),
        ({"ImageHeight": 84, "ImageWidth": 96}, "square"),
        ({"UseVTraceCorrection": "maybe"}, "true or false"),
    ],
)
def test_bad_004_keys_are_one_line_errors(data, needle):
    with pytest.raises(ConfigError, match=needle) as info:
        _config(data)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("name", ["rnd-montezuma", "rnd-montezuma-small"])
def test_presets_load(name):
    cfg = RunConfig()
    apply_dict(cfg, load_preset(name), name)
    assert cfg.algo == "rnd" and cfg.env.id == "ALE/MontezumaRevenge-v5"
    assert cfg.env.repeat_action_probability == 0.25 and cfg.env.max_episode_steps == 4500
    assert cfg.env.full_action_space and not cfg.env.episodic_life
    expected_envs = 128 if name == "rnd-montezuma" else 8
    assert cfg.env.num_envs == expected_envs
