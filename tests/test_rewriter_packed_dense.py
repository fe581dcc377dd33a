"""packed_qkv and dense (target "ort" only): three Q/K/V projections -> one MatMul feeding
Attention(packed_qkv=1); a packed projection's Split -> gone; MatMul + bias -> Dense.

Checked against ONNX Runtime CPU on the ORIGINAL graph, through our CPU custom ops and through
the float64 references of models/reference.py; refusals say why; target "portable" leaves both
alone."""
from __future__ import annotations

import collections

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from models import build as B
from models.reference import run_reference
from trt_fastops.rewriter import RewriteError, rewrite

ort = pytest.importorskip("onnxruntime")

from test_rewriter_models import assert_close, custom_op_session, run_original  # noqa: E402


def counts(model: onnx.ModelProto) -> collections.Counter:
    return collections.Counter(n.op_type for n in model.graph.node)


def check_numerics(original, model, feeds, dtype="float32"):
    onnx.checker.check_model(model, full_check=True)
    ref = run_original(original, feeds)
    for got in (run_reference(model, feeds), custom_op_session(model).run(None, feeds)):
        for g, r in zip(got, ref):
            assert_close(g, r, dtype)


@pytest.mark.parametrize("name", ["bert_tiny", "bert_tiny_dynamic", "bert_tiny_mask2", "vit_tiny", "gpt_tiny"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_models_packed_and_dense(name, dtype):
    model = B.build(name, dtype=dtype)
    result = rewrite(model, target="ort")
    c = counts(result.model)
    layers = c["Attention"]
    assert layers > 0 and result.report.refusals == []
    packed = [n for n in result.model.graph.node if n.op_type == "Attention"]
    for n in packed:
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        assert attrs["packed_qkv"] == 1 and all(i == "" for i in n.input[1:3]), n  # K, V omitted
        producer = next(p for p in result.model.graph.node if n.input[0] in p.output)
        assert producer.op_type == "Dense" and producer.domain == "trt_fastops"
    assert c["Split"] == 0 and c["Dense"] >= layers
    assert result.report.counts()["Dense"] == c["Dense"]
    # portable: neither rule
    portable = rewrite(model)
    assert "Dense" not in counts(portable.model)
    assert all(a.name != "packed_qkv" for n in portable.model.graph.node for a in n.attribute)
    check_numerics(model, result.model, B.example_inputs(model), dtype)
    # a second rewrite changes nothing
    again = rewrite(result.model, target="ort")
    assert counts(again.model) == c and again.report.rewrites == []


# ---------------------------------------------------------------------------
# small hand-made graphs
# ---------------------------------------------------------------------------
HIDDEN, HQ, HKV, S, BATCH = 16, 4, 2, 5, 2
D = HIDDEN // HQ


def qkv_graph(*, bias=True, widths=(HQ * D, HKV * D, HKV * D), mask=True, extra_use=None, q_heads=HQ,
              kv_heads=HKV, bias_first=True, weight_input=False, dtype=np.float32):
    """X -> three MatMul (+ bias) -> trt_fastops.Attention (3-D) -> Y."""
    T = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    rng = np.random.default_rng(1)
    inputs = [helper.make_tensor_value_info("x", T, ["batch", "seq", HIDDEN])]
    inits, nodes, proj = [], [], []
    for name, width in zip("qkv", widths):
        w = rng.standard_normal((HIDDEN, width)).astype(dtype) * 0.3
        if weight_input and name == "k":
            inputs.append(helper.make_tensor_value_info(f"w{name}", T, [HIDDEN, width]))
        else:
            inits.append(numpy_helper.from_array(w, f"w{name}"))
        nodes.append(helper.make_node("MatMul", ["x", f"w{name}"], [f"m{name}"], name=f"/{name}/MatMul"))
        out = f"m{name}"
        if bias:
            inits.append(numpy_helper.from_array(rng.standard_normal(width).astype(dtype), f"b{name}"))
            ins = [f"b{name}", out] if bias_first else [out, f"b{name}"]
            nodes.append(helper.make_node("Add", ins, [f"a{name}"], name=f"/{name}/Add"))
            out = f"a{name}"
        proj.append(out)
    att_in = proj + (["mask"] if mask else [])
    if mask:
        inputs.append(helper.make_tensor_value_info("mask", T, ["batch", 1, 1, "seq"]))
    nodes.append(helper.make_node("Attention", att_in, ["y"], domain="trt_fastops", name="/attn/Attention",
                                  q_num_heads=q_heads, kv_num_heads=kv_heads))
    outputs = [helper.make_tensor_value_info("y", T, ["batch", "seq", HQ * D])]
    if extra_use:
        outputs.append(helper.make_tensor_value_info(extra_use, T, ["batch", "seq", HKV * D]))
    g = helper.make_graph(nodes, "qkv", inputs, outputs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("trt_fastops", 1)],
                             ir_version=10)


def qkv_feeds(model, dtype=np.float32):
    rng = np.random.default_rng(2)
    f = {"x": rng.standard_normal((BATCH, S, HIDDEN)).astype(dtype)}
    if any(i.name == "mask" for i in model.graph.input):
        m = np.zeros((BATCH, 1, 1, S), dtype)
        m[-1, ..., 3:] = -10000.0
        f["mask"] = m
    if any(i.name == "wk" for i in model.graph.input):
        f["wk"] = rng.standard_normal((HIDDEN, HKV * D)).astype(dtype)
    return f


def check_attention_reference(original, model, feeds):
    """The original has our Attention already: compare with the float64 reference of it."""
    onnx.checker.check_model(model, full_check=True)
    ref = run_reference(original, feeds)
    for got in (run_reference(model, feeds), custom_op_session(model).run(None, feeds)):
        for g, r in zip(got, ref):
            assert_close(g, r, "float32")


VARIANTS = {"bias_mask": {}, "bias_last": {"bias_first": False}, "no_bias": {"bias": False},
            "no_mask": {"mask": False}, "mha": {"widths": (HIDDEN, HIDDEN, HIDDEN), "kv_heads": HQ}}


@pytest.mark.parametrize("kw", VARIANTS.values(), ids=VARIANTS.keys())
def test_packed_forms(kw):
    m = qkv_graph(**kw)
    r = rewrite(m, target="ort")
    ops = [(n.op_type, n.domain) for n in r.model.graph.node]
    want_proj = ("Dense", "trt_fastops") if kw.get("bias", True) else ("MatMul", "")
    assert ops == [want_proj, ("Attention", "trt_fastops")], ops
    assert r.report.counts() == ({"Attention": 1, "Dense": 1} if kw.get("bias", True) else {"Attention": 1})
    rec = next(x for x in r.report.rewrites if x.op == "Attention")
    assert rec.rules == ["packed_qkv"] and rec.details["head_dim"] == D
    check_attention_reference(m, r.model, qkv_feeds(m))


def test_packed_is_ort_only():
    m = qkv_graph()
    r = rewrite(m)
    assert counts(r.model)["MatMul"] == 3 and r.report.rewrites == []
    assert rewrite(m, ops=["Attention"], target="ort").report.counts() == {"Attention": 1}
    with pytest.raises(RewriteError, match="only target='ort' emits them"):
        rewrite(m, ops=["Dense"])


REFUSALS = {
    "k_width": ({"widths": (HQ * D, HKV * D + 1, HKV * D)}, "are not kv_num_heads * head_dim"),
    "q_heads": ({"q_heads": 3}, "is not a multiple of q_num_heads=3"),
    "weight_input": ({"weight_input": True}, "is not a constant 2-D matrix"),
    "projection_used": ({"extra_use": "ak"}, "is a graph output"),
}


@pytest.mark.parametrize("kw,reason", REFUSALS.values(), ids=REFUSALS.keys())
def test_packed_refusals(kw, reason):
    m = qkv_graph(**kw)
    r = rewrite(m, ops=["Attention"], target="ort")
    assert r.report.rewrites == []
    assert any(reason in rf.reason and rf.rule == "packed_qkv" for rf in r.report.refusals), r.report.to_text()


def split_graph(sizes=(HQ * D, HKV * D, HKV * D), axis=-1):
    T = onnx.TensorProto.FLOAT
    width = HIDDEN + 2 * HKV * D
    nodes = [helper.make_node("Split", ["qkv", "sizes"], ["q", "k", "v"], axis=axis, name="/split"),
             helper.make_node("Attention", ["q", "k", "v"], ["y"], domain="trt_fastops", name="/attn",
                              q_num_heads=HQ, kv_num_heads=HKV, is_causal=1)]
    g = helper.make_graph(nodes, "split", [helper.make_tensor_value_info("qkv", T, [BATCH, S, width])],
                          [helper.make_tensor_value_info("y", T, [BATCH, S, HQ * D])],
                          [numpy_helper.from_array(np.array(sizes, np.int64), "sizes")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("trt_fastops", 1)],
                             ir_version=10)


def test_split_becomes_packed():
    m = split_graph()
    r = rewrite(m, target="ort")
    assert [n.op_type for n in r.model.graph.node] == ["Attention"]
    feeds = {"qkv": np.random.default_rng(3).standard_normal((BATCH, S, HIDDEN + 2 * HKV * D)).astype(np.float32)}
    check_attention_reference(m, r.model, feeds)


@pytest.mark.parametrize("kw,reason", [({"sizes": (HQ * D, HKV * D + 2, HKV * D - 2)}, "expected Q, K, V widths"),
                                       ({"axis": 1}, "splits axis 1, not the last")])
def test_split_refusals(kw, reason):
    r = rewrite(split_graph(**kw), target="ort")
    assert r.report.rewrites == []
    assert any(reason in rf.reason for rf in r.report.refusals), r.report.to_text()


# ---------------------------------------------------------------------------
# dense
# ---------------------------------------------------------------------------
def linear_graph(*, x_shape=("batch", 3, 8), n=6, bias_shape=None, swap=False, dtype=np.float32, bias_input=False):
    T = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    rng = np.random.default_rng(4)
    k = x_shape[-1]
    inits = [numpy_helper.from_array(rng.standard_normal((k, n)).astype(dtype), "w")]
    inputs = [helper.make_tensor_value_info("x", T, list(x_shape))]
    b = rng.standard_normal(bias_shape or (n,)).astype(dtype)
    if bias_input:
        inputs.append(helper.make_tensor_value_info("b", T, list(b.shape)))
    else:
        inits.append(numpy_helper.from_array(b, "b"))
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="/fc/MatMul"),
             helper.make_node("Add", ["b", "m"] if swap else ["m", "b"], ["y"], name="/fc/Add")]
    g = helper.make_graph(nodes, "fc", inputs, [helper.make_tensor_value_info("y", T, list(x_shape[:-1]) + [n])],
                          inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


@pytest.mark.parametrize("kw", [{}, {"swap": True}, {"x_shape": (5, 8)}, {"dtype": np.float16},
                                {"x_shape": (2, 1, 3, 8), "n": 1}], ids=["plain", "swap", "2d", "fp16", "4d_n1"])
def test_dense(kw):
    m = linear_graph(**kw)
    r = rewrite(m, target="ort")
    assert [(n.op_type, n.domain, list(n.input)) for n in r.model.graph.node] == [
        ("Dense", "trt_fastops", ["x", "w", "b"])]
    shape = [2 if d == "batch" else d for d in kw.get("x_shape", ("batch", 3, 8))]
    dtype = kw.get("dtype", np.float32)
    feeds = {"x": np.random.default_rng(5).standard_normal(shape).astype(dtype)}
    check_numerics(m, r.model, feeds, np.dtype(dtype).name)


@pytest.mark.parametrize("kw,reason", [({"bias_shape": (2, 6)}, "is not a constant 1-D bias of length 6"),
                                       ({"bias_input": True}, "is not a constant 1-D bias of length 6")])
def test_dense_refusals(kw, reason):
    r = rewrite(linear_graph(**kw), target="ort")
    assert r.report.rewrites == []
    assert any(reason in rf.reason and rf.rule == "dense" for rf in r.report.refusals), r.report.to_text()
