"""Decomposed layer norm (what exporters emit below opset 17) -> trt_fastops.LayerNorm.

    mean = ReduceMean(x)                    axes attribute (opset < 18) or input (>= 18)
    d    = Sub(x, mean)
    var  = ReduceMean(Pow(d, 2) | Mul(d, d))
    std  = Sqrt(Add(var, eps))              either operand order
    n    = Div(d, std) | Mul(d, Reciprocal(std)) | Mul(d, Div(1, std))   (Mul in either order)
    y    = Add(Mul(n, scale), bias)         scale and bias optional, either operand order

plus the torch `x.float()` form: x -> Cast(float32) -> ... -> n -> Cast(back to x's dtype)
-> scale/bias, fused with X = the tensor before the first Cast.

check: both reductions over the same trailing axes ending at the last dim with
keepdims=1; eps a scalar constant; the exponent 2 and numerator 1 constants;
scale/bias of X's dtype and one element or the normalized shape; no intermediate
value used outside the pattern.
"""
from __future__ import annotations

import onnx_ir as ir
from onnxscript.rewriter import pattern as orp
from onnxscript.rewriter._basics import MatchResult

from ._common import (NormRule, check_cast_pair, binop, const_scalar, either, normalized, ones_like_param,
                      rank_of, reduce_axes, require_const_value, require_float_dtype, require_param_shape,
                      require_same_dtype, shape_of, trailing_axis)

RULE = "layer_norm_decomposed"
OP = "LayerNorm"


class DecomposedLayerNorm(NormRule):
    RULE = RULE
    OP = OP

    def __init__(self, *, scale: bool, bias: bool, cast: bool, root: str = "") -> None:
        parts = [p for p, on in (("scale", scale), ("bias", bias), ("cast", cast)) if on] or ["bare"]
        super().__init__("+".join(parts) + (f":{root}" if root else ""), size=int(scale) + int(bias) + int(cast))
        self.has_scale, self.has_bias, self.cast, self.root = scale, bias, cast, root

    def pattern(self, op, x, scale, bias, eps, two, one):
        xin = op.Cast(x, _outputs=["x_cast"]) if self.cast else x
        mean = op.ReduceMean(xin, _allow_other_inputs=True, _outputs=["mean"])
        d = op.Sub(xin, mean)
        square = orp.OrValue([op.Pow(d, two), op.Mul(d, d)])
        var = op.ReduceMean(square, _allow_other_inputs=True, _outputs=["var"])
        std = op.Sqrt(either(op, "Add", var, eps))
        last = not (self.cast or self.has_scale or self.has_bias)
        y = normalized(op, d, std, one, root=self.root if last else None)
        if self.cast:
            y = op.Cast(y, _outputs=["y_cast"])
        if self.has_scale:
            last = not self.has_bias
            y = binop(op, "Mul", y, scale, swap=self.root == "swapped") if last else either(op, "Mul", y, scale)
        if self.has_bias:
            y = binop(op, "Add", y, bias, swap=self.root == "swapped")
        return y

    def check(self, context, x: ir.Value, mean: ir.Value, var: ir.Value, eps, two=None, one=None,
              scale=None, bias=None, x_cast=None, y_cast=None, **_) -> MatchResult:
        result = MatchResult()
        dt = require_float_dtype(x, "X")
        if self.cast:
            bad_cast = check_cast_pair(x_cast, y_cast, dt)
            if bad_cast:
                return result.fail(*bad_cast)
        rank = rank_of(x, "X")
        mean_axes = reduce_axes(mean.producer(), rank, "the mean")
        var_axes = reduce_axes(var.producer(), rank, "the variance")
        if mean_axes != var_axes:
            return result.fail(f"the mean reduces over axes {mean_axes} but the variance over {var_axes}",
                               var.producer())
        axis = trailing_axis(mean_axes, rank, "the mean", mean.producer())
        self._epsilon = const_scalar(eps, "epsilon")
        if two is not None:
            require_const_value(two, 2.0, "the Pow exponent")
        if one is not None:
            require_const_value(one, 1.0, "the numerator of Div(1, Sqrt(...))")
        x_shape = shape_of(x)
        for value, what in ((scale, "Scale"), (bias, "B")):
            if value is not None:
                require_same_dtype(value, dt, what)
                require_param_shape(value, x_shape, axis, what)
        self._axis = axis - rank
        return result

    def rewrite(self, op, x: ir.Value, scale=None, bias=None, **_):
        if scale is None:
            scale = ones_like_param(op, x.dtype)
        return self.emit(op, OP, [x, scale, bias], 1, axis=self._axis, epsilon=self._epsilon, stash_type=1)


def rules():
    out = []
    for cast in (False, True):
        for scale, bias in ((True, True), (True, False), (False, True), (False, False)):
            if scale or bias:
                roots = ["plain", "swapped"]  # the last Mul/Add in either operand order
            elif cast:
                roots = [""]  # ends in the Cast back
            else:
                roots = ["div", "mul", "mul_swapped"]  # ends in the normalization itself
            for root in roots:
                out.append(DecomposedLayerNorm.rule(scale=scale, bias=bias, cast=cast, root=root))
    return out
