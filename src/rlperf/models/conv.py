"""Convolutional torsos built from a filter spec with the meaning of RLlib's ``conv_filters``.

A spec is a list of ``[out_channels, [kh, kw], stride]``. Every layer but the last uses
TensorFlow-style 'same' padding (output = ceil(input / stride), zero padding split with the
extra pixel on the right/bottom); the last layer uses 'valid' padding. Every layer is
followed by the activation, as in RLlib's VisionNetwork.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

ConvSpec = Sequence[tuple[int, tuple[int, int], int] | list]


def same_padding(in_size: int, kernel: int, stride: int) -> tuple[int, int, int]:
    """(pad_before, pad_after, out_size) of TensorFlow 'same' padding along one axis."""
    out = math.ceil(in_size / stride)
    total = max((out - 1) * stride + kernel - in_size, 0)
    return total // 2, total - total // 2, out


def _parse(layer: tuple[int, tuple[int, int], int] | list) -> tuple[int, int, int, int]:
    out_ch, kernel, stride = layer
    kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
    return int(out_ch), int(kh), int(kw), int(stride)


def conv_output_shape(spec: ConvSpec, in_hw: tuple[int, int]) -> tuple[int, int, int]:
    """(channels, height, width) after the torso built from ``spec`` on an ``in_hw`` input."""
    h, w = in_hw
    channels = 0
    for i, layer in enumerate(spec):
        channels, kh, kw, stride = _parse(layer)
        if i < len(spec) - 1:
            h, w = same_padding(h, kh, stride)[2], same_padding(w, kw, stride)[2]
        else:
            h, w = (h - kh) // stride + 1, (w - kw) // stride + 1
        if h < 1 or w < 1:
            raise ValueError(f"conv spec {list(spec)} does not fit a {in_hw[0]}x{in_hw[1]} input")
    return channels, h, w


class InputScaledConv2d(nn.Conv2d):
    """A Conv2d that computes on ``input_scale * x`` by scaling its weight instead of ``x``.

    conv(s * x, W) = conv(x, s * W). Scaling the few thousand weights rather than every pixel
    of the batch saves a full pass over it, and lets raw uint8 frames go straight to the
    compute dtype (0..255 are exact in bf16 and fp16): 1.089x learner throughput on Pong in
    bf16 (docs/benchmarks.md). Parameters and state-dict keys are a Conv2d's, and the weight
    means what it meant when the input was scaled before the layer, so checkpoints and
    exports are unaffected. ``input_scale=None`` computes on ``x`` unchanged.

    ``zero_sum=True`` uses each filter's weight minus its mean (over input channels and
    kernel), so every filter sums to zero and answers a uniform region with its bias alone,
    however bright the region. On a frame with a uniform background (Pong's brown) the
    gradient moves all of a filter's weights alike, and Adam's equal-sized steps then shift
    its response on every background pixel at once: ReLU filters went negative everywhere and
    died. A zero-sum filter has no such common mode (weight centring, as in Qiao et al.
    2019's weight standardisation without its scaling).
    """

    def __init__(self, *args: Any, input_scale: float | None, zero_sum: bool = False) -> None:
        super().__init__(*args)
        self.input_scale = input_scale
        self.zero_sum = zero_sum

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = self.weight
        if self.zero_sum:
            weight = weight - weight.mean(dim=(1, 2, 3), keepdim=True)
        if self.input_scale is not None:
            weight = weight * self.input_scale
        return self._conv_forward(x, weight, self.bias)


def _conv(index: int, input_scale: float | None, zero_sum: bool, *args: Any) -> nn.Conv2d:
    """A torso's ``index``-th conv: the first one carries the input scaling and, with
    ``zero_sum``, the zero-sum constraint on its filters."""
    if index == 0:
        return InputScaledConv2d(*args, input_scale=input_scale, zero_sum=zero_sum)
    return nn.Conv2d(*args)


class ConvTorso(nn.Module):
    """The conv stack of ``spec`` followed by a flatten: uint8-free, expects float input.

    When the last ('valid') layer's kernel covers its whole input, its output is 1x1 and the
    layer is a dense layer over the flattened input. It is computed as exactly that
    (Flatten + Linear, the same parameters) because torch eager runs such a large-kernel conv
    several times slower (thesis model 1's 11x11 last layer: 2x at 84x84, ~9x at 252x252).
    The Linear's weight is the conv weight reshaped, so the parameter count is unchanged.
    ``input_scale`` (1/255 for frames) is folded into the first conv (:class:`InputScaledConv2d`).
    """

    def __init__(
        self,
        in_channels: int,
        in_hw: tuple[int, int],
        spec: ConvSpec,
        activation: type[nn.Module] = nn.ReLU,
        input_scale: float | None = None,
        zero_sum_first_layer: bool = False,
    ) -> None:
        super().__init__()
        conv_output_shape(spec, in_hw)  # raises ValueError when the spec does not fit
        layers: list[nn.Module] = []
        h, w = in_hw
        channels = in_channels

        for i, layer in enumerate(spec):
            out_ch, kh, kw, stride = _parse(layer)
            last = i == len(spec) - 1
            # The input scaling lives in the first conv, so a one-layer spec stays a conv.
            if last and i > 0 and (kh, kw) == (h, w):
                layers += [nn.Flatten(), nn.Linear(channels * h * w, out_ch), activation()]
                h = w = 1
            elif last:
                layers += [
                    _conv(i, input_scale, zero_sum_first_layer, channels, out_ch, (kh, kw), stride),
                    activation(),
                ]
                h, w = (h - kh) // stride + 1, (w - kw) // stride + 1
            else:
                top, bottom, h_out = same_padding(h, kh, stride)
                left, right, w_out = same_padding(w, kw, stride)
                if top or bottom or left or right:
                    layers.append(nn.ZeroPad2d((left, right, top, bottom)))
                layers += [
                    _conv(i, input_scale, zero_sum_first_layer, channels, out_ch, (kh, kw), stride),
                    activation(),
                ]
                h, w = h_out, w_out
            channels = out_ch
        if not isinstance(layers[-2], nn.Linear):
            layers.append(nn.Flatten())
        self.net = nn.Sequential(*layers)
        self.out_features = channels * h * w

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


NATURE_CNN: list = [[32, [8, 8], 4], [64, [4, 4], 2], [64, [3, 3], 1]]
NIPS_CNN: list = [[16, [8, 8], 4], [32, [4, 4], 2]]
"""The torso of the first DQN paper (Mnih et al. 2013, NIPS workshop), with a 256-unit layer."""


class NatureTorso(nn.Module):
    """The DQN Nature paper's torso (Mnih et al. 2015): 3 'valid' convs, then a 512-unit layer.

    ``convs`` and ``hidden`` give the same shape of network other sizes (``NIPS_CNN`` with
    256 units is the 2013 paper's). ``input_scale`` (1/255 for frames) is folded into the
    first conv (:class:`InputScaledConv2d`). ``layer_norm`` puts a LayerNorm over channels and
    positions after every conv and over the units after the dense layer, each before its
    activation (PQN's network).
    """

    def __init__(
        self,
        in_channels: int,
        in_hw: tuple[int, int],
        hidden: int = 512,
        input_scale: float | None = None,
        convs: ConvSpec = NATURE_CNN,
        activation: type[nn.Module] = nn.ReLU,
        zero_sum_first_layer: bool = False,
        layer_norm: bool = False,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        channels, (h, w) = in_channels, in_hw
        for i, (out_ch, (k, _), stride) in enumerate(convs):
            channels, h, w = out_ch, (h - k) // stride + 1, (w - k) // stride + 1
            layers.append(
                _conv(i, input_scale, zero_sum_first_layer, in_channels, out_ch, k, stride)
            )
            if layer_norm:
                layers.append(nn.LayerNorm([channels, h, w]))
            layers.append(activation())
            in_channels = out_ch
        layers += [nn.Flatten(), nn.Linear(channels * h * w, hidden)]
        if layer_norm:
            layers.append(nn.LayerNorm(hidden))
        self.net = nn.Sequential(*layers, activation())
        self.out_features = hidden

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)
