"""ONNX RMSNormalization (opset 23) -> trt_fastops.RMSNorm (X, Scale; axis, epsilon, stash_type)."""
from __future__ import annotations

import onnx_ir as ir
from onnxscript.rewriter._basics import MatchResult

from ._common import NormRule, attr_float, attr_int, norm_node_axis, rank_of, require_float_dtype, require_same_dtype

RULE = "rms_norm"
OP = "RMSNorm"


class RMSNormalizationToRMSNorm(NormRule):
    RULE = RULE
    OP = OP

    def pattern(self, op, x, scale):
        return op.RMSNormalization(x, scale, _outputs=["y"])

    def check(self, context, x: ir.Value, scale: ir.Value, y: ir.Value, **_) -> MatchResult:
        result = MatchResult()
        node = y.producer()
        dt = require_float_dtype(x, "X")
        require_same_dtype(scale, dt, "Scale")
        norm_node_axis(node, rank_of(x, "X"), "RMSNorm")
        return result

    def rewrite(self, op, x: ir.Value, scale: ir.Value, y: ir.Value, **_):
        node = y.producer()
        return self.emit(op, OP, [x, scale], 1, axis=attr_int(node, "axis", -1),
                         epsilon=attr_float(node, "epsilon", 1e-5), stash_type=1)


def rules():
    return [RMSNormalizationToRMSNorm.rule()]
