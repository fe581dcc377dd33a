"""Add(A, B) [+ bias] feeding a layer norm -> trt_fastops.SkipLayerNorm.

Runs after the layer-norm rules, so it matches trt_fastops.LayerNorm (and, when
only SkipLayerNorm is requested, ONNX LayerNormalization). Inputs X, Skip, Scale,
B, Bias; outputs Y, Mean, InvStdDev (when the norm's were used) and Sum, which
takes over the Add's other consumers (the residual stream) when there are any.

A Linear bias added just before or after the residual Add, Add(Add(MatMul, bias),
skip) or Add(Add(a, b), bias), becomes the Bias input when nothing else uses the
inner sum.

check: X has the full shape, Skip equals it or broadcasts over leading dims only,
Bias is 1-D [cols], all of X's dtype; stash_type 1.
"""
from __future__ import annotations

import onnx_ir as ir
from onnxscript.rewriter._basics import MatchResult

from ._common import DOMAIN, NormRule, attr_float, attr_int, has_other_uses, norm_node_axis, rank_of, \
    require_float_dtype, shape_of
from ._skip import plan_skip

RULE = "skip_layer_norm"
OP = "SkipLayerNorm"


class SkipLayerNormFusion(NormRule):
    RULE = RULE
    OP = OP
    STAGE = 1

    def __init__(self, *, onnx_op: bool, num_outputs: int) -> None:
        super().__init__(f"{'LayerNormalization' if onnx_op else 'LayerNorm'}:{num_outputs}_outputs",
                         size=num_outputs)
        self.onnx_op, self.num_outputs = onnx_op, num_outputs

    def pattern(self, op, a, b, scale):
        s = op.Add(a, b, _outputs=["s"])
        names = ["y", "mean", "inv_std_dev"][: self.num_outputs]
        if self.onnx_op:
            y = op.LayerNormalization(s, scale, _allow_other_inputs=True, _outputs=names)
        else:
            y = op.LayerNorm(s, scale, _domain=DOMAIN, _allow_other_inputs=True, _outputs=names)
        outs = list(y) if self.num_outputs > 1 else [y]
        return (*outs, s)

    def check(self, context, s: ir.Value, y: ir.Value, **_) -> MatchResult:
        result = MatchResult()
        ln = y.producer()
        require_float_dtype(s, "X")
        axis = norm_node_axis(ln, rank_of(s, "the sum"), "SkipLayerNorm")
        self._plan = plan_skip(s.producer(), shape_of(s), axis)
        if self._plan.absorbed is not None:
            self.absorb(self._plan.absorbed)
        return result

    def rewrite(self, op, s: ir.Value, y: ir.Value, **_):
        ln = y.producer()
        plan = self._plan
        beta = ln.inputs[2] if len(ln.inputs) > 2 else None
        self.note(sum_output=has_other_uses(s, ln), bias=plan.bias is not None, shapes_assumed=plan.assumed)
        outs = self.emit(op, OP, [plan.x, plan.skip, ln.inputs[1], beta, plan.bias], 4,
                         axis=attr_int(ln, "axis", -1), epsilon=attr_float(ln, "epsilon", 1e-5))
        y_new, mean, inv, total = outs
        return (y_new, mean, inv, total) if self.num_outputs == 3 else (y_new, total)


def rules():
    # Only the 3- and 1-output forms: a 2-output norm matches the 1-output pattern and
    # is refused if its Mean is used.
    return [SkipLayerNormFusion.rule(onnx_op=o, num_outputs=n) for o in (False, True) for n in (3, 1)]
