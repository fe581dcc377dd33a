"""Add(A, B) [+ bias] feeding trt_fastops.RMSNorm -> trt_fastops.RMSNorm with Skip.

Inputs X, Scale, Skip, Bias; outputs Y and Sum (which takes over the Add's other
consumers, the residual stream, when there are any). Runs after the RMS-norm rules.
The X/Skip/Bias choice and its checks are the ones of skip_layer_norm.
"""
from __future__ import annotations

import onnx_ir as ir
from onnxscript.rewriter._basics import MatchResult

from ._common import DOMAIN, NormRule, attr_float, attr_int, has_other_uses, norm_node_axis, rank_of, \
    require_float_dtype, shape_of
from ._skip import plan_skip

RULE = "skip_rms_norm"
OP = "RMSNorm"


class SkipRMSNormFusion(NormRule):
    RULE = RULE
    OP = OP
    STAGE = 1

    def __init__(self) -> None:
        super().__init__("", size=1)

    def pattern(self, op, a, b, scale):
        s = op.Add(a, b, _outputs=["s"])
        # exactly (X, Scale): an RMSNorm that already has a Skip does not match
        y = op.RMSNorm(s, scale, _domain=DOMAIN, _outputs=["y"])
        return y, s

    def check(self, context, s: ir.Value, y: ir.Value, **_) -> MatchResult:
        result = MatchResult()
        node = y.producer()
        require_float_dtype(s, "X")
        axis = norm_node_axis(node, rank_of(s, "the sum"), "RMSNorm")
        self._plan = plan_skip(s.producer(), shape_of(s), axis)
        if self._plan.absorbed is not None:
            self.absorb(self._plan.absorbed)
        return result

    def rewrite(self, op, s: ir.Value, y: ir.Value, scale: ir.Value, **_):
        node = y.producer()
        plan = self._plan
        self.note(sum_output=has_other_uses(s, node), bias=plan.bias is not None, shapes_assumed=plan.assumed)
        y_new, total = self.emit(op, OP, [plan.x, scale, plan.skip, plan.bias], 2,
                                 axis=attr_int(node, "axis", -1), epsilon=attr_float(node, "epsilon", 1e-5),
                                 stash_type=1)
        return y_new, total


def rules():
    return [SkipRMSNormFusion.rule()]
