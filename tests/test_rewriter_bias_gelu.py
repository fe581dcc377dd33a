"""bias_gelu: Add(X, bias) + GELU -> com.microsoft.BiasGelu / FastGelu (target "ort" only), checked
against ONNX Runtime CPU on the original graph; refusals say why; the default target "portable"
leaves it alone."""
from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from models.reference import bias_gelu_reference, run_reference
from trt_fastops.rewriter import RewriteError, rewrite

ort = pytest.importorskip("onnxruntime")

N = 16


def gelu_graph(form="erf", *, dtype=np.float32, bias_first=True, half_first=False, mul_scale=False, k=None,
               bias_shape=(N,), x_shape=(2, 3, N), approximate="none", opset=17, bias_input=False, extra_use=False):
    """MatMul -> Add(bias) -> GELU (form: erf | tanh | op) -> output."""
    T = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((x_shape[-1], N)).astype(dtype) * 0.5, "w")]
    inputs = [helper.make_tensor_value_info("a", T, list(x_shape))]
    if bias_input:
        inputs.append(helper.make_tensor_value_info("bias", T, list(bias_shape)))
    else:
        inits.append(numpy_helper.from_array(rng.standard_normal(bias_shape).astype(dtype), "bias"))
    nodes = [helper.make_node("MatMul", ["a", "w"], ["m"], name="/fc/MatMul"),
             helper.make_node("Add", ["bias", "m"] if bias_first else ["m", "bias"], ["x"], name="/fc/Add")]

    def c(name, v):
        inits.append(numpy_helper.from_array(np.array(v, dtype=dtype), name))
        return name

    if form == "op":
        nodes.append(helper.make_node("Gelu", ["x"], ["y"], name="/act/Gelu", approximate=approximate))
    elif form == "erf":
        if mul_scale:
            nodes.append(helper.make_node("Mul", ["x", c("k", 1 / math.sqrt(2) if k is None else k)], ["s"]))
        else:
            nodes.append(helper.make_node("Div", ["x", c("k", math.sqrt(2) if k is None else k)], ["s"]))
        nodes += [helper.make_node("Erf", ["s"], ["e"]), helper.make_node("Add", ["e", c("one", 1.0)], ["p"])]
        if half_first:
            nodes += [helper.make_node("Mul", [c("half", 0.5), "x"], ["h"]), helper.make_node("Mul", ["h", "p"], ["y"])]
        else:
            nodes += [helper.make_node("Mul", ["x", "p"], ["h"]), helper.make_node("Mul", ["h", c("half", 0.5)], ["y"])]
    else:  # tanh (GPT-2 gelu_new)
        nodes += [helper.make_node("Pow", ["x", c("three", 3.0)], ["cube"]),
                  helper.make_node("Mul", [c("c", 0.044715), "cube"], ["cc"]),
                  helper.make_node("Add", ["x", "cc"], ["inner"]),
                  helper.make_node("Mul", [c("k", math.sqrt(2 / math.pi)), "inner"], ["ki"]),
                  helper.make_node("Tanh", ["ki"], ["t"]),
                  helper.make_node("Mul", [c("half", 0.5), "x"], ["hx"]),
                  helper.make_node("Add", [c("one", 1.0), "t"], ["p"]),
                  helper.make_node("Mul", ["hx", "p"], ["y"])]
    outputs = [helper.make_tensor_value_info("y", T, list(x_shape[:-1]) + [N])]
    if extra_use:
        outputs.append(helper.make_tensor_value_info("x", T, list(x_shape[:-1]) + [N]))
    g = helper.make_graph(nodes, "gelu", inputs, outputs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8 if opset < 20 else 10)


def feeds(model):
    rng = np.random.default_rng(1)
    out = {}
    for i in model.graph.input:
        tt = i.type.tensor_type
        out[i.name] = rng.standard_normal([d.dim_value for d in tt.shape.dim]).astype(
            helper.tensor_dtype_to_np_dtype(tt.elem_type))
    return out


def check_against_ort(original, model, tol):
    onnx.checker.check_model(model, full_check=True)
    f = feeds(original)
    ref = ort.InferenceSession(original.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, f)
    runs = [ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, f),
            run_reference(model, f)]
    for got in runs:
        for g, r in zip(got, ref):
            assert g.dtype == r.dtype and g.shape == r.shape
            np.testing.assert_allclose(g.astype(np.float64), r.astype(np.float64), atol=tol, rtol=tol)


VARIANTS = {
    "erf": {}, "erf_bias_last": {"bias_first": False}, "erf_half_first": {"half_first": True},
    "erf_mul_scale": {"mul_scale": True}, "erf_fp16": {"dtype": np.float16},
    "gelu_op": {"form": "op", "opset": 20}, "gelu_op_fp16": {"form": "op", "opset": 20, "dtype": np.float16},
}


@pytest.mark.parametrize("kw", VARIANTS.values(), ids=VARIANTS.keys())
def test_bias_gelu_forms(kw):
    m = gelu_graph(**kw)
    result = rewrite(m, ops=["BiasGelu"], target="ort")  # (with Dense: Dense(activation="gelu"), below)
    nodes = [n for n in result.model.graph.node if n.op_type != "Constant"]
    assert [(n.op_type, n.domain) for n in nodes] == [("MatMul", ""), ("BiasGelu", "com.microsoft")]
    assert list(nodes[1].input) == ["m", "bias"] and nodes[1].name.endswith("BiasGelu")
    assert result.report.counts() == {"BiasGelu": 1}
    assert result.report.rewrites[0].rules == ["bias_gelu"]
    assert result.report.opset_imports["com.microsoft"] == 1 and result.report.target == "ort"
    check_against_ort(m, result.model, 2e-2 if kw.get("dtype") == np.float16 else 1e-5)
    again = rewrite(result.model, ops=["BiasGelu"], target="ort")  # idempotent
    assert again.report.rewrites == [] and again.report.refusals == []


@pytest.mark.parametrize("kw", VARIANTS.values(), ids=VARIANTS.keys())
def test_dense_gelu_takes_the_erf_forms_first(kw):
    # every op of target ort: MatMul + bias + exact GELU -> one Dense(activation="gelu")
    m = gelu_graph(**kw)
    result = rewrite(m, target="ort")
    nodes = [n for n in result.model.graph.node if n.op_type != "Constant"]
    assert [(n.op_type, n.domain) for n in nodes] == [("Dense", "trt_fastops")]
    assert [(a.name, a.s) for a in nodes[0].attribute] == [("activation", b"gelu")]
    assert list(nodes[0].input) == ["a", "w", "bias"]
    assert result.report.counts() == {"Dense": 1} and result.report.rewrites[0].rules == ["dense_gelu"]
    tol = 2e-2 if kw.get("dtype") == np.float16 else 1e-5
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds(m))
    got = run_reference(result.model, feeds(m))
    np.testing.assert_allclose(got[0].astype(np.float64), ref[0].astype(np.float64), atol=tol, rtol=tol)
    again = rewrite(result.model, target="ort")
    assert again.report.rewrites == [] and again.report.refusals == []


@pytest.mark.parametrize("kw", [{"form": "tanh"}, {"form": "tanh", "dtype": np.float16},
                                {"form": "op", "opset": 20, "approximate": "tanh"}],
                         ids=["tanh", "tanh_fp16", "op_tanh"])
def test_fast_gelu_forms(kw):
    m = gelu_graph(**kw)
    result = rewrite(m, target="ort")
    assert [n.op_type for n in result.model.graph.node if n.op_type != "Constant"] == ["MatMul", "FastGelu"]
    assert result.report.counts() == {"FastGelu": 1}
    check_against_ort(m, result.model, 2e-2 if kw.get("dtype") == np.float16 else 1e-5)


def test_reference_matches_formulas():
    x = np.linspace(-4, 4, 9)
    b = np.full(9, 0.25)
    v = x + b
    np.testing.assert_allclose(bias_gelu_reference(x, b), 0.5 * v * (1 + np.array([math.erf(t / math.sqrt(2))
                                                                                    for t in v])))
    np.testing.assert_allclose(bias_gelu_reference(x, None, tanh=True),
                               0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))))


def test_targets_and_ops_selection():
    m = gelu_graph()
    for kw in ({}, {"target": "portable"}, {"plugin_attributes": True}, {"ops": ["LayerNorm"], "target": "ort"}):
        r = rewrite(m, **kw)
        assert r.report.rewrites == [] and "com.microsoft" not in r.report.opset_imports
        assert [n.op_type for n in r.model.graph.node if n.op_type != "Constant"][-1] == "Mul"
    assert rewrite(m).report.target == "portable" and "BiasGelu" not in rewrite(m).report.ops
    assert rewrite(m, ops=["BiasGelu"], target="ort").report.counts() == {"BiasGelu": 1}
    assert "BiasGelu" in rewrite(m, target="ort").report.ops
    with pytest.raises(RewriteError, match="only target='ort' emits them"):
        rewrite(m, ops=["BiasGelu"])
    with pytest.raises(RewriteError, match="TensorRT"):
        rewrite(m, plugin_attributes=True, target="ort")
    with pytest.raises(RewriteError, match="unknown target 'tensorrt'"):
        rewrite(m, target="tensorrt")
    text = rewrite(m, target="ort").report.to_text().splitlines()[0]
    assert text.startswith("trt_fastops rewrite (LayerNorm, SkipLayerNorm, RMSNorm, Attention, BiasGelu, Dense, EmbedLayerNorm; "
                           "target=ort)")
    assert rewrite(m, target="ort").report.to_dict()["target"] == "ort"


REFUSALS = {
    "bias_not_constant": ({"bias_input": True}, "is not a constant 1-D bias"),
    "bias_2d": ({"bias_shape": (3, N)}, "is not a constant 1-D bias"),
    "wrong_sqrt2": ({"k": 1.5}, "is scaled by 1.5, expected 1.41421 (GELU)"),
    "sum_used_elsewhere": ({"extra_use": True}, "is a graph output"),
}


@pytest.mark.parametrize("kw,reason", REFUSALS.values(), ids=REFUSALS.keys())
def test_bias_gelu_refusals(kw, reason):
    m = gelu_graph(**kw)
    r = rewrite(m, ops=["BiasGelu"], target="ort")  # (Dense would take the MatMul + bias: test_rewriter_dense)
    assert r.report.rewrites == []
    assert any(reason in rf.reason and rf.rule == "bias_gelu" for rf in r.report.refusals), r.report.to_text()
    assert not any(n.domain == "com.microsoft" for n in r.model.graph.node)
    check_against_ort(m, r.model, 1e-6)


def test_gelu_after_a_conv_is_left_to_the_conv_rules():
    from models import build as B

    m = B.build("convnext_tiny")
    assert "BiasGelu" not in rewrite(m, target="ort").report.counts()
    assert rewrite(m, conv="all", target="ort").report.counts() == rewrite(m, conv="all").report.counts()
