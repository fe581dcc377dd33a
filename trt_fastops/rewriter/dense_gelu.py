"""MatMul(X, W) + bias followed by an exact GELU -> trt_fastops.Dense(activation="gelu").

Only with target="ort" (Dense has no TensorRT plugin). One GEMM whose epilogue adds the bias and
applies the erf GELU (on Hopper a CUTLASS kernel; elsewhere cuBLASLt + our GELU kernel): the
[tokens, 4 * hidden] activation is written once instead of written, read and written again by
a separate BiasGelu (BERT-base at 16384 tokens: 83 us per layer on an H100).

Runs before bias_gelu (same stage, larger pattern), which keeps the cases refused here (a bias
or weight that is not constant, the tanh approximation).

pattern: the erf GELU tails of conv_activation / bias_gelu (Div by sqrt 2 or Mul by 1/sqrt 2,
the 0.5 first or last) and the ONNX Gelu op, applied to Add(MatMul(x, w), b) in either order.
check: as dense.py for the MatMul + bias; the GELU constants within their dtype's rounding
(conv_activation.check_tail); Gelu's approximate="none".
"""
from __future__ import annotations

import onnx_ir as ir
from onnxscript.rewriter._basics import MatchResult

from .bias_gelu import ERF_FORMS, _SIZE
from .conv_activation import check_tail, tail
from .dense import MatMulBiasToDense
from ._common import NormRule, either

RULE = "dense_gelu"
OP = "Dense"
FORMS = ERF_FORMS + ("Gelu",)


class DenseGelu(MatMulBiasToDense):
    RULE = RULE
    OP = OP
    STAGE = 2  # with bias_gelu, before it (larger pattern)
    ORT_ONLY = True

    def __init__(self, form: str) -> None:
        NormRule.__init__(self, form, size=_SIZE[form] + 2)
        self.swap = False
        self.form = form

    def pattern(self, op, x, w, b):
        v = either(op, "Add", op.MatMul(x, w), b)
        return tail(op, self.form, v)

    def check(self, context, x: ir.Value, w: ir.Value, b: ir.Value, **bindings) -> MatchResult:
        super().check(context, x=x, w=w, b=b)
        check_tail(self.form, list(context.nodes), bindings)
        return MatchResult()

    def rewrite(self, op, x: ir.Value, w: ir.Value, b: ir.Value, **_):
        return self.emit(op, OP, [x, w, b], 1, activation="gelu")


def rules():
    return [DenseGelu.rule(form) for form in FORMS]
