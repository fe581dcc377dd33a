"""Single-norm graphs with every knob of the patterns the rewriter looks for.

Used by the rewriter tests for positive and negative cases: one layer norm or RMS
norm (decomposed or as the ONNX op), optionally fed by a residual Add, with
switches for the details the rules check (axes, keepdims, epsilon source, exponent,
extra consumers, skip shape, ...). Every builder returns a checked-valid model
with input "x" (and "skip", "eps", "scale" when asked for) and output "y".
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper

from ._graph import GraphBuilder


def _reduce_mean(g: GraphBuilder, x: str, opset: int, axes: Sequence[int], keepdims: int) -> str:
    if opset < 18:
        return g.node("ReduceMean", [x], axes=list(axes), keepdims=keepdims)
    return g.node("ReduceMean", [x, g.ints(axes)], keepdims=keepdims)


def _finish(g: GraphBuilder, y: str, shape, opset: int, extra_outputs=()) -> onnx.ModelProto:
    g.outputs.append(helper.make_tensor_value_info(y, g.onnx_dtype, list(shape)))
    model = onnx.shape_inference.infer_shapes(g.model(opset))
    # extra graph outputs (extra consumers of intermediates) take their inferred types
    infos = {vi.name: vi for vi in model.graph.value_info}
    for name in extra_outputs:
        model.graph.output.append(infos[name])
    del model.graph.value_info[:]
    return model


def _param(g: GraphBuilder, name: str, shape, *, as_input: bool, mean: float = 0.0) -> str:
    if as_input:
        return g.input(name, g.onnx_dtype, list(shape))
    return g.weight(name, shape, std=0.1, mean=mean)


def _rename_last(g: GraphBuilder, value: str, name: str) -> str:
    for node in g.nodes:
        node.output[:] = [name if o == value else o for o in node.output]
        node.input[:] = [name if i == value else i for i in node.input]
    return name


def layer_norm_decomposed(shape=(2, 4, 16), *, dtype="float32", opset=13, axes=(-1,), var_axes=None,
                          keepdims=(1, 1), eps=1e-5, eps_input=False, exponent=2.0, square="pow",
                          norm="div", scale=True, bias=True, scale_shape=None, scale_input=False,
                          commuted=False, cast=False, expose=None, seed=0) -> onnx.ModelProto:
    """ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add with switches.

    square: "pow" or "mul" (Mul(d, d)); norm: "div", "reciprocal" (Mul(d, Reciprocal(std)))
    or "div_one" (Mul(d, Div(1, std))); expose: name of an intermediate ("var", "std", "d")
    to also make a graph output (an extra consumer). commuted: scale and bias as the first operand.
    """
    g = GraphBuilder("ln_decomposed", dtype=dtype, seed=seed)
    x = g.input("x", g.onnx_dtype, list(shape))
    f32 = np.float32 if cast else None
    src = g.node("Cast", [x], to=TensorProto.FLOAT) if cast else x
    mean = _reduce_mean(g, src, opset, axes, keepdims[0])
    d = g.node("Sub", [src, mean])
    sq = g.node("Mul", [d, d]) if square == "mul" else g.node("Pow", [d, g.const(exponent, f32)])
    var = _reduce_mean(g, sq, opset, var_axes or axes, keepdims[1])
    e = g.input("eps", TensorProto.FLOAT if cast else g.onnx_dtype, []) if eps_input else g.const(eps, f32)
    std = g.node("Sqrt", [g.node("Add", [var, e])])
    if norm == "div":
        n = g.node("Div", [d, std])
    elif norm == "reciprocal":
        n = g.node("Mul", [d, g.node("Reciprocal", [std])])
    else:
        n = g.node("Mul", [d, g.node("Div", [g.const(1.0, f32), std])])
    if cast:
        n = g.node("Cast", [n], to=g.onnx_dtype)
    first = min(a + len(shape) if a < 0 else a for a in axes)
    pshape = tuple(shape[first:])
    y = n
    if scale:
        w = _param(g, "scale", scale_shape or pshape, as_input=scale_input, mean=1.0)
        y = g.node("Mul", [w, y] if commuted else [y, w])
    if bias:
        b = _param(g, "bias", pshape, as_input=False)
        y = g.node("Add", [b, y] if commuted else [y, b])
    _rename_last(g, y, "y")
    extra = {"var": var, "std": std, "d": d}
    outs = [extra[expose]] if expose else []
    return _finish(g, "y", shape, opset, outs)


def rms_norm_decomposed(shape=(2, 4, 16), *, dtype="float32", opset=18, axes=(-1,), keepdims=1, eps=1e-6,
                        eps_input=False, exponent=2.0, square="pow", norm="div_one", scale=True,
                        commuted=True, cast=True, expose=None, seed=0) -> onnx.ModelProto:
    """Pow/ReduceMean/Add/Sqrt/(Div(1,.)|Reciprocal|Div(x,.))/Mul/Mul; cast=True is the HF Llama form."""
    g = GraphBuilder("rms_decomposed", dtype=dtype, seed=seed)
    x = g.input("x", g.onnx_dtype, list(shape))
    f32 = np.float32 if cast else None
    src = g.node("Cast", [x], to=TensorProto.FLOAT) if cast else x
    sq = g.node("Mul", [src, src]) if square == "mul" else g.node("Pow", [src, g.const(exponent, f32)])
    var = _reduce_mean(g, sq, opset, axes, keepdims)
    e = g.input("eps", TensorProto.FLOAT if cast else g.onnx_dtype, []) if eps_input else g.const(eps, f32)
    std = g.node("Sqrt", [g.node("Add", [var, e])])
    if norm == "div":
        n = g.node("Div", [src, std])
    elif norm == "reciprocal":
        n = g.node("Mul", [src, g.node("Reciprocal", [std])])
    else:
        n = g.node("Mul", [src, g.node("Div", [g.const(1.0, f32), std])])
    if cast:
        n = g.node("Cast", [n], to=g.onnx_dtype)
    y = n
    if scale:
        w = g.weight("scale", (shape[-1],), std=0.1, mean=1.0)
        y = g.node("Mul", [w, y] if commuted else [y, w])
    _rename_last(g, y, "y")
    extra = {"var": var, "std": std}
    return _finish(g, "y", shape, opset, [extra[expose]] if expose else [])


def norm_op(shape=(2, 4, 16), *, kind="layer", dtype="float32", opset=None, axis=-1, eps=1e-5, stash_type=None,
            bias=True, mean_outputs=False, skip_shape=None, skip_bias=None, sum_used=False,
            seed=0) -> onnx.ModelProto:
    """LayerNormalization / RMSNormalization, optionally fed by Add(x, skip) [+ bias].

    skip_bias: None, "pre" (Add(Add(skip_mm, bias), x)) or "post" (Add(Add(x, skip), bias)).
    sum_used: the Add result is also a graph output ("sum"), like a residual stream.
    mean_outputs: LayerNormalization's Mean and InvStdDev are graph outputs.
    """
    opset = opset or (23 if kind == "rms" else 17)
    g = GraphBuilder(f"{kind}_op", dtype=dtype, seed=seed)
    x = g.input("x", g.onnx_dtype, list(shape))
    a = len(shape) + axis if axis < 0 else axis
    pshape = tuple(shape[a:])
    src = x
    outs = []
    if skip_shape is not None:
        skip = g.input("skip", g.onnx_dtype, list(skip_shape))
        if skip_bias == "pre":
            lb = g.weight("linear.bias", (shape[-1],), std=0.1)
            src = g.node("Add", [g.node("Add", [lb, skip]), x])
        elif skip_bias == "post":
            lb = g.weight("linear.bias", (shape[-1],), std=0.1)
            src = g.node("Add", [g.node("Add", [x, skip]), lb])
        else:
            src = g.node("Add", [x, skip])
        if sum_used:
            outs.append(g.node("Identity", [src], outputs=["sum"]))
    w = g.weight("scale", pshape, std=0.1, mean=1.0)
    attrs = {"axis": axis, "epsilon": eps}
    if stash_type is not None:
        attrs["stash_type"] = stash_type
    if kind == "rms":
        g.node("RMSNormalization", [src, w], outputs=["y"], **attrs)
    else:
        ins = [src, w] + ([g.weight("bias", pshape, std=0.1)] if bias else [])
        names = ["y", "mean", "inv_std_dev"] if mean_outputs else ["y"]
        g.node("LayerNormalization", ins, outputs=names, **attrs)
        if mean_outputs:
            outs += ["mean", "inv_std_dev"]
    return _finish(g, "y", shape, opset, outs)
