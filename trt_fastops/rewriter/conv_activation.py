"""The activation tails the conv rules fold into trt_fastops.Conv / ConvTranspose.

Each form is a pattern on the conv output `c` (which must have no other consumer;
the rule base class checks that): Relu(c); SiLU as Mul(c, Sigmoid(c)) in either
order; Gelu(c) (opset 20, approximate="none" only: the op computes the exact erf
form); and the erf form exporters write below opset 20,
0.5 * c * (1 + Erf(c / sqrt(2))) as Mul(Mul(c, Add(Erf(Div(c, sqrt2)), 1)), 0.5)
(PyTorch) or Mul(Mul(c, 0.5), Add(...)), any operand order, with c * (1/sqrt2)
accepted for the Div.
"""
from __future__ import annotations

import math

import onnx_ir as ir
from onnxscript.rewriter import pattern as orp

from ._common import Refuse, binop, const_near, describe, either

#: form -> (activation attribute value, number of nodes in the tail)
FORMS = {
    "": ("", 0),
    "Relu": ("Relu", 1),
    "Silu": ("Silu", 2),
    "Silu_swapped": ("Silu", 2),
    "Gelu": ("Gelu", 1),
    "GeluErf": ("Gelu", 5),
    "GeluErf_swapped": ("Gelu", 5),
    "GeluErfHalfFirst": ("Gelu", 5),
    "GeluErfHalfFirst_swapped": ("Gelu", 5),
}


def tail(op, form: str, c):
    """The pattern of `form` applied to the conv output `c`."""
    if form == "":
        return c
    if form == "Relu":
        return op.Relu(c)
    if form in ("Silu", "Silu_swapped"):
        s = op.Sigmoid(c)
        return op.Mul(s, c) if form.endswith("swapped") else op.Mul(c, s)
    if form == "Gelu":
        return op.Gelu(c)
    swap = form.endswith("swapped")
    k, one, half = orp.Var("k"), orp.Var("one"), orp.Var("half")
    scaled = orp.OrValue([op.Div(c, k), op.Mul(c, k), op.Mul(k, c)])
    plus_one = either(op, "Add", op.Erf(scaled), one)
    if form.startswith("GeluErfHalfFirst"):
        return binop(op, "Mul", either(op, "Mul", c, half), plus_one, swap=swap)
    return binop(op, "Mul", either(op, "Mul", c, plus_one), half, swap=swap)


def check_tail(form: str, nodes: list[ir.Node], bindings: dict) -> None:
    """Raises Refuse when the matched tail is not the activation it looks like."""
    if form == "Gelu":
        gelu = next(n for n in nodes if n.op_type == "Gelu")
        approx = gelu.attributes.get_string("approximate", "none")
        if approx != "none":
            raise Refuse(f"{describe(gelu)} has approximate='{approx}'; trt_fastops folds only the exact "
                         "(erf) Gelu", gelu)
    if not form.startswith("GeluErf"):
        return
    erf = next(n for n in nodes if n.op_type == "Erf")
    scale_node = erf.inputs[0].producer()
    want = math.sqrt(2.0) if scale_node is not None and scale_node.op_type == "Div" else 1.0 / math.sqrt(2.0)
    # within the rounding of the constants' own dtype: a float16 sqrt(2) is 1.4140625
    k, ok = const_near(bindings.get("k"), want, "the Erf input scale")
    if not ok:
        raise Refuse(f"the Erf input of {describe(erf)} is scaled by {k:g}, expected {want:g} (GELU)", erf)
    for name, value in (("one", 1.0), ("half", 0.5)):
        got, ok = const_near(bindings.get(name), value, f"the GELU constant '{name}'")
        if not ok:
            raise Refuse(f"the GELU constant is {got:g}, expected {value:g}", bindings.get(name))
