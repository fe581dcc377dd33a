"""Small convolutional networks in the op patterns exporters produce.

torch.onnx.export (eval mode) writes every Conv with all of dilations, group,
kernel_shape, pads and strides, batch norm already folded into the conv weights
and bias, and activations as separate nodes: Relu, Clip(0, 6) for ReLU6,
Mul(x, Sigmoid(x)) for SiLU, the erf form of GELU below opset 20 (Gelu from 20).
Older TensorFlow/Keras converters write auto_pad="SAME_UPPER" instead of pads.

* resnet(...)        ResNet-style: 7x7/2 stem, max pool, basic blocks with residual
                     Adds and 1x1/2 downsampling convs, global pool, Gemm head.
* resnet_bottleneck(...)  ResNet-50-style (torchvision v1.5): 1x1 -> 3x3 (stride here) -> 1x1
                     bottlenecks with 4x expansion and 1x1 projection shortcuts;
                     resnet_bottleneck(blocks=(3, 4, 6, 3), width=64, size=224) is ResNet-50.
* regnet(...)        RegNet-style bottlenecks with grouped 3x3 convs (group widths
                     8 and 4: the second is a fallback case).
* mobilenet(...)     MobileNetV2 inverted residuals: 1x1 expand, ReLU6 (Clip),
                     depthwise 3x3, 1x1 project, residual Add.
* efficientnet(...)  EfficientNet-style, TF-exported: SiLU, depthwise convs with a
                     channel multiplier, auto_pad=SAME_UPPER (asymmetric at stride 2).
* convnext(...)      ConvNeXt-style: depthwise 7x7, 1x1 expand, GELU (erf form, or the
                     Gelu op at opset 20), 1x1 project, residual Add.
* conv1d(...)        1-D: wav2vec-style strided feature extractor with GELU, then a
                     WaveNet-style causal dilated stack (asymmetric pads [2d, 0]).
* conv3d(...)        3-D: conv + Relu, a dilated 3-D conv, a grouped 3-D conv and a
                     ConvTranspose 3-D upsampling (stride 2, output_padding 1).
* unet(...)          2-D encoder/decoder: strided convs down, ConvTranspose up
                     (k2 s2, and k3 s2 p1 output_padding 1), skip Concats.

Input "pixel_values" (or "input_values" / "volume"), output "logits" or "output";
seeded random weights (He init, so activations neither vanish nor explode).
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import onnx

from ._graph import GraphBuilder


# ---------------------------------------------------------------------------
# building blocks
# ---------------------------------------------------------------------------
def conv(g: GraphBuilder, x: str, c_in: int, c_out: int, k: Sequence[int] | int, name: str, *, stride=1,
         pad=None, dilation=1, group: int = 1, bias: bool = True, auto_pad: str | None = None,
         spatial: int = 2, transpose: bool = False, output_padding=None, gain: float = 1.0) -> str:
    """A Conv (or ConvTranspose) node the way torch.onnx.export writes it; weights named `name`.weight/.bias.
    gain scales the He-init weights (< 1 on a residual branch keeps deep nets' activations bounded)."""
    ks = [k] * spatial if isinstance(k, int) else list(k)
    strides = [stride] * spatial if isinstance(stride, int) else list(stride)
    dil = [dilation] * spatial if isinstance(dilation, int) else list(dilation)
    if pad is None:
        pads = [d * (kk - 1) // 2 for kk, d in zip(ks, dil)] * 2
    elif isinstance(pad, int):
        pads = [pad] * (2 * spatial)
    else:
        pads = list(pad)
    fan_in = (c_in // group) * int(np.prod(ks))
    w_shape = [c_in, c_out // group, *ks] if transpose else [c_out, c_in // group, *ks]
    w = g.weight(f"{name}.weight", w_shape, std=gain * math.sqrt(2.0 / fan_in))
    inputs = [x, w]
    if bias:
        inputs.append(g.weight(f"{name}.bias", (c_out,), std=0.05))
    attrs = dict(dilations=dil, group=group, kernel_shape=ks, strides=strides)
    if auto_pad:
        attrs["auto_pad"] = auto_pad
    else:
        attrs["pads"] = pads
    if transpose and output_padding is not None:
        attrs["output_padding"] = [output_padding] * spatial if isinstance(output_padding, int) else list(output_padding)
    with g.scope(name.rsplit(".", 1)[-1]):
        return g.node("ConvTranspose" if transpose else "Conv", inputs, **attrs)


def relu(g: GraphBuilder, x: str) -> str:
    return g.node("Relu", [x])


def relu6(g: GraphBuilder, x: str) -> str:
    return g.node("Clip", [x, g.const(0.0), g.const(6.0)])


def silu(g: GraphBuilder, x: str) -> str:
    return g.node("Mul", [x, g.node("Sigmoid", [x])])


def gelu(g: GraphBuilder, x: str, *, op: bool = False) -> str:
    if op:
        return g.node("Gelu", [x])
    # torch: x * 0.5 * (1 + erf(x / sqrt(2))) as Mul(Mul(x, Add(Erf(Div(x, sqrt2)), 1)), 0.5)
    e = g.node("Erf", [g.node("Div", [x, g.const(math.sqrt(2.0))])])
    return g.node("Mul", [g.node("Mul", [x, g.node("Add", [e, g.const(1.0)])]), g.const(0.5)])


def head(g: GraphBuilder, x: str, channels: int, classes: int, out_name: str = "logits") -> str:
    with g.scope("head"):
        p = g.node("GlobalAveragePool", [x])
        f = g.node("Flatten", [p], axis=1)
        w = g.weight("fc.weight", (classes, channels), std=1.0 / math.sqrt(channels))
        b = g.weight("fc.bias", (classes,), std=0.05)
        return g.node("Gemm", [f, w, b], transB=1)


def _finish(g: GraphBuilder, y: str, out_name: str, shape, opset: int, doc: str) -> onnx.ModelProto:
    g.output(y, out_name, g.onnx_dtype, list(shape))
    return g.model(opset, doc=doc)


# ---------------------------------------------------------------------------
# the networks
# ---------------------------------------------------------------------------
def resnet(*, dtype: str = "float32", seed: int = 0, batch: int = 2, size: int = 32, widths=(8, 16, 32),
           classes: int = 10, opset: int = 17) -> onnx.ModelProto:
    g = GraphBuilder("resnet", dtype=dtype, seed=seed)
    x = g.input("pixel_values", g.onnx_dtype, [batch, 3, size, size])
    with g.scope("conv1"):
        y = relu(g, conv(g, x, 3, widths[0], 7, "conv1", stride=2, pad=3))
    with g.scope("maxpool"):
        y = g.node("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c = widths[0]
    for li, w in enumerate(widths):
        stride = 1 if li == 0 else 2
        name = f"layer{li + 1}.0"
        with g.scope(f"layer{li + 1}"), g.scope(name):
            h = relu(g, conv(g, y, c, w, 3, f"{name}.conv1", stride=stride))
            h = conv(g, h, w, w, 3, f"{name}.conv2")
            skip = y
            if stride != 1 or c != w:
                with g.scope("downsample"):
                    skip = conv(g, y, c, w, 1, f"{name}.downsample.0", stride=stride, pad=0)
            y = relu(g, g.node("Add", [h, skip]))
        c = w
    logits = head(g, y, c, classes)
    return _finish(g, logits, "logits", [batch, classes], opset,
                   "ResNet-style CNN (basic blocks, folded batch norm)")


def resnet_bottleneck(*, dtype: str = "float32", seed: int = 0, batch: int = 2, size: int = 32,
                      blocks: Sequence[int] = (1, 1, 1, 1), width: int = 8, classes: int = 10,
                      opset: int = 17) -> onnx.ModelProto:
    """ResNet-50-style network: 7x7/2 stem + 3x3/2 max pool, then one stage per entry of
    `blocks` with that many bottlenecks (1x1 reduce, 3x3 with the stage's stride, 1x1 expand
    to 4x, residual Add + Relu; the first block of a stage projects its shortcut with a 1x1
    conv), global pool, Gemm head. blocks=(3, 4, 6, 3), width=64, size=224, classes=1000 is
    ResNet-50 (25.6M parameters, 4.1 GFLOPs per 224x224 image)."""
    g = GraphBuilder("resnet_bottleneck", dtype=dtype, seed=seed)
    x = g.input("pixel_values", g.onnx_dtype, [batch, 3, size, size])
    with g.scope("conv1"):
        y = relu(g, conv(g, x, 3, width, 7, "conv1", stride=2, pad=3))
    with g.scope("maxpool"):
        y = g.node("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c = width
    for si, n in enumerate(blocks):
        mid = width * 2 ** si
        out = 4 * mid
        for bi in range(n):
            stride = 2 if si > 0 and bi == 0 else 1
            name = f"layer{si + 1}.{bi}"
            with g.scope(f"layer{si + 1}"), g.scope(name):
                h = relu(g, conv(g, y, c, mid, 1, f"{name}.conv1", pad=0))
                h = relu(g, conv(g, h, mid, mid, 3, f"{name}.conv2", stride=stride))
                # gain 0.5: the residual stream grows by 1.25x in variance per block, not 2x (no batch
                # norm here to rescale it; 16 blocks would otherwise reach float16's range)
                h = conv(g, h, mid, out, 1, f"{name}.conv3", pad=0, gain=0.5)
                skip = y
                if stride != 1 or c != out:
                    with g.scope("downsample"):
                        skip = conv(g, y, c, out, 1, f"{name}.downsample.0", stride=stride, pad=0)
                y = relu(g, g.node("Add", [h, skip]))
            c = out
    logits = head(g, y, c, classes)
    return _finish(g, logits, "logits", [batch, classes], opset,
                   f"ResNet-style CNN, bottleneck blocks {tuple(blocks)}, width {width} (folded batch norm)")


def regnet(*, dtype: str = "float32", seed: int = 0, batch: int = 2, size: int = 32, classes: int = 10,
           opset: int = 17) -> onnx.ModelProto:
    """Bottleneck blocks with grouped 3x3 convs: stage 1 group width 8 (cuDNN-friendly),
    stage 2 group width 4 (not a multiple of 8: a conv="fallback" case)."""
    g = GraphBuilder("regnet", dtype=dtype, seed=seed)
    x = g.input("pixel_values", g.onnx_dtype, [batch, 3, size, size])
    with g.scope("stem"):
        y = relu(g, conv(g, x, 3, 16, 3, "stem.conv", stride=2))
    c = 16
    for si, (w, group_width, stride) in enumerate([(32, 8, 2), (48, 4, 2)]):
        name = f"s{si + 1}.b1"
        with g.scope(f"s{si + 1}"), g.scope("b1"):
            h = relu(g, conv(g, y, c, w, 1, f"{name}.a", pad=0))
            h = relu(g, conv(g, h, w, w, 3, f"{name}.b", stride=stride, group=w // group_width))
            h = conv(g, h, w, w, 1, f"{name}.c", pad=0)
            with g.scope("proj"):
                skip = conv(g, y, c, w, 1, f"{name}.proj", stride=stride, pad=0)
            y = relu(g, g.node("Add", [h, skip]))
        c = w
    logits = head(g, y, c, classes)
    return _finish(g, logits, "logits", [batch, classes], opset, "RegNet-style CNN (grouped bottlenecks)")


def mobilenet(*, dtype: str = "float32", seed: int = 0, batch: int = 2, size: int = 32, classes: int = 10,
              opset: int = 17) -> onnx.ModelProto:
    g = GraphBuilder("mobilenet", dtype=dtype, seed=seed)
    x = g.input("pixel_values", g.onnx_dtype, [batch, 3, size, size])
    with g.scope("features.0"):
        y = relu6(g, conv(g, x, 3, 16, 3, "features.0.0", stride=2))
    c = 16
    for bi, (out, expand, stride) in enumerate([(16, 4, 1), (24, 4, 2), (24, 4, 1)]):
        name = f"features.{bi + 1}"
        hidden = c * expand
        with g.scope(name):
            h = relu6(g, conv(g, y, c, hidden, 1, f"{name}.conv.0", pad=0))
            h = relu6(g, conv(g, h, hidden, hidden, 3, f"{name}.conv.1", stride=stride, group=hidden))
            h = conv(g, h, hidden, out, 1, f"{name}.conv.2", pad=0)
            y = g.node("Add", [y, h]) if stride == 1 and c == out else h
        c = out
    logits = head(g, y, c, classes)
    return _finish(g, logits, "logits", [batch, classes], opset, "MobileNetV2-style CNN (ReLU6, depthwise)")


def efficientnet(*, dtype: str = "float32", seed: int = 0, batch: int = 2, size: int = 32, classes: int = 10,
                 opset: int = 17) -> onnx.ModelProto:
    """TF-exported style: auto_pad=SAME_UPPER everywhere, SiLU, a depthwise conv with
    channel multiplier 2 and depthwise convs at stride 2 (asymmetric SAME pads)."""
    g = GraphBuilder("efficientnet", dtype=dtype, seed=seed)
    x = g.input("pixel_values", g.onnx_dtype, [batch, 3, size, size])
    with g.scope("stem"):
        y = silu(g, conv(g, x, 3, 16, 3, "stem.conv", stride=2, auto_pad="SAME_UPPER"))
    with g.scope("block1"):  # depthwise with channel multiplier 2
        h = silu(g, conv(g, y, 16, 32, 3, "block1.dw", group=16, auto_pad="SAME_UPPER"))
        y = conv(g, h, 32, 16, 1, "block1.project", auto_pad="SAME_UPPER")
    with g.scope("block2"):  # expand, depthwise 5x5 stride 2 (asymmetric), project
        h = silu(g, conv(g, y, 16, 64, 1, "block2.expand", auto_pad="SAME_UPPER"))
        h = silu(g, conv(g, h, 64, 64, 5, "block2.dw", stride=2, group=64, auto_pad="SAME_UPPER"))
        y = conv(g, h, 64, 24, 1, "block2.project", auto_pad="SAME_UPPER")
    with g.scope("block3"):  # residual, depthwise 3x3 stride 1 (symmetric)
        h = silu(g, conv(g, y, 24, 96, 1, "block3.expand", auto_pad="SAME_UPPER"))
        h = silu(g, conv(g, h, 96, 96, 3, "block3.dw", group=96, auto_pad="SAME_UPPER"))
        h = conv(g, h, 96, 24, 1, "block3.project", auto_pad="SAME_UPPER")
        y = g.node("Add", [y, h])
    logits = head(g, y, 24, classes)
    return _finish(g, logits, "logits", [batch, classes], opset,
                   "EfficientNet-style CNN (TF export: auto_pad SAME_UPPER, SiLU, depthwise multiplier)")


def convnext(*, dtype: str = "float32", seed: int = 0, batch: int = 2, size: int = 32, classes: int = 10,
             opset: int = 17) -> onnx.ModelProto:
    """Depthwise 7x7 (pad 3) -> 1x1 expand -> GELU -> 1x1 project -> residual Add.
    GELU is the erf form below opset 20 and the Gelu op from 20."""
    g = GraphBuilder("convnext", dtype=dtype, seed=seed)
    x = g.input("pixel_values", g.onnx_dtype, [batch, 3, size, size])
    with g.scope("stem"):
        y = conv(g, x, 3, 24, 4, "stem.0", stride=4, pad=0)
    for bi in range(2):
        name = f"stages.0.{bi}"
        with g.scope(name):
            h = conv(g, y, 24, 24, 7, f"{name}.dwconv", group=24)
            h = gelu(g, conv(g, h, 24, 96, 1, f"{name}.pwconv1", pad=0), op=opset >= 20)
            h = conv(g, h, 96, 24, 1, f"{name}.pwconv2", pad=0)
            y = g.node("Add", [y, h])
    logits = head(g, y, 24, classes)
    return _finish(g, logits, "logits", [batch, classes], opset, "ConvNeXt-style CNN (depthwise 7x7, GELU)")


def conv1d(*, dtype: str = "float32", seed: int = 0, batch: int = 2, length: int = 400, opset: int = 17) -> onnx.ModelProto:
    g = GraphBuilder("conv1d", dtype=dtype, seed=seed)
    x = g.input("input_values", g.onnx_dtype, [batch, 1, length])
    # wav2vec-style feature extractor: strided convs without padding, GELU
    c = 1
    y = x
    for i, (w, k, s) in enumerate([(16, 10, 5), (16, 3, 2), (24, 2, 2)]):
        name = f"feature_extractor.conv_layers.{i}"
        with g.scope(name):
            y = gelu(g, conv(g, y, c, w, k, f"{name}.conv", stride=s, pad=0, spatial=1, bias=False))
        c = w
    # WaveNet-style causal dilated convs: left padding only (asymmetric pads)
    for i, d in enumerate([1, 2, 4]):
        name = f"wavenet.{i}"
        with g.scope(name):
            h = relu(g, conv(g, y, c, c, 3, f"{name}.dilated", pad=[2 * d, 0], dilation=d, spatial=1))
            y = g.node("Add", [y, h])
    with g.scope("out"):
        out = conv(g, y, c, 8, 1, "out.conv", pad=0, spatial=1)
    n_out = length
    for k, s in [(10, 5), (3, 2), (2, 2)]:
        n_out = (n_out - k) // s + 1
    return _finish(g, out, "output", [batch, 8, n_out], opset,
                   "1-D CNN (strided feature extractor with GELU, causal dilated stack)")


def conv3d(*, dtype: str = "float32", seed: int = 0, batch: int = 1, depth: int = 8, size: int = 12,
           opset: int = 17) -> onnx.ModelProto:
    g = GraphBuilder("conv3d", dtype=dtype, seed=seed)
    x = g.input("volume", g.onnx_dtype, [batch, 2, depth, size, size])
    with g.scope("enc1"):
        y = relu(g, conv(g, x, 2, 8, 3, "enc1.conv", spatial=3))
    with g.scope("enc2"):  # dilated 3-D: a fallback case
        y = relu(g, conv(g, y, 8, 8, 3, "enc2.conv", dilation=2, spatial=3))
    with g.scope("enc3"):  # strided and grouped (8 channels per group)
        y = relu(g, conv(g, y, 8, 16, 3, "enc3.conv", stride=2, group=1, spatial=3))
        y = relu(g, conv(g, y, 16, 16, 3, "enc3.grouped", group=2, spatial=3))
    with g.scope("up"):  # k3 s2 p1 output_padding 1: exact 2x upsampling
        y = relu(g, conv(g, y, 16, 8, 3, "up.deconv", stride=2, pad=1, output_padding=1, spatial=3,
                         transpose=True))
    with g.scope("out"):
        out = conv(g, y, 8, 3, 1, "out.conv", pad=0, spatial=3)
    return _finish(g, out, "output", [batch, 3, depth, size, size], opset,
                   "3-D CNN (dilated, grouped, ConvTranspose upsampling)")


def unet(*, dtype: str = "float32", seed: int = 0, batch: int = 2, size: int = 16, opset: int = 17) -> onnx.ModelProto:
    g = GraphBuilder("unet", dtype=dtype, seed=seed)
    x = g.input("pixel_values", g.onnx_dtype, [batch, 3, size, size])
    with g.scope("down1"):
        d1 = relu(g, conv(g, x, 3, 8, 3, "down1.conv"))
    with g.scope("down2"):
        d2 = relu(g, conv(g, d1, 8, 16, 3, "down2.conv", stride=2))
    with g.scope("down3"):
        d3 = relu(g, conv(g, d2, 16, 32, 3, "down3.conv", stride=2))
    with g.scope("up2"):  # torch ConvTranspose2d(32, 16, 2, stride=2)
        u2 = conv(g, d3, 32, 16, 2, "up2.deconv", stride=2, pad=0, transpose=True)
        u2 = relu(g, conv(g, g.node("Concat", [u2, d2], axis=1), 32, 16, 3, "up2.conv"))
    with g.scope("up1"):  # ConvTranspose2d(16, 8, 3, stride=2, padding=1, output_padding=1), grouped
        u1 = conv(g, u2, 16, 8, 3, "up1.deconv", stride=2, pad=1, output_padding=1, group=2, transpose=True)
        u1 = relu(g, conv(g, g.node("Concat", [u1, d1], axis=1), 16, 8, 3, "up1.conv"))
    with g.scope("out"):
        out = conv(g, u1, 8, 2, 1, "out.conv", pad=0)
    return _finish(g, out, "output", [batch, 2, size, size], opset, "U-Net-style encoder/decoder (ConvTranspose)")
