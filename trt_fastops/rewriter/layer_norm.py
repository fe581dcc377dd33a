"""ONNX LayerNormalization (opset 17) -> trt_fastops.LayerNorm.

Same inputs (X, Scale, optional B), attributes (axis, epsilon, stash_type) and
outputs (Y, optional Mean and InvStdDev, kept when something uses them).
"""
from __future__ import annotations

import onnx_ir as ir
from onnxscript.rewriter._basics import MatchResult

from ._common import (NormRule, attr_float, attr_int, norm_node_axis, rank_of, require_float_dtype,
                      require_same_dtype)

RULE = "layer_norm"
OP = "LayerNorm"


class LayerNormalizationToLayerNorm(NormRule):
    RULE = RULE
    OP = OP

    def __init__(self, num_outputs: int) -> None:
        super().__init__(f"{num_outputs}_outputs", size=num_outputs)
        self.num_outputs = num_outputs

    def pattern(self, op, x, scale):
        names = ["y", "mean", "inv_std_dev"][: self.num_outputs]
        # B is optional: allow a third input and read it from the node.
        return op.LayerNormalization(x, scale, _allow_other_inputs=True, _outputs=names)

    def check(self, context, x: ir.Value, scale: ir.Value, y: ir.Value, **_) -> MatchResult:
        result = MatchResult()
        node = y.producer()
        dt = require_float_dtype(x, "X")
        require_same_dtype(scale, dt, "Scale")
        if len(node.inputs) > 2 and node.inputs[2] is not None:
            require_same_dtype(node.inputs[2], dt, "B")
        norm_node_axis(node, rank_of(x, "X"), "LayerNorm")
        return result

    def rewrite(self, op, x: ir.Value, scale: ir.Value, y: ir.Value, **_):
        node = y.producer()
        bias = node.inputs[2] if len(node.inputs) > 2 else None
        outs = self.emit(op, OP, [x, scale, bias], self.num_outputs,
                         axis=attr_int(node, "axis", -1), epsilon=attr_float(node, "epsilon", 1e-5),
                         stash_type=1)
        return outs


def rules():
    # Most outputs first: a node whose Mean/InvStdDev are used must match a pattern that
    # returns them (the 1-output pattern would refuse it as "intermediate value used").
    return [LayerNormalizationToLayerNorm.rule(n) for n in (3, 2, 1)]
