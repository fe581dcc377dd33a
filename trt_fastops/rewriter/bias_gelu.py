"""Add(X, bias) feeding a GELU -> com.microsoft.BiasGelu / FastGelu (ONNX Runtime contrib ops).

Only with target="ort": TensorRT's ONNX parser knows no com.microsoft ops, so the default
"portable" target leaves the GELU as it is (ONNX Runtime's session fusions may still fuse it;
TensorRT fuses the pointwise chain itself).

Why a rule for an op ONNX Runtime fuses by itself: ORT's session-level BiasGeluFusion runs at
level 2, after the level-1 MatMulAddFusion has turned MatMul + Add(bias) into a Gemm wherever
shapes are static (ViT, GPT-2). The bias then sits in the Gemm (the CUDA EP broadcasts it into
Y and runs the GEMM with beta=1: two extra passes over [tokens, 4 * hidden]) and the GELU runs
as its own kernel. onnxruntime.transformers' optimizer emits BiasGelu / FastGelu before any of
that; so does this rule, and the MatMul stays a plain MatMul.

Forms (the GELU tails of conv_activation, any operand order): the erf form
0.5 * x * (1 + Erf(x / sqrt2)) (Div by sqrt(2) or Mul by 1/sqrt(2), the 0.5 applied first or
last) and the ONNX Gelu op (opset 20; approximate="none" -> BiasGelu, "tanh" -> FastGelu);
the tanh form 0.5 * x * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 * x^3))) -> FastGelu.

check: one addend is a constant 1-D bias of length N, the other (X) has a static last dim N;
float32 / float16 / bfloat16, both of one dtype; the GELU constants within the rounding of
their dtype; the biased sum used by the GELU only.
"""
from __future__ import annotations

import math

import onnx_ir as ir
from onnxscript.rewriter import pattern as orp
from onnxscript.rewriter._basics import MatchResult

from ._common import (FLOAT_TYPES, ORT_DOMAIN, NormRule, Refuse, binop, const_array, const_near, describe, dtype_name,
                      either, fmt_shape, shape_of)
from .conv_activation import check_tail, tail

RULE = "bias_gelu"
OP = "BiasGelu"
#: the ops this rule may emit (report names; all in ORT_DOMAIN)
OPS = ("BiasGelu", "FastGelu")

#: erf forms shared with conv_activation's tails, plus the ONNX Gelu op and the tanh form
ERF_FORMS = ("GeluErf", "GeluErf_swapped", "GeluErfHalfFirst", "GeluErfHalfFirst_swapped")
FORMS = ERF_FORMS + ("Gelu", "GeluTanh", "GeluTanh_swapped")
_SIZE = {"Gelu": 1, "GeluTanh": 8, "GeluTanh_swapped": 8, **{f: 5 for f in ERF_FORMS}}


def tanh_tail(op, x, *, swap: bool):
    """0.5 * x * (1 + Tanh(k * (x + c * Pow(x, 3)))), any operand order of Add / Mul."""
    k, c, three, one, half = (orp.Var(n) for n in ("k", "c", "three", "one", "half"))
    cube = either(op, "Mul", c, op.Pow(x, three))
    inner = either(op, "Mul", k, either(op, "Add", x, cube))
    plus_one = either(op, "Add", op.Tanh(inner), one)
    return binop(op, "Mul", either(op, "Mul", x, half), plus_one, swap=swap)


def _close(v: ir.Value | None, want: float, what: str, node: ir.Node) -> None:
    got, ok = const_near(v, want, f"the GELU constant {what}")
    if not ok:
        raise Refuse(f"the GELU constant {what} is {got:g}, expected {want:g} ({dtype_name(v.dtype)})", node)


class BiasGeluFusion(NormRule):
    RULE = RULE
    OP = OP
    STAGE = 2  # after the conv rules, which fold a GELU after a Conv into the conv node

    def __init__(self, form: str) -> None:
        super().__init__(form, size=_SIZE[form] + 1)
        self.form = form

    def pattern(self, op, a, b):
        x = op.Add(a, b, _outputs=["x"])
        if self.form.startswith("GeluTanh"):
            return tanh_tail(op, x, swap=self.form.endswith("swapped"))
        return tail(op, self.form, x)

    def check(self, context, a: ir.Value, b: ir.Value, x: ir.Value, **bindings) -> MatchResult:
        add = x.producer()
        self._x, self._bias = self._split_bias(add, a, b)
        nodes = list(context.nodes)
        if self.form == "Gelu":
            gelu = next(n for n in nodes if n.op_type == "Gelu")
            approx = gelu.attributes.get_string("approximate", "none")
            if approx not in ("none", "tanh"):
                raise Refuse(f"{describe(gelu)} has approximate='{approx}'", gelu)
            self._op = "FastGelu" if approx == "tanh" else "BiasGelu"
        elif self.form.startswith("GeluTanh"):
            tanh = next(n for n in nodes if n.op_type == "Tanh")
            _close(bindings.get("k"), math.sqrt(2.0 / math.pi), "sqrt(2/pi)", tanh)
            _close(bindings.get("c"), 0.044715, "0.044715", tanh)
            _close(bindings.get("three"), 3.0, "exponent", tanh)
            _close(bindings.get("one"), 1.0, "one", tanh)
            _close(bindings.get("half"), 0.5, "half", tanh)
            self._op = "FastGelu"
        else:
            check_tail(self.form, nodes, bindings)  # the erf tails conv_activation folds, checked alike
            self._op = "BiasGelu"
        return MatchResult()

    @staticmethod
    def _split_bias(add: ir.Node, a: ir.Value, b: ir.Value) -> tuple[ir.Value, ir.Value]:
        """(X, bias) of the Add: bias a constant 1-D [N], X of a float dtype with last dim N."""
        problems = []
        for x, bias in ((a, b), (b, a)):
            bs, xs = shape_of(bias), shape_of(x)
            if const_array(bias) is None or bs is None or len(bs) != 1 or not isinstance(bs[0], int):
                problems.append(f"{describe(bias)} is not a constant 1-D bias")
                continue
            if xs is None or not xs or xs[-1] != bs[0]:
                problems.append(f"the last dim of {describe(x)} ({fmt_shape(xs)}) is not known to equal the "
                                f"bias length {bs[0]}")
                continue
            if x.dtype not in FLOAT_TYPES or bias.dtype != x.dtype:
                problems.append(f"{describe(x)} is {dtype_name(x.dtype)} and the bias {dtype_name(bias.dtype)}; "
                                "BiasGelu takes float32, float16 or bfloat16 of one dtype")
                continue
            return x, bias
        raise Refuse(f"{describe(add)} is not a Linear bias: {problems[0]}", add)

    def emitted_op(self) -> str:
        return self._op

    def rewrite(self, op, **_):
        return self.emit(op, self._op, [self._x, self._bias], 1, domain=ORT_DOMAIN)


def rules():
    return [BiasGeluFusion.rule(form) for form in FORMS]
