"""The conv rules (trt_fastops/rewriter/conv.py, conv_transpose.py, conv_activation.py):
policies off / fallback / all, activation folding, refusals, the fallback rule, the
report, rewrite_file and the CLI option; and the conv nets of models/convnets.py
rewritten and compared with ONNX Runtime on the original (our CPU custom ops, and
onnx.reference with the float64 numpy ops of models/reference.py)."""
from __future__ import annotations

import json
import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from models import build as B
from models.reference import run_reference
from trt_fastops.rewriter import CONV_POLICIES, RewriteError, rewrite, rewrite_file
from trt_fastops.rewriter.conv import fallback_decision

ort = pytest.importorskip("onnxruntime")

DOMAIN = "trt_fastops"


def ours(model):
    return [n for n in model.graph.node if n.domain == DOMAIN]


def std_convs(model):
    return [n for n in model.graph.node if n.op_type in ("Conv", "ConvTranspose") and n.domain == ""]


def op_types(model):
    return [n.op_type for n in model.graph.node]


def attrs_of(node):
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def run_original(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def custom_session(model):
    try:
        import trt_fastops
        from trt_fastops.ort import make_session

        trt_fastops.library_path("ort")
    except (ImportError, FileNotFoundError) as e:
        pytest.skip(f"trt_fastops ORT library not available: {e}")
    return make_session(model)


def assert_close(got, ref, tol=1e-5):
    for g, r in zip(got, ref):
        g, r = np.asarray(g, np.float64), np.asarray(r, np.float64)
        assert g.shape == r.shape
        scale = max(1.0, float(np.abs(r).max()))
        assert float(np.abs(g - r).max()) <= tol * scale


def check_numerics(original, result, feeds=None, tol=1e-5):
    """Our CPU ops and onnx.reference (numpy ops) both match ONNX Runtime on the original."""
    onnx.checker.check_model(result.model, full_check=True)
    feeds = feeds if feeds is not None else B.example_inputs(original)
    ref = run_original(original, feeds)
    assert_close(custom_session(result.model).run(None, feeds), ref, tol)
    assert_close(run_reference(result.model, feeds), ref, tol)


# ---------------------------------------------------------------------------
# single-conv graphs


def conv_graph(tail="", *, op="Conv", x_shape=(2, 4, 9, 9), w_shape=(6, 4, 3, 3), bias=True, opset=17,
               dtype=TensorProto.FLOAT, extra_use=False, conv_is_output=False, x_graph_shape=None, **attrs):
    """X -> Conv/ConvTranspose (+ tail) -> Y. tail: '', Relu, Silu, Silu_swapped, Gelu, GeluTanh,
    GeluErf (torch), GeluErfHalfFirst, GeluErfMul (x * 1/sqrt2), GeluErfBad."""
    rng = np.random.default_rng(0)
    npdt = onnx.helper.tensor_dtype_to_np_dtype(dtype)
    inits = [numpy_helper.from_array((rng.standard_normal(w_shape) * 0.3).astype(npdt), "W")]
    ins = ["X", "W"]
    if bias:
        c_out = w_shape[0] if op == "Conv" else w_shape[1] * attrs.get("group", 1)
        inits.append(numpy_helper.from_array((rng.standard_normal(c_out) * 0.1).astype(npdt), "B"))
        ins.append("B")
    nodes = [helper.make_node(op, ins, ["c"], name="/layer/conv/" + op, **attrs)]

    def const(name, v):
        inits.append(numpy_helper.from_array(np.array(v, dtype=npdt), name))
        return name

    y = "c"
    if tail == "Relu":
        nodes.append(helper.make_node("Relu", ["c"], ["y"], name="/layer/act/Relu"))
        y = "y"
    elif tail in ("Silu", "Silu_swapped"):
        nodes.append(helper.make_node("Sigmoid", ["c"], ["s"], name="/layer/act/Sigmoid"))
        nodes.append(helper.make_node("Mul", ["s", "c"] if tail.endswith("swapped") else ["c", "s"], ["y"],
                                      name="/layer/act/Mul"))
        y = "y"
    elif tail in ("Gelu", "GeluTanh"):
        kw = {"approximate": "tanh"} if tail == "GeluTanh" else {}
        nodes.append(helper.make_node("Gelu", ["c"], ["y"], name="/layer/act/Gelu", **kw))
        y = "y"
    elif tail.startswith("GeluErf"):
        if tail == "GeluErfMul":
            nodes.append(helper.make_node("Mul", ["c", const("k", 1 / math.sqrt(2))], ["d"], name="/act/Mul_k"))
        else:
            nodes.append(helper.make_node("Div", ["c", const("k", 1.7 if tail == "GeluErfBad" else math.sqrt(2))],
                                          ["d"], name="/act/Div"))
        nodes.append(helper.make_node("Erf", ["d"], ["e"], name="/act/Erf"))
        nodes.append(helper.make_node("Add", [const("one", 1.0), "e"], ["a"], name="/act/Add"))
        if tail == "GeluErfHalfFirst":
            nodes.append(helper.make_node("Mul", [const("half", 0.5), "c"], ["h"], name="/act/Mul"))
            nodes.append(helper.make_node("Mul", ["a", "h"], ["y"], name="/act/Mul_1"))
        else:
            nodes.append(helper.make_node("Mul", ["c", "a"], ["m"], name="/act/Mul"))
            nodes.append(helper.make_node("Mul", ["m", const("half", 0.5)], ["y"], name="/act/Mul_1"))
        y = "y"
    outputs = [helper.make_tensor_value_info(y, dtype, None)]
    if extra_use:
        nodes.append(helper.make_node("Neg", ["c"], ["n"], name="/other/Neg"))
        outputs.append(helper.make_tensor_value_info("n", dtype, None))
    if conv_is_output and y != "c":
        outputs.append(helper.make_tensor_value_info("c", dtype, None))
    x_in = helper.make_tensor_value_info("X", dtype, list(x_graph_shape) if x_graph_shape is not None else list(x_shape))
    graph = helper.make_graph(nodes, "g", [x_in], outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    # output shapes for the checker
    inferred = onnx.shape_inference.infer_shapes(model)
    known = {v.name: v for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
    for o in model.graph.output:
        if o.name in known and known[o.name].type.tensor_type.HasField("shape"):
            o.CopyFrom(known[o.name])
    return model


def feeds_for(model, shape=None):
    x = model.graph.input[0]
    dims = shape or [d.dim_value for d in x.type.tensor_type.shape.dim]
    npdt = onnx.helper.tensor_dtype_to_np_dtype(x.type.tensor_type.elem_type)
    return {"X": np.random.default_rng(1).standard_normal(dims).astype(npdt)}


def test_default_policy_is_off():
    model = conv_graph("Relu")
    result = rewrite(model)
    assert ours(result.model) == [] and result.report.rewrites == [] and result.report.refusals == []
    assert result.report.conv == "off"
    text = result.report.to_text()
    assert text.startswith("trt_fastops rewrite (LayerNorm, SkipLayerNorm, RMSNorm, Attention): 0 rewrites")
    assert json.loads(result.report.to_json())["conv"] == "off"


def test_policy_arguments():
    model = conv_graph()
    assert CONV_POLICIES == ("off", "fallback", "all")
    # naming a conv op implies conv="all"
    result = rewrite(model, ops=["Conv"])
    assert [n.op_type for n in ours(result.model)] == ["Conv"] and result.report.conv == "all"
    assert result.report.ops == ["Conv"]
    with pytest.raises(RewriteError, match=r"ops names Conv but conv='off'"):
        rewrite(model, ops=["Conv"], conv="off")
    with pytest.raises(RewriteError, match="unknown conv policy 'some'; choose from off, fallback, all"):
        rewrite(model, conv="some")
    # conv ops not requested: untouched even with conv="all"
    assert ours(rewrite(model, ops=["LayerNorm"], conv="all").model) == []
    assert ours(rewrite(model, ops=["ConvTranspose"]).model) == []
    text = rewrite(model, conv="all").report.to_text()
    assert text.startswith("trt_fastops rewrite (LayerNorm, SkipLayerNorm, RMSNorm, Attention, Conv, ConvTranspose; conv=all): "
                           "1 rewrites (Conv 1), 0 refusals")


TAILS = ["", "Relu", "Silu", "Silu_swapped", "Gelu", "GeluErf", "GeluErfHalfFirst", "GeluErfMul"]
ACT = {"": None, "Relu": "Relu", "Silu": "Silu", "Silu_swapped": "Silu", "Gelu": "Gelu", "GeluErf": "Gelu",
       "GeluErfHalfFirst": "Gelu", "GeluErfMul": "Gelu"}


@pytest.mark.parametrize("tail", TAILS)
def test_activation_folding(tail):
    model = conv_graph(tail, opset=20 if tail == "Gelu" else 17, pads=[1, 1, 1, 1], strides=[2, 1])
    result = rewrite(model, conv="all")
    (node,) = ours(result.model)
    assert op_types(result.model) == ["Conv"], op_types(result.model)
    a = attrs_of(node)
    if ACT[tail]:
        assert a["activation"] == ACT[tail].encode()
    else:
        assert "activation" not in a
    assert a["pads"] == [1, 1, 1, 1] and a["strides"] == [2, 1]
    assert node.name == "/layer/conv/Conv"
    (rec,) = result.report.rewrites
    assert rec.details.get("activation") == ACT[tail]
    if ACT[tail]:
        assert f"{ACT[tail]} folded in" in result.report.to_text()
    check_numerics(model, result, feeds_for(model))


@pytest.mark.parametrize("tail,why", [("GeluTanh", "approximate='tanh'"), ("GeluErfBad", "scaled by 1.7")])
def test_activation_not_folded(tail, why):
    model = conv_graph(tail, opset=20 if tail == "GeluTanh" else 17)
    result = rewrite(model, conv="all")
    assert [n.op_type for n in ours(result.model)] == ["Conv"]
    assert "activation" not in attrs_of(ours(result.model)[0])
    assert len(result.model.graph.node) == len(model.graph.node)  # the activation stays
    # the conv was rewritten alone, so the refused fusion is not reported
    assert result.report.refusals == []
    check_numerics(model, result, feeds_for(model))


@pytest.mark.parametrize("tail", ["GeluErf", "GeluErfHalfFirst", "GeluErfMul"])
def test_gelu_folded_after_a_float16_conv(tail):
    """float16 GELU constants are rounded (sqrt(2) is 1.4140625): they are compared within
    float16's rounding, so the GELU still folds; a wrong constant is still refused."""
    model = conv_graph(tail, dtype=TensorProto.FLOAT16)
    k = next(t for t in model.graph.initializer if t.name == "k")
    assert numpy_helper.to_array(k).item() in (np.float16(math.sqrt(2)), np.float16(1 / math.sqrt(2)))
    result = rewrite(model, conv="all")
    (node,) = ours(result.model)
    assert attrs_of(node)["activation"] == b"Gelu", result.report.to_text()
    assert op_types(result.model) == ["Conv"]
    feeds = feeds_for(model)
    assert_close(custom_session(result.model).run(None, feeds), run_original(model, feeds), tol=3e-3)

    bad = conv_graph("GeluErfBad", dtype=TensorProto.FLOAT16)  # 1.7: far beyond float16 rounding
    assert "activation" not in attrs_of(ours(rewrite(bad, conv="all").model)[0])


def test_convnext_float16_folds_its_gelus(rewritten):
    """ConvNeXt-style block in float16: 1x1 expand Conv -> erf GELU folds as in float32."""
    original, result = rewritten("convnext_tiny", "all", "float16")
    folded = [r for r in result.report.rewrites if r.details.get("activation") == "Gelu"]
    assert len(folded) == FOLDED["convnext_tiny"] == 2, result.report.to_text()
    assert not {"Erf", "Div"} & set(op_types(result.model))
    feeds = B.example_inputs(original)
    (got,) = custom_session(result.model).run(None, feeds)
    (ref,) = run_original(original, feeds)
    assert got.dtype == np.float16
    assert_close([got], [ref], tol=3e-3)


@pytest.mark.parametrize("kw", [{"extra_use": True}, {"conv_is_output": True}])
def test_activation_not_folded_when_conv_output_is_used(kw):
    model = conv_graph("Relu", **kw)
    result = rewrite(model, conv="all")
    assert sorted(op_types(result.model)) == sorted(["Conv", "Relu"] + (["Neg"] if "extra_use" in kw else []))
    assert "activation" not in attrs_of(ours(result.model)[0])
    check_numerics(model, result, feeds_for(model))


def test_conv_transpose_with_output_shape_and_activation():
    model = conv_graph("Silu", op="ConvTranspose", x_shape=(1, 4, 5, 6), w_shape=(4, 3, 3, 3), group=2,
                       strides=[2, 2], output_shape=[10, 12], auto_pad="SAME_UPPER")
    result = rewrite(model, conv="all")
    (node,) = ours(result.model)
    assert node.op_type == "ConvTranspose" and op_types(result.model) == ["ConvTranspose"]
    a = attrs_of(node)
    # SAME_UPPER + output_shape needs the odd pad at the end: written as resolved pads (totals 1, 1)
    assert a == {"strides": [2, 2], "group": 2, "output_crop": [0, 0, 1, 1], "activation": b"Silu"}
    assert result.report.rewrites[0].rules == ["conv_transpose"]
    assert "output_crop [0, 0, 1, 1]" in result.report.rewrites[0].details["padding"]
    check_numerics(model, result, feeds_for(model))


def ort_cuda_drops(node) -> bool:
    """ONNX Runtime's CUDA EP sends a node of op type ConvTranspose (any domain) to the CPU EP
    when its pads are asymmetric or its auto_pad is SAME_* (ConvTransposeNeedFallbackToCPU)."""
    a = attrs_of(node)
    pads = list(a.get("pads", []))
    r = len(pads) // 2
    return node.op_type == "ConvTranspose" and (a.get("auto_pad", b"NOTSET") in (b"SAME_UPPER", b"SAME_LOWER")
                                                or pads[:r] != pads[r:])


# (x, w, ONNX ConvTranspose attributes, expected attributes of our node besides strides/group/...)
ORT_CUDA_PADDING = [
    ((1, 4, 5, 6), (4, 3, 3, 3), {"strides": [2, 2], "pads": [0, 1, 2, 0]}, {"output_crop": [0, 1, 2, 0]}),
    ((1, 4, 5, 6), (4, 3, 3, 3), {"strides": [2, 2], "pads": [2, 1, 1, 3]},
     {"pads": [1, 1, 1, 1], "output_crop": [1, 0, 0, 2]}),
    ((1, 4, 5, 6), (4, 3, 4, 4), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}, {"pads": [1, 1, 1, 1]}),
    ((1, 4, 5, 6), (4, 3, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}, {"output_crop": [0, 0, 1, 1]}),
    ((1, 4, 5, 6), (4, 3, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_LOWER"}, {"output_crop": [1, 1, 0, 0]}),
    ((1, 4, 5, 9), (4, 2, 3, 3), {"strides": [2, 1], "dilations": [1, 2], "auto_pad": "SAME_LOWER", "group": 2},
     {"pads": [0, 2, 0, 2], "output_crop": [1, 0, 0, 0]}),
    ((1, 4, 5, 5), (4, 3, 3, 3), {"strides": [2, 2], "output_padding": [1, 0], "auto_pad": "SAME_UPPER"},
     {"pads": [1, 0, 1, 0], "output_crop": [0, 0, 0, 1]}),
    ((1, 4, 5, 5), (4, 3, 3, 3), {"strides": [3, 3], "auto_pad": "SAME_UPPER"}, {}),  # total 0: pads none
    ((1, 4, 5, 5), (4, 3, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER", "output_shape": [9, 12]},
     {"pads": [1, 0, 1, 0], "output_padding": [0, 1]}),  # 12 > natural 11: the excess goes to output_padding
    ((1, 4, 5, 5), (4, 3, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER", "output_shape": [10, 10]},
     {"output_crop": [0, 0, 1, 1]}),
    ((1, 4, 5, 5), (4, 3, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_LOWER", "output_shape": [10, 10]},
     {"output_shape": [10, 10]}),  # NOTSET + output_shape puts the odd pad first as well
    ((1, 4, 5, 5), (4, 3, 3, 3), {"strides": [2, 2], "pads": [0, 0, 1, 1], "output_shape": [10, 10]},
     {"output_shape": [10, 10]}),  # pads are ignored with output_shape
    ((1, 4, 5, 5), (4, 3, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}, {"pads": [1, 1, 1, 1]}),  # kept
    ((2, 3, 11), (3, 4, 5), {"strides": [3], "pads": [3, 0], "output_padding": [2]},
     {"output_crop": [3, 0], "output_padding": [2]}),
    ((1, 2, 3, 4, 5), (2, 4, 3, 3, 3), {"strides": [2, 2, 1], "auto_pad": "SAME_UPPER"},
     {"output_crop": [0, 0, 0, 1, 1, 0], "pads": [0, 0, 1, 0, 0, 1]}),
]


@pytest.mark.parametrize("case", ORT_CUDA_PADDING, ids=[f"{len(c[0]) - 2}d-{i}" for i, c in enumerate(ORT_CUDA_PADDING)])
def test_conv_transpose_padding_for_ort_cuda(case):
    """ConvTranspose padding that ORT's CUDA EP would send to the CPU EP is written as
    symmetric pads + output_crop (exactly the same output); other padding is copied."""
    xs, ws, attrs, expect = case
    model = conv_graph("Relu", op="ConvTranspose", x_shape=xs, w_shape=ws, **attrs)
    result = rewrite(model, conv="all")
    (node,) = ours(result.model)
    assert not ort_cuda_drops(node)
    a = attrs_of(node)
    kept = {k: v for k, v in attrs.items() if k in ("strides", "dilations", "group", "output_padding")}
    want = {**kept, **expect, "activation": b"Relu"}
    if "pads" in expect:
        want["pads"] = expect["pads"]
    assert a == want, (a, want)
    pads = attrs.get("pads", [])
    rewritten = attrs.get("auto_pad") in ("SAME_UPPER", "SAME_LOWER") or pads[:len(pads) // 2] != pads[len(pads) // 2:]
    assert ("padding" in result.report.rewrites[0].details) == rewritten
    check_numerics(model, result, feeds_for(model))


def test_conv_transpose_padding_kept_when_unresolvable():
    """SAME_UPPER with output_shape depends on X's spatial size: unknown there, it stays (on
    ORT's CUDA EP the node runs on the CPU EP) and the report says why. SAME_* without
    output_shape never depends on it."""
    kw = dict(op="ConvTranspose", x_shape=(1, 4, 5, 5), w_shape=(4, 3, 3, 3), x_graph_shape=("n", 4, "h", "w"),
              strides=[2, 2])
    model = conv_graph(auto_pad="SAME_UPPER", output_shape=[10, 10], **kw)
    result = rewrite(model, conv="all")
    (node,) = ours(result.model)
    assert attrs_of(node)["auto_pad"] == b"SAME_UPPER"
    assert "kept (spatial dims of X unknown)" in result.report.rewrites[0].details["padding"]
    feeds = feeds_for(model, (1, 4, 5, 5))
    assert_close(custom_session(result.model).run(None, feeds), run_original(model, feeds))

    model = conv_graph(auto_pad="SAME_LOWER", **kw)
    result = rewrite(model, conv="all")
    (node,) = ours(result.model)
    assert not ort_cuda_drops(node) and attrs_of(node)["output_crop"] == [1, 1, 0, 0]
    sess = custom_session(result.model)
    for shape in [(1, 4, 5, 5), (2, 4, 3, 8)]:
        feeds = feeds_for(model, shape)
        assert_close(sess.run(None, feeds), run_original(model, feeds))


def test_conv_without_bias_and_1d_3d():
    for xs, ws, kw in [((2, 3, 11), (4, 3, 3), {"pads": [2, 0]}),
                       ((1, 2, 5, 6, 7), (4, 1, 3, 3, 3), {"group": 2, "dilations": [1, 2, 1], "pads": [1] * 6})]:
        model = conv_graph("Relu", x_shape=xs, w_shape=ws, bias=False, **kw)
        result = rewrite(model, conv="all")
        assert [n.op_type for n in ours(result.model)] == ["Conv"] and len(ours(result.model)[0].input) == 2
        check_numerics(model, result, feeds_for(model))


def test_dynamic_batch_and_spatial_dims():
    model = conv_graph("Relu", x_graph_shape=("batch", 4, "h", "w"), pads=[1, 1, 1, 1])
    result = rewrite(model, conv="all")
    assert [n.op_type for n in ours(result.model)] == ["Conv"]
    sess = custom_session(result.model)
    for shape in [(1, 4, 5, 7), (3, 4, 9, 9)]:
        feeds = feeds_for(model, shape)
        assert_close(sess.run(None, feeds), run_original(model, feeds))
    # fallback: with unknown spatial dims SAME pads cannot be resolved; the report says so
    model = conv_graph("", x_graph_shape=("batch", 4, "h", "w"), auto_pad="SAME_UPPER", strides=[2, 2])
    (rf,) = rewrite(model, conv="fallback").report.refusals
    assert "not decidable: resolved pads (spatial dims unknown)" in rf.reason


def test_refusals():
    cases = [
        (conv_graph(dtype=TensorProto.DOUBLE), "X 'X' is float64; the trt_fastops ops take float32, float16 or bfloat16"),
        (conv_graph(x_graph_shape=None, x_shape=(2, 4, 9, 9)), None),
        (conv_graph(auto_pad="VALID", pads=[0, 0, 0, 0]), "has both pads and auto_pad=VALID"),
    ]
    for model, reason in cases:
        result = rewrite(model, conv="all")
        if reason is None:
            assert ours(result.model)  # static shape: fine
            continue
        assert ours(result.model) == []
        assert any(reason in r.reason for r in result.report.refusals), result.report.to_text()
    # rank unknown: X comes from a Squeeze whose axes are a graph input
    model = conv_graph()
    g = model.graph
    g.node.insert(0, helper.make_node("Squeeze", ["X5", "axes"], ["X"], name="/squeeze"))
    del g.input[:]
    g.input.extend([helper.make_tensor_value_info("X5", TensorProto.FLOAT, [2, 1, 4, 9, 9]),
                    helper.make_tensor_value_info("axes", TensorProto.INT64, [1])])
    result = rewrite(model, conv="all")
    assert ours(result.model) == []
    assert any("the rank of X 'X' is unknown" in r.reason for r in result.report.refusals)


# ---------------------------------------------------------------------------
# the fallback rule


def _ir_node(proto):
    import onnx_ir as ir

    g = helper.make_graph([proto], "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in proto.input],
                          [helper.make_tensor_value_info(proto.output[0], TensorProto.FLOAT, None)])
    m = ir.serde.deserialize_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    return next(iter(m.graph))


FALLBACK = [
    # (id, decide kwargs, selected, reason fragment)
    ("plain", {"pads": [1, 1, 1, 1]}, False, "cuDNN runs it well (2-D, group 1, symmetric pads)"),
    ("depthwise", {"w_shape": (8, 1, 3, 3), "group": 8, "pads": [1, 1, 1, 1]}, False, "(2-D, depthwise"),
    ("dilated-2d", {"dilations": [2, 2], "pads": [2, 2, 2, 2]}, False, "cuDNN runs it well"),
    ("dilated-3d", {"x_shape": (1, 8, 6, 6, 6), "w_shape": (8, 8, 3, 3, 3), "dilations": [1, 2, 1]}, True,
     "3-D with dilations [1, 2, 1]"),
    ("3d-plain", {"x_shape": (1, 8, 6, 6, 6), "w_shape": (8, 8, 3, 3, 3), "pads": [1] * 6}, False, "(3-D, group 1"),
    ("transpose-grouped-dilated", {"op": "ConvTranspose", "w_shape": (8, 4, 3, 3), "group": 2, "dilations": [2, 2]},
     True, "grouped ConvTranspose (group 2) with dilations [2, 2]"),
    ("multiplier", {"w_shape": (16, 1, 3, 3), "group": 8}, True, "depthwise with channel multiplier 2 (group 8)"),
    ("group-width-4", {"x_shape": (1, 16, 8, 8), "w_shape": (16, 4, 3, 3), "group": 4}, True,
     "grouped (group 4) with 4 input / 4 output channels per group (not multiples of 8)"),
    ("group-width-8", {"x_shape": (1, 16, 8, 8), "w_shape": (16, 8, 3, 3), "group": 2}, False, "(2-D, group 2"),
    ("asymmetric", {"pads": [0, 1, 1, 0]}, True, "asymmetric pads [0, 1, 1, 0]"),
    ("same-upper-stride2", {"auto_pad": "SAME_UPPER", "strides": [2, 2]}, True, "asymmetric pads [0, 0, 1, 1]"),
    ("same-lower-stride1", {"auto_pad": "SAME_LOWER"}, False, "symmetric pads"),
    ("transpose-output-shape", {"op": "ConvTranspose", "strides": [2, 2], "output_shape": [32, 32]}, True,
     "asymmetric pads [1, 1, 0, 0]"),
    ("transpose-plain", {"op": "ConvTranspose", "strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]},
     False, "cuDNN runs it well"),
    ("unknown-channels", {"x_shape": (1, "c", 8, 8), "w_shape": (16, 4, 3, 3), "group": 4}, False,
     "not decidable: channel counts"),
]


@pytest.mark.parametrize("case", FALLBACK, ids=[c[0] for c in FALLBACK])
def test_fallback_rule(case):
    _, kw, selected, fragment = case
    kw = dict(kw)
    op = kw.pop("op", "Conv")
    x_shape = kw.pop("x_shape", (1, 8, 16, 16))
    w_shape = kw.pop("w_shape", (8, 8, 3, 3))
    got, reason = fallback_decision(_ir_node(helper.make_node(op, ["X", "W"], ["Y"], **kw)), x_shape, w_shape,
                                    op == "ConvTranspose")
    assert got == selected and fragment in reason, reason


# ---------------------------------------------------------------------------
# the conv nets

# convs conv="fallback" selects in each net (see the module docstring of models/convnets.py)
FALLBACK_COUNTS = {
    "resnet_tiny": {}, "regnet_tiny": {"Conv": 1}, "mobilenet_tiny": {}, "efficientnet_tiny": {"Conv": 3},
    "convnext_tiny": {}, "convnext_tiny_opset20": {}, "conv1d_tiny": {"Conv": 3}, "conv3d_tiny": {"Conv": 1},
    "unet_tiny": {"ConvTranspose": 1},
}
# activations folded under conv="all"
FOLDED = {"resnet_tiny": 4, "regnet_tiny": 5, "mobilenet_tiny": 0, "efficientnet_tiny": 6, "convnext_tiny": 2,
          "convnext_tiny_opset20": 2, "conv1d_tiny": 6, "conv3d_tiny": 5, "unet_tiny": 5}


def test_conv_models_listed():
    assert set(B.CONV_MODELS) == set(FALLBACK_COUNTS)
    assert not set(B.CONV_MODELS) & set(B.TINY_MODELS)


@pytest.fixture(scope="module")
def rewritten():
    cache = {}

    def get(name, policy, dtype="float32"):
        key = (name, policy, dtype)
        if key not in cache:
            model = B.build(name, dtype=dtype)
            cache[key] = (model, rewrite(model, conv=policy))
        return cache[key]

    return get


@pytest.mark.parametrize("name", B.CONV_MODELS)
def test_conv_model_all(name, rewritten):
    original, result = rewritten(name, "all")
    n = {op: sum(1 for c in std_convs(original) if c.op_type == op) for op in ("Conv", "ConvTranspose")}
    assert result.report.counts() == {k: v for k, v in n.items() if v}
    assert std_convs(result.model) == [] and result.report.refusals == []
    assert sum(1 for r in result.report.rewrites if r.details.get("activation")) == FOLDED[name]
    assert result.model.ir_version == original.ir_version
    assert {o.domain: o.version for o in result.model.opset_import}[DOMAIN] == 1
    check_numerics(original, result)


@pytest.mark.parametrize("name", B.CONV_MODELS)
def test_conv_model_fallback(name, rewritten):
    original, result = rewritten(name, "fallback")
    assert result.report.counts() == FALLBACK_COUNTS[name]
    n_convs = len(std_convs(original))
    assert len(result.report.rewrites) + len(result.report.refusals) == n_convs  # one decision per conv
    for r in result.report.refusals:
        assert r.reason.startswith("policy fallback: cuDNN runs it well") and r.node_ops == [r.op]
    for r in result.report.rewrites:
        assert r.details["fallback"]
    if result.report.rewrites:
        check_numerics(original, result)


@pytest.mark.parametrize("name", ["resnet_tiny", "efficientnet_tiny", "conv3d_tiny", "unet_tiny"])
def test_conv_model_float16(name, rewritten):
    original, result = rewritten(name, "all", "float16")
    feeds = B.example_inputs(original)
    (got,) = custom_session(result.model).run(None, feeds)
    (ref,) = run_original(original, feeds)
    assert got.dtype == np.float16
    assert_close([got], [ref], tol=3e-3)  # ORT's float16 conv rounds its partial sums


@pytest.mark.parametrize("name", ["resnet_tiny", "efficientnet_tiny", "unet_tiny"])
def test_rewrite_twice_changes_nothing(name, rewritten):
    _, first = rewritten(name, "all")
    second = rewrite(first.model, conv="all")
    assert second.report.rewrites == [] and second.report.refusals == []
    assert second.model.SerializeToString() == first.model.SerializeToString()


def test_norm_and_conv_together():
    """Norm rules are unaffected by the conv policy (a transformer has no convs)."""
    bert = B.build("bert_tiny")
    assert rewrite(bert, conv="all").report.counts() == rewrite(bert).report.counts() == {"Attention": 2, "SkipLayerNorm": 5}


def test_report_lines_and_json(rewritten):
    _, result = rewritten("conv1d_tiny", "fallback")
    text = result.report.to_text()
    assert "; conv=fallback): 3 rewrites (Conv 3), 4 refusals" in text
    assert ("rewrote  Conv '/wavenet.1/dilated/Conv' <- Relu '/wavenet.1/Relu', Conv '/wavenet.1/dilated/Conv'  "
            "(rules conv; Relu folded in; fallback: asymmetric pads [4, 0] (begin..., end...))") in text
    assert ("refused  Conv (conv) at Conv '/out/conv/Conv': policy fallback: cuDNN runs it well "
            "(1-D, group 1, symmetric pads)") in text
    d = json.loads(result.report.to_json())
    assert d["conv"] == "fallback" and d["counts"] == {"Conv": 3}
    assert d["rewrites"][0]["details"]["activation"] == "Relu"


def test_rewrite_file_and_cli(tmp_path, capsys):
    from trt_fastops import cli

    src = tmp_path / "unet.onnx"
    B.save(B.build("unet_tiny"), src)
    out = tmp_path / "unet.fast.onnx"
    result = rewrite_file(src, out, conv="all", report_path=tmp_path / "r.json")
    assert json.loads((tmp_path / "r.json").read_text())["counts"] == {"Conv": 6, "ConvTranspose": 2}
    assert len(ours(onnx.load(str(out)))) == 8 == len(result.report.rewrites)
    assert cli.main(["rewrite", str(src), "-o", str(out), "--conv", "fallback"]) == 0
    printed = capsys.readouterr().out
    assert "conv=fallback): 1 rewrites (ConvTranspose 1)" in printed
    assert cli.main(["rewrite", str(src), "-o", str(out), "--ops", "ConvTranspose"]) == 0
    assert "(ConvTranspose; conv=all): 2 rewrites (ConvTranspose 2)" in capsys.readouterr().out
    assert cli.main(["rewrite", str(src), "-o", str(out)]) == 0
    assert "0 rewrites (nothing)" in capsys.readouterr().out
    assert cli.main(["rewrite", str(src), "-o", str(out), "--ops", "Conv", "--conv", "off"]) == 2
    assert "ops names Conv but conv='off'" in capsys.readouterr().err
