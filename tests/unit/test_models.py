"""Conv-spec shapes, the thesis's parameter counts, and the dense form of a full-size conv."""

import pytest
import torch
from torch import nn

from rlperf.config.schema import ModelConfig
from rlperf.core.errors import ConfigError
from rlperf.models.catalog import (
    MODELS,
    build_model,
    check_model_settings,
    count_parameters,
    resolve_model_name,
)
from rlperf.models.conv import ConvTorso, InputScaledConv2d, conv_output_shape, same_padding
from rlperf.models.policy import network_input, scale_gradient

# Table 3.1 of the thesis (Pong: 6 actions, 4 stacked frames, policy and value towers).
THESIS_PARAMS = {1: 2_009_447, 2: 2_034_023, 3: 1_108_359, 4: 2_042_279, 5: 4_254_119, 6: 7_252_327}


@pytest.mark.parametrize("n", sorted(THESIS_PARAMS))
def test_thesis_models_match_table_3_1(n):
    dim = MODELS[f"thesis-{n}"].input_dim
    model = build_model(ModelConfig(name=str(n)), (4, dim, dim), 6)
    assert count_parameters(model) == THESIS_PARAMS[n]
    logits, value = model(torch.zeros(3, 4, dim, dim, dtype=torch.uint8))
    assert logits.shape == (3, 6) and value.shape == (3,)


def test_same_padding_is_tensorflow_same():
    assert same_padding(84, 8, 4) == (2, 2, 21)
    assert same_padding(21, 4, 2) == (1, 2, 11)  # the extra pixel goes after
    assert same_padding(10, 1, 1) == (0, 0, 10)


@pytest.mark.parametrize(
    "spec,hw,expected",
    [
        ([[16, [8, 8], 4], [32, [4, 4], 2], [256, [11, 11], 1]], (84, 84), (256, 1, 1)),
        (
            [[16, [8, 8], 4], [16, [8, 8], 4], [32, [4, 4], 2], [256, [8, 8], 1]],
            (252, 252),
            (256, 1, 1),
        ),
        ([[16, [8, 8], 4], [32, [4, 4], 2], [64, [3, 3], 1]], (84, 84), (64, 9, 9)),
    ],
)
def test_conv_output_shape(spec, hw, expected):
    assert conv_output_shape(spec, hw) == expected
    torso = ConvTorso(4, hw, spec)
    out = torso(torch.zeros(2, 4, *hw))
    assert out.shape == (2, expected[0] * expected[1] * expected[2]) == (2, torso.out_features)


def test_full_size_last_conv_is_computed_as_an_identical_linear():
    torch.manual_seed(0)
    spec = [[8, [4, 4], 2], [16, [5, 5], 1]]  # 10x10 -> 5x5 -> 'valid' 5x5 = 1x1
    torso = ConvTorso(3, (10, 10), spec)
    linear = [m for m in torso.modules() if isinstance(m, nn.Linear)][0]
    conv = nn.Conv2d(8, 16, 5)
    with torch.no_grad():
        conv.weight.copy_(linear.weight.view(16, 8, 5, 5))
        conv.bias.copy_(linear.bias)
    x = torch.randn(2, 3, 10, 10)
    hidden = torso.net[:3](x)  # pad + conv + relu of the first layer
    torch.testing.assert_close(torso(x), torch.relu(conv(hidden)).flatten(1))


def test_spec_too_large_for_input_is_a_config_error():
    with pytest.raises(ConfigError, match="does not fit"):
        build_model(ModelConfig(name="thesis-6"), (4, 84, 84), 6)


def test_model_names():
    assert resolve_model_name("3") == "thesis-3"
    with pytest.raises(ConfigError, match="unknown model 'natur'.*did you mean nature"):
        resolve_model_name("natur")


def _set_input_scale(model: torch.nn.Module, scale: float | None) -> None:
    for layer in model.modules():
        if isinstance(layer, InputScaledConv2d):
            layer.input_scale = scale


@pytest.mark.parametrize("name", ["nature", "thesis-1"])
def test_uint8_scaling_happens_inside_the_model(name: str):
    dim = MODELS[name].input_dim or 84
    model = build_model(ModelConfig(name=name), (4, dim, dim), 6)
    raw = torch.randint(0, 256, (3, 4, dim, dim), dtype=torch.uint8)
    a = model(raw)[0]
    _set_input_scale(model, None)
    torch.testing.assert_close(a, model(raw.float() / 255)[0])


def test_folded_scaling_matches_scaling_the_input_before_the_first_conv():
    """conv(x, W/255) is conv(x/255, W): same outputs and same gradients for the weight."""
    torch.manual_seed(0)
    folded = InputScaledConv2d(4, 8, 3, 2, input_scale=1 / 255)
    plain = torch.nn.Conv2d(4, 8, 3, 2)
    plain.load_state_dict(folded.state_dict())  # the same keys and meaning
    x = torch.randint(0, 256, (2, 4, 12, 12), dtype=torch.uint8).float()
    folded(x).square().sum().backward()
    plain(x / 255).square().sum().backward()
    torch.testing.assert_close(folded.weight.grad, plain.weight.grad)
    torch.testing.assert_close(folded(x), plain(x / 255))


def test_frames_enter_the_first_layer_in_the_autocast_dtype():
    frames = torch.randint(0, 256, (2, 4, 8, 8), dtype=torch.uint8)
    assert network_input(frames).dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        x = network_input(frames)
    assert x.dtype == torch.bfloat16
    assert torch.equal(x.float(), frames.float())  # 0..255 are exact in bf16


def _first_layer_grad_when_all_below_zero(model: nn.Module, dim: int) -> torch.Tensor:
    first = next(m for m in model.modules() if isinstance(m, nn.Conv2d))
    with torch.no_grad():
        first.bias.fill_(-20.0)  # every first-layer unit below zero on every input
    logits, value = model(torch.full((2, 4, dim, dim), 90, dtype=torch.uint8))
    (logits.sum() + value.sum()).backward()
    return first.weight.grad


@pytest.mark.parametrize(("activation", "module"), [("elu", nn.ELU), ("leaky_relu", nn.LeakyReLU)])
@pytest.mark.parametrize(("name", "dim"), [("nips", 84), ("nature", 84), ("thesis-6", 168)])
def test_image_models_with_a_negative_side_keep_a_gradient_below_zero(
    name: str, dim: int, activation: str, module: type[nn.Module]
):
    # model.activation=elu or leaky_relu: the same layers, so a first-layer unit whose input
    # is negative on every frame (a uniform background drives all its pixels together) still
    # gets a gradient and can recover, where a ReLU unit is dead for good.
    relu = build_model(ModelConfig(name=name), (4, dim, dim), 6)
    other = build_model(ModelConfig(name=name, activation=activation), (4, dim, dim), 6)
    assert not any(type(m) is nn.ReLU for m in other.modules())
    assert sum(isinstance(m, module) for m in other.modules()) == sum(
        isinstance(m, nn.ReLU) for m in relu.modules()
    )
    assert count_parameters(other) == count_parameters(relu)
    assert _first_layer_grad_when_all_below_zero(relu, dim).abs().sum() == 0
    assert _first_layer_grad_when_all_below_zero(other, dim).abs().sum() > 0


def test_elu_is_refused_for_feature_models():
    with pytest.raises(ConfigError, match=r"model.activation=elu applies to the image models"):
        check_model_settings(ModelConfig(name="mlp", activation="elu"), "mlp")


@pytest.mark.parametrize(("name", "dim"), [("nips", 64), ("nature", 84), ("thesis-6", 168)])
def test_zero_sum_first_layer_answers_any_uniform_background_with_its_bias(name: str, dim: int):
    # model.zero_sum_first_layer: the same parameters, but each first-layer filter's weights
    # sum to zero, so a uniform frame gives the bias on every interior pixel, whatever its
    # brightness, and a gradient step cannot shift the whole background's response at once.
    plain = build_model(ModelConfig(name=name), (4, dim, dim), 6)
    zero_sum = build_model(ModelConfig(name=name, zero_sum_first_layer=True), (4, dim, dim), 6)
    zero_sum.load_state_dict(plain.state_dict())  # same keys, same shapes
    first, plain_first = (
        next(m for m in n.modules() if isinstance(m, nn.Conv2d)) for n in (zero_sum, plain)
    )
    with torch.no_grad():
        first.bias.copy_(torch.linspace(-1, 1, first.out_channels))
        plain_first.bias.copy_(first.bias)
    k = first.kernel_size[0]
    for level in (0, 90, 255):
        x = network_input(torch.full((1, 4, 3 * k, 3 * k), level, dtype=torch.uint8))
        out = first(x)
        torch.testing.assert_close(
            out, first.bias.view(1, -1, 1, 1).expand_as(out), atol=1e-5, rtol=0
        )
    dark, bright = (
        plain_first(network_input(torch.full((1, 4, 3 * k, 3 * k), v, dtype=torch.uint8)))
        for v in (0, 255)
    )
    assert (dark - bright).abs().max() > 0.1  # without the constraint the level shows
    # A frame with an object still reaches the policy, and the gradient flows to the weight.
    frames = torch.zeros(2, 4, dim, dim, dtype=torch.uint8)
    frames[:, :, dim // 2 : dim // 2 + 4, dim // 3 : dim // 3 + 2] = 236
    logits, value = zero_sum(frames)
    (logits.sum() + value.sum()).backward()
    assert first.weight.grad.abs().sum() > 0


def test_zero_sum_first_layer_is_refused_for_feature_models():
    with pytest.raises(
        ConfigError, match=r"model.zero_sum_first_layer applies to the image models"
    ):
        check_model_settings(ModelConfig(name="mlp", zero_sum_first_layer=True), "mlp")


def test_scale_gradient_keeps_the_value_and_scales_only_the_gradient():
    weights = torch.tensor([1.0, 2.0, 3.0])
    for scale in (0.0, 0.25, 1.0):
        x = torch.tensor([0.1, -3.0, 7.0], requires_grad=True)
        y = scale_gradient(x, scale)
        assert torch.equal(y, x.detach())
        # x itself in the loss too, so that the loss has a gradient at scale 0
        (y * weights + x).sum().backward()
        torch.testing.assert_close(x.grad, scale * weights + 1)


def _torso_grad_of_value_loss(scale: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    model = build_model(ModelConfig(name="nips", vf_torso_grad_scale=scale), (4, 64, 64), 6)
    frames = torch.randint(0, 256, (5, 4, 64, 64), dtype=torch.uint8)
    logits, value = model(frames)
    value.square().sum().backward()
    first = next(model.policy_torso.parameters())
    torso_grad = torch.zeros_like(first) if first.grad is None else first.grad.clone()
    return torso_grad, model.value_head.weight.grad.clone(), logits.detach()


def test_vf_torso_grad_scale_weighs_the_value_gradient_into_the_shared_torso():
    shared, head_shared, logits_shared = _torso_grad_of_value_loss(1.0)
    half, head_half, logits_half = _torso_grad_of_value_loss(0.5)
    detached, head_detached, _ = _torso_grad_of_value_loss(0.0)
    # The outputs and the value head's own gradient do not depend on the scale ...
    assert torch.equal(logits_shared, logits_half)
    torch.testing.assert_close(head_half, head_shared)
    torch.testing.assert_close(head_detached, head_shared)
    # ... the torso's share of the value gradient does.
    assert shared.abs().sum() > 0
    torch.testing.assert_close(half, 0.5 * shared)
    assert not detached.any()


def test_vf_torso_grad_scale_needs_a_shared_torso():
    check_model_settings(ModelConfig(name="nips", vf_torso_grad_scale=0.0), "nips")
    with pytest.raises(ConfigError, match=r"model.vf_torso_grad_scale applies to a shared"):
        check_model_settings(
            ModelConfig(name="nips", vf_share_layers=False, vf_torso_grad_scale=0.0), "nips"
        )


def test_hidden_sizes_sets_the_dense_layer_of_the_image_models_and_only_theirs():
    nips = build_model(ModelConfig(name="nips", hidden_sizes=[512]), (4, 64, 64), 6)
    assert nips.logits_head.weight.shape == (6, 512)  # the default nips layer has 256
    default = build_model(ModelConfig(name="nips"), (4, 64, 64), 6)
    assert default.logits_head.weight.shape == (6, 256)
    with pytest.raises(ConfigError, match=r"model.hidden_sizes for nips is one size"):
        check_model_settings(ModelConfig(name="nips", hidden_sizes=[256, 256]), "nips")
    with pytest.raises(
        ConfigError, match=r"applies to the mlp, nature and nips models, not thesis-1"
    ):
        check_model_settings(ModelConfig(name="thesis-1", hidden_sizes=[64]), "thesis-1")


def test_conv_channels_set_each_conv_of_the_image_models_and_only_theirs():
    nips = build_model(ModelConfig(name="nips", conv_channels=[32, 64]), (4, 64, 64), 6)
    convs = [m for m in nips.policy_torso.modules() if isinstance(m, nn.Conv2d)]
    assert [(c.out_channels, c.kernel_size, c.stride) for c in convs] == [
        (32, (8, 8), (4, 4)),
        (64, (4, 4), (2, 2)),
    ]  # the nips kernels and strides, twice its 16 and 32 channels
    with pytest.raises(ConfigError, match=r"model.conv_channels for nature is 3 positive"):
        check_model_settings(ModelConfig(name="nature", conv_channels=[32, 64]), "nature")
    with pytest.raises(ConfigError, match=r"applies to the nature and nips models, not mlp"):
        check_model_settings(ModelConfig(name="mlp", conv_channels=[8]), "mlp")
