"""The rules one at a time on single-norm graphs: every variant fuses to the right node and
computes the same thing; every refusal leaves the graph alone and says why."""
from __future__ import annotations

import collections

import numpy as np
import onnx
import pytest

from models import norm_patterns as P
from models.reference import run_reference
from trt_fastops.rewriter import rewrite

ort = pytest.importorskip("onnxruntime")


def feeds_for(model, seed=1):
    rng = np.random.default_rng(seed)
    feeds = {}
    for inp in model.graph.input:
        tt = inp.type.tensor_type
        shape = [d.dim_value for d in tt.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        feeds[inp.name] = (np.array(1e-5) if inp.name == "eps" else
                           rng.standard_normal(shape) * 2 + 0.5).astype(dtype)
    return feeds


def ours(model):
    return [n for n in model.graph.node if n.domain == "trt_fastops"]


def op_types(model):
    return [n.op_type for n in model.graph.node if n.op_type != "Constant"]


def _custom_op_session(model):
    try:
        import trt_fastops
        from trt_fastops.ort import make_session

        trt_fastops.library_path("ort")
    except (ImportError, FileNotFoundError):
        return None  # the onnx.reference run below still checks the graph
    return make_session(model)


def check_same_numbers(original, result, tol=1e-5):
    """The rewritten graph (onnx.reference with our numpy ops, and our ORT CPU ops when the
    library is built) computes what ONNX Runtime computes for the original."""
    onnx.checker.check_model(result.model, full_check=True)
    feeds = feeds_for(original)
    ref = ort.InferenceSession(original.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    runs = [run_reference(result.model, feeds)]
    sess = _custom_op_session(result.model)
    if sess is not None:
        runs.append(sess.run(None, feeds))
    for got in runs:
        assert len(got) == len(ref)
        for g, r in zip(got, ref):
            assert g.shape == r.shape and g.dtype == r.dtype
            np.testing.assert_allclose(g.astype(np.float64), r.astype(np.float64), rtol=tol, atol=tol)


def rewrote(model, ops=None, **kw):
    result = rewrite(model, ops=ops, **kw)
    return result, [(n.op_type, list(n.input), list(n.output)) for n in ours(result.model)]


def assert_refused(model, reason_part, *, rule=None, ops=None):
    """Nothing rewritten (the graph is unchanged) and a refusal naming the reason."""
    result = rewrite(model, ops=ops)
    assert ours(result.model) == []
    assert op_types(result.model) == op_types(model)
    reasons = [r.reason for r in result.report.refusals if rule is None or r.rule == rule]
    assert any(reason_part in r for r in reasons), f"{reason_part!r} not in {reasons}"
    assert result.report.rewrites == []
    return result


# ---------------------------------------------------------------------------
# layer_norm / rms_norm (the ONNX ops)
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("kw", [{}, {"bias": False}, {"axis": 1}, {"dtype": "float16"}])
def test_layer_normalization_op(kw):
    m = P.norm_op(**kw)
    result, nodes = rewrote(m)
    assert [n[0] for n in nodes] == ["LayerNorm"] and op_types(result.model) == ["LayerNorm"]
    node = ours(result.model)[0]
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert attrs["axis"] == kw.get("axis", -1) and attrs["stash_type"] == 1
    assert attrs["epsilon"] == pytest.approx(1e-5)
    assert len(node.input) == (2 if kw.get("bias") is False else 3)
    check_same_numbers(m, result, 1e-5 if kw.get("dtype") != "float16" else 2e-3)


def test_layer_normalization_mean_outputs_are_kept():
    m = P.norm_op(mean_outputs=True)
    result, nodes = rewrote(m)
    assert nodes == [("LayerNorm", ["x", "scale", "bias"], ["y", "mean", "inv_std_dev"])]
    check_same_numbers(m, result)


def test_layer_normalization_stash_type_0_is_refused():
    assert_refused(P.norm_op(stash_type=0), "stash_type=0", rule="layer_norm")


def test_rms_normalization_op():
    m = P.norm_op(kind="rms")
    result, nodes = rewrote(m)
    assert nodes == [("RMSNorm", ["x", "scale"], ["y"])]
    check_same_numbers(m, result)


def test_rms_normalization_stash_type_0_is_refused():
    assert_refused(P.norm_op(kind="rms", stash_type=0), "stash_type=0", rule="rms_norm")


# ---------------------------------------------------------------------------
# layer_norm_decomposed
# ---------------------------------------------------------------------------
LN_VARIANTS = {
    "torch_opset13": {},
    "axes_input_opset18": {"opset": 18},
    "mul_square_reciprocal_commuted": {"square": "mul", "norm": "reciprocal", "commuted": True},
    "div_one": {"norm": "div_one"},
    "two_trailing_axes": {"axes": (-2, -1)},
    "positive_axes": {"axes": (2,)},
    "no_scale_no_bias": {"scale": False, "bias": False},
    "bias_only": {"scale": False},
    "scale_only": {"bias": False},
    "scale_from_graph_input": {"scale_input": True},
    "cast_float16": {"cast": True, "dtype": "float16"},
    "cast_float32": {"cast": True},
    "float16": {"dtype": "float16"},
}


@pytest.mark.parametrize("kw", LN_VARIANTS.values(), ids=LN_VARIANTS.keys())
def test_decomposed_layer_norm_variants(kw):
    m = P.layer_norm_decomposed(**kw)
    result, nodes = rewrote(m)
    assert op_types(result.model) == ["LayerNorm"], result.report.to_text()
    node = ours(result.model)[0]
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert attrs["axis"] == (-2 if kw.get("axes") == (-2, -1) else -1)
    assert attrs["epsilon"] == pytest.approx(1e-5, rel=1e-2)  # a (subnormal) float16 constant in the float16 graph
    assert node.input[0] == "x"  # the Cast-around variant takes X before the Cast
    assert len(node.input) == (3 if kw.get("bias", True) else 2)
    assert result.report.rewrites[0].rules == ["layer_norm_decomposed"]
    check_same_numbers(m, result, 2e-3 if kw.get("dtype") == "float16" else 1e-5)


DECOMPOSED_LN_REFUSALS = {
    "reduction_not_over_last_dims": ({"axes": (1,)}, "not the trailing axes ending at the last dim"),
    "keepdims_0": ({"shape": (1, 16, 16), "keepdims": (0, 0)}, "keepdims=0"),
    "mean_and_variance_axes_differ": ({"var_axes": (-2, -1)}, "the mean reduces over axes [2] but the variance over [1, 2]"),
    "eps_from_runtime_input": ({"eps_input": True}, "epsilon 'eps' is not a constant (a graph input)"),
    "pow_exponent_3": ({"exponent": 3.0}, "the Pow exponent is 3, expected 2"),
    "intermediate_used_elsewhere": ({"expose": "std"}, "intermediate value '/Sqrt_output_0' of Sqrt '/Sqrt' is a graph output"),
    "centred_value_used_elsewhere": ({"expose": "d"}, "of Sub '/Sub' is a graph output"),
}


@pytest.mark.parametrize("kw,reason", DECOMPOSED_LN_REFUSALS.values(), ids=DECOMPOSED_LN_REFUSALS.keys())
def test_decomposed_layer_norm_refusals(kw, reason):
    result = assert_refused(P.layer_norm_decomposed(**kw), reason, rule="layer_norm_decomposed")
    # one refusal per norm, naming the nodes of the whole matched pattern
    refusals = [r for r in result.report.refusals if r.rule == "layer_norm_decomposed"]
    assert len(refusals) == 1
    assert refusals[0].node_ops[0] == "ReduceMean" and refusals[0].node_ops[-1] == "Add"
    assert refusals[0].op == "LayerNorm"
    assert "refused  LayerNorm (layer_norm_decomposed)" in result.report.to_text()


def test_decomposed_layer_norm_other_consumer_of_mul_keeps_the_rest():
    # The variance used elsewhere blocks everything (it is inside every variant).
    m = P.layer_norm_decomposed(expose="var")
    assert_refused(m, "'/ReduceMean_1_output_0' of ReduceMean '/ReduceMean_1' is a graph output")


def test_decomposed_layer_norm_incompatible_scale_fuses_the_core_only():
    # Scale [4, 16] for a norm over the last dim [16] would broadcast over rows: not a LayerNorm
    # Scale. The normalization itself still fuses; Mul/Add stay.
    m = P.layer_norm_decomposed(scale_shape=(4, 16))
    result, nodes = rewrote(m)
    assert op_types(result.model) == ["LayerNorm", "Mul", "Add"]
    check_same_numbers(m, result)


def test_decomposed_layer_norm_is_not_taken_by_the_rms_rule():
    # The tail of a layer norm (Pow/ReduceMean/.../Div of the centred value) is an RMS norm
    # of d; with the layer-norm rule refusing, the RMS rule must not fuse it either.
    result = assert_refused(P.layer_norm_decomposed(shape=(1, 16, 16), keepdims=(0, 1)), "keepdims=0")
    assert not any(r.rule == "rms_norm_decomposed" for r in result.report.refusals)


# ---------------------------------------------------------------------------
# rms_norm_decomposed
# ---------------------------------------------------------------------------
RMS_VARIANTS = {
    "hf_llama_cast_float32": {},
    "hf_llama_cast_float16": {"dtype": "float16"},
    "hf_opset13_axes_attribute": {"opset": 13},
    "reciprocal_mul_square": {"cast": False, "norm": "reciprocal", "square": "mul", "commuted": False},
    "div_x_by_sqrt": {"cast": False, "norm": "div"},
    "no_scale": {"cast": False, "norm": "div", "scale": False},
    "no_scale_cast": {"scale": False},
}


@pytest.mark.parametrize("kw", RMS_VARIANTS.values(), ids=RMS_VARIANTS.keys())
def test_decomposed_rms_norm_variants(kw):
    m = P.rms_norm_decomposed(**kw)
    result, nodes = rewrote(m)
    assert op_types(result.model) == ["RMSNorm"], result.report.to_text()
    node = ours(result.model)[0]
    assert node.input[0] == "x"
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert attrs["epsilon"] == pytest.approx(1e-6) and attrs["axis"] == -1
    check_same_numbers(m, result, 2e-3 if kw.get("dtype") == "float16" else 1e-5)


DECOMPOSED_RMS_REFUSALS = {
    "reduction_not_over_last_dims": ({"axes": (1,)}, "not the trailing axes ending at the last dim"),
    "keepdims_0": ({"shape": (1, 16, 16), "keepdims": 0}, "keepdims=0"),
    "eps_from_runtime_input": ({"eps_input": True}, "epsilon 'eps' is not a constant (a graph input)"),
    "pow_exponent_3": ({"exponent": 3.0}, "the Pow exponent is 3, expected 2"),
    "intermediate_used_elsewhere": ({"expose": "var"}, "is a graph output; fusing would drop it"),
}


@pytest.mark.parametrize("kw,reason", DECOMPOSED_RMS_REFUSALS.values(), ids=DECOMPOSED_RMS_REFUSALS.keys())
def test_decomposed_rms_norm_refusals(kw, reason):
    assert_refused(P.rms_norm_decomposed(**kw), reason, rule="rms_norm_decomposed")


# ---------------------------------------------------------------------------
# skip_layer_norm / skip_rms_norm
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("skip_shape", [(2, 4, 16), (1, 4, 16), (4, 16), (16,)])
def test_skip_layer_norm_skip_shapes(skip_shape):
    m = P.norm_op(skip_shape=skip_shape)
    result, nodes = rewrote(m)
    assert nodes == [("SkipLayerNorm", ["x", "skip", "scale", "bias"], ["y"])]
    assert result.report.rewrites[0].rules == ["layer_norm", "skip_layer_norm"]
    assert result.report.rewrites[0].replaced_ops == ["LayerNormalization", "Add"]
    check_same_numbers(m, result)


def test_skip_layer_norm_exposes_sum_when_the_add_has_other_consumers():
    m = P.norm_op(skip_shape=(2, 4, 16), sum_used=True)
    result, nodes = rewrote(m)
    assert nodes == [("SkipLayerNorm", ["x", "skip", "scale", "bias"], ["y", "", "", "/Add_output_0"])]
    assert result.report.rewrites[0].details["sum_output"] is True
    check_same_numbers(m, result)


@pytest.mark.parametrize("where", ["pre", "post"])
def test_skip_layer_norm_folds_a_linear_bias(where):
    m = P.norm_op(skip_shape=(2, 4, 16), skip_bias=where, sum_used=where == "post")
    result, nodes = rewrote(m)
    (node,) = ours(result.model)
    assert node.op_type == "SkipLayerNorm" and node.input[4] == "linear.bias"
    assert op_types(result.model) == ["SkipLayerNorm"] + (["Identity"] if where == "post" else [])
    assert result.report.rewrites[0].details["bias"] is True
    assert result.report.rewrites[0].replaced_ops.count("Add") == 2
    check_same_numbers(m, result)


def test_skip_layer_norm_keeps_mean_outputs():
    m = P.norm_op(skip_shape=(2, 4, 16), mean_outputs=True, sum_used=True)
    result, nodes = rewrote(m)
    assert nodes == [("SkipLayerNorm", ["x", "skip", "scale", "bias"], ["y", "mean", "inv_std_dev", "/Add_output_0"])]
    check_same_numbers(m, result)


def test_skip_layer_norm_over_two_axes():
    m = P.norm_op(axis=1, skip_shape=(4, 16))
    result, nodes = rewrote(m)
    assert [n[0] for n in nodes] == ["SkipLayerNorm"]
    check_same_numbers(m, result)


@pytest.mark.parametrize("skip_shape,axis", [((2, 1, 16), -1), ((1, 16), 1)])
def test_skip_layer_norm_mismatched_skip_shape_is_refused(skip_shape, axis):
    m = P.norm_op(skip_shape=skip_shape, axis=axis)
    result, nodes = rewrote(m)
    # the layer norm itself is still fused; the Add stays
    assert [n[0] for n in nodes] == ["LayerNorm"] and op_types(result.model) == ["Add", "LayerNorm"]
    (refusal,) = result.report.refusals
    assert refusal.rule == "skip_layer_norm" and refusal.node_ops == ["Add", "LayerNorm"]
    assert f"'skip' has shape {list(skip_shape)}".replace("(", "[") in refusal.reason
    assert "broadcast over leading dims only" in refusal.reason
    check_same_numbers(m, result)
    # with only SkipLayerNorm requested nothing is rewritten at all
    assert_refused(m, "broadcast over leading dims only", ops=["SkipLayerNorm"])


def test_skip_layer_norm_bias_not_folded_when_the_inner_sum_is_used():
    # Add(Add(x, skip), bias) where Add(x, skip) is also a graph output: the outer Add alone
    # fuses (X = the inner sum, Skip = the bias, broadcast over rows).
    m = P.norm_op(skip_shape=(2, 4, 16), skip_bias="post")
    inner = m.graph.node[0].output[0]
    m.graph.output.append(onnx.helper.make_tensor_value_info(inner, onnx.TensorProto.FLOAT, [2, 4, 16]))
    result, nodes = rewrote(m)
    assert nodes == [("SkipLayerNorm", [inner, "linear.bias", "scale", "bias"], ["y"])]
    check_same_numbers(m, result)


def test_skip_rms_norm():
    m = P.norm_op(kind="rms", skip_shape=(2, 4, 16), sum_used=True)
    result, nodes = rewrote(m)
    assert nodes == [("RMSNorm", ["x", "scale", "skip"], ["y", "/Add_output_0"])]
    assert result.report.rewrites[0].rules == ["rms_norm", "skip_rms_norm"]
    check_same_numbers(m, result)


def test_skip_rms_norm_with_bias_and_broadcast_skip():
    m = P.norm_op(kind="rms", skip_shape=(4, 16), skip_bias="pre")
    result, nodes = rewrote(m)
    assert nodes == [("RMSNorm", ["x", "scale", "skip", "linear.bias"], ["y"])]
    check_same_numbers(m, result)


# ---------------------------------------------------------------------------
# options
# ---------------------------------------------------------------------------
def test_ops_filter():
    from models import build as B

    bert = B.build("bert_tiny")
    only_ln = rewrite(bert, ops=["LayerNorm"]).model
    counts = collections.Counter(n.op_type for n in only_ln.graph.node)
    assert counts["LayerNorm"] == 5 and counts["SkipLayerNorm"] == 0 and counts["LayerNormalization"] == 0
    # SkipLayerNorm alone fuses Add + the LayerNormalization op directly
    only_skip = rewrite(bert, ops=["SkipLayerNorm"])
    counts = collections.Counter(n.op_type for n in only_skip.model.graph.node)
    assert counts["SkipLayerNorm"] == 5 and counts["LayerNormalization"] == 0
    assert only_skip.report.rewrites[0].rules == ["skip_layer_norm"]
    # ... but not decomposed layer norms, which need "LayerNorm" too
    dec = B.build("bert_tiny_decomposed")
    assert rewrite(dec, ops=["SkipLayerNorm"]).report.rewrites == []
    # rules for other ops do not touch the model
    assert rewrite(bert, ops=["RMSNorm"]).report.rewrites == []
    llama = B.build("llama_tiny")
    assert rewrite(llama, ops="LayerNorm,SkipLayerNorm").report.rewrites == []
    assert rewrite(llama, ops=("RMSNorm",)).report.counts() == {"RMSNorm": 5}


def test_plugin_attributes():
    m = P.norm_op(skip_shape=(2, 4, 16))
    plain = ours(rewrite(m).model)[0]
    assert {a.name for a in plain.attribute} == {"axis", "epsilon"}
    node = ours(rewrite(m, plugin_attributes=True).model)[0]
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert attrs["plugin_version"] == b"1" and attrs["plugin_namespace"] == b"trt_fastops"
