"""MatMul(X, W) + bias -> trt_fastops.Dense (one cuBLASLt GEMM with the bias in its epilogue).

Only with target="ort": Dense has no TensorRT plugin (TensorRT fuses a MatMul's bias into its own
GEMM tactics). ONNX Runtime runs MatMul + Add as two kernels where the shapes are dynamic (its
MatMulAddFusion makes a Gemm only for 2-D inputs, and its CUDA Gemm then broadcasts the bias into
Y before the GEMM): the Add is a full extra pass over the activations.

Runs last (after skip_layer_norm and bias_gelu, which fold their own biases, and packed_qkv,
whose packed bias it takes).

pattern: Add(MatMul(x, w), b), either operand order.
check: w a constant 2-D [K, N] and b a constant 1-D [N] of x's dtype (float32 / float16 /
bfloat16); x of rank >= 2 with last dim K where known; the MatMul used by the Add only.
"""
from __future__ import annotations

import onnx_ir as ir
from onnxscript.rewriter._basics import MatchResult

from ._common import (FLOAT_TYPES, NormRule, Refuse, binop, const_array, describe, dtype_name, fmt_shape,
                      shape_of)

RULE = "dense"
OP = "Dense"


class MatMulBiasToDense(NormRule):
    RULE = RULE
    OP = OP
    STAGE = 4
    ORT_ONLY = True

    def __init__(self, swap: bool) -> None:
        super().__init__("swapped" if swap else "", size=2)
        self.swap = swap

    def pattern(self, op, x, w, b):
        return binop(op, "Add", op.MatMul(x, w), b, swap=self.swap)

    def check(self, context, x: ir.Value, w: ir.Value, b: ir.Value, **_) -> MatchResult:
        dt = x.dtype
        if dt not in FLOAT_TYPES:
            raise Refuse(f"the MatMul input {describe(x)} is {dtype_name(dt)}; Dense takes float32, float16 or "
                         "bfloat16", x)
        wa = const_array(w)
        if wa is None or wa.ndim != 2:
            raise Refuse(f"the MatMul weight {describe(w)} is not a constant 2-D matrix", w)
        ba = const_array(b)
        if ba is None or ba.ndim != 1 or ba.shape[0] != wa.shape[1]:
            raise Refuse(f"the addend {describe(b)} is not a constant 1-D bias of length {wa.shape[1]} "
                         f"(the weight's N)", b)
        if w.dtype != dt or b.dtype != dt:
            raise Refuse(f"{describe(x)}, weight and bias are {dtype_name(dt)}, {dtype_name(w.dtype)} and "
                         f"{dtype_name(b.dtype)}; Dense takes one dtype", w)
        xs = shape_of(x)
        if xs is None or len(xs) < 2:
            raise Refuse(f"the MatMul input {describe(x)} has shape {fmt_shape(xs)}; Dense takes rank >= 2", x)
        if isinstance(xs[-1], int) and xs[-1] != wa.shape[0]:
            raise Refuse(f"the last dim of {describe(x)} ({xs[-1]}) is not the weight's K ({wa.shape[0]})", x)
        return MatchResult()

    def rewrite(self, op, x: ir.Value, w: ir.Value, b: ir.Value, **_):
        return self.emit(op, OP, [x, w, b], 1)


def rules():
    return [MatMulBiasToDense.rule(swap) for swap in (False, True)]
