"""ONNX ConvTranspose (+ a following activation) -> trt_fastops.ConvTranspose.

The same rule as conv.py (policy, checks, activation folding) for ConvTranspose;
output_padding and output_shape are copied as well.
"""
from __future__ import annotations

from . import conv

RULE = "conv_transpose"
OP = "ConvTranspose"


class ConvTransposeFusion(conv.ConvFusion):
    RULE = RULE
    OP = OP
    ONNX_OP = "ConvTranspose"
    ATTRS = conv.TRANSPOSE_ATTRS


def rules():
    return conv.rules(ConvTransposeFusion)
