"""Decomposed RMS norm -> trt_fastops.RMSNorm.

    var = ReduceMean(Pow(x, 2) | Mul(x, x))          axes attribute or input
    std = Sqrt(Add(var, eps))                        either operand order
    n   = Div(x, std) | Mul(x, Reciprocal(std)) | Mul(x, Div(1, std))   (Mul in either order)
    y   = Mul(n, scale)                              optional, either order

and the Hugging Face Llama form: x -> Cast(float32) -> ... -> n -> Cast(back) -> Mul(weight, .),
fused with X = the tensor before the first Cast.

check: the reduction over trailing axes ending at the last dim with keepdims=1, eps
a scalar constant, the exponent 2 / numerator 1 constants, scale of X's dtype and
one element or the normalized shape, no intermediate value used elsewhere.
A mean-centred input (x = Sub(a, ReduceMean(a))) is the tail of a layer norm and
is left to the layer-norm rules.
"""
from __future__ import annotations

import onnx_ir as ir
from onnxscript.rewriter import pattern as orp
from onnxscript.rewriter._basics import MatchResult

from ._common import (NormRule, check_cast_pair, NotMine, binop, const_scalar, either, normalized, ones_like_param,
                      producer_of, rank_of, reduce_axes, require_const_value, require_float_dtype,
                      require_param_shape, require_same_dtype, shape_of, trailing_axis)

RULE = "rms_norm_decomposed"
OP = "RMSNorm"


def _is_mean_centred(v: ir.Value) -> bool:
    sub = producer_of(v, "Sub")
    if sub is None or len(sub.inputs) != 2:
        return False
    red = producer_of(sub.inputs[1], "ReduceMean")
    return red is not None and red.inputs[0] is sub.inputs[0]


class DecomposedRMSNorm(NormRule):
    RULE = RULE
    OP = OP

    def __init__(self, *, scale: bool, cast: bool, root: str = "") -> None:
        parts = [p for p, on in (("scale", scale), ("cast", cast)) if on] or ["bare"]
        super().__init__("+".join(parts) + (f":{root}" if root else ""), size=int(scale) + int(cast))
        self.has_scale, self.cast, self.root = scale, cast, root

    def pattern(self, op, x, scale, eps, two, one):
        xin = op.Cast(x, _outputs=["x_cast"]) if self.cast else x
        square = orp.OrValue([op.Pow(xin, two), op.Mul(xin, xin)])
        var = op.ReduceMean(square, _allow_other_inputs=True, _outputs=["var"])
        std = op.Sqrt(either(op, "Add", var, eps))
        last = not (self.cast or self.has_scale)
        y = normalized(op, xin, std, one, root=self.root if last else None)
        if self.cast:
            y = op.Cast(y, _outputs=["y_cast"])
        if self.has_scale:
            y = binop(op, "Mul", y, scale, swap=self.root == "swapped")
        return y

    def check(self, context, x: ir.Value, var: ir.Value, eps, two=None, one=None, scale=None,
              x_cast=None, y_cast=None, **_) -> MatchResult:
        result = MatchResult()
        if _is_mean_centred(x_cast if self.cast else x):
            raise NotMine("mean-centred input: a layer norm, left to the layer-norm rules")
        dt = require_float_dtype(x, "X")
        if self.cast:
            bad_cast = check_cast_pair(x_cast, y_cast, dt)
            if bad_cast:
                return result.fail(*bad_cast)
        rank = rank_of(x, "X")
        axes = reduce_axes(var.producer(), rank, "the mean square")
        axis = trailing_axis(axes, rank, "the mean square", var.producer())
        self._epsilon = const_scalar(eps, "epsilon")
        if two is not None:
            require_const_value(two, 2.0, "the Pow exponent")
        if one is not None:
            require_const_value(one, 1.0, "the numerator of Div(1, Sqrt(...))")
        if scale is not None:
            require_same_dtype(scale, dt, "Scale")
            require_param_shape(scale, shape_of(x), axis, "Scale")
        self._axis = axis - rank
        return result

    def rewrite(self, op, x: ir.Value, scale=None, **_):
        if scale is None:
            scale = ones_like_param(op, x.dtype)
        return self.emit(op, OP, [x, scale], 1, axis=self._axis, epsilon=self._epsilon, stash_type=1)


def rules():
    out = []
    for cast in (True, False):
        for scale in (True, False):
            if scale:
                roots = ["plain", "swapped"]
            elif cast:
                roots = [""]
            else:
                roots = ["div", "mul", "mul_swapped"]
            for root in roots:
                out.append(DecomposedRMSNorm.rule(scale=scale, cast=cast, root=root))
    return out
