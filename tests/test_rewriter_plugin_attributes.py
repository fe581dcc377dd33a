"""rewrite(plugin_attributes=True): one file for ONNX Runtime and TensorRT's ONNX parser.

Norm nodes get plugin_version / plugin_namespace, `outputs` (bitmask of the present output
slots) when there is more than Y, and no empty-name inputs: a missing middle optional input is
dropped and `inputs` names the remaining slots (plugins/trt/README.md). Our ORT op maps node
positions back to slots through `inputs`, so the same file still runs (and matches) on ORT CPU.
"""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from models import build as B
from models import norm_patterns as P
from trt_fastops.rewriter import rewrite

ort = pytest.importorskip("onnxruntime")

NORMS = ("LayerNorm", "SkipLayerNorm", "RMSNorm")


def session(model):
    try:
        import trt_fastops
        from trt_fastops.ort import make_session

        trt_fastops.library_path("ort")
    except (ImportError, FileNotFoundError) as e:
        pytest.skip(f"trt_fastops ORT library not available: {e}")
    return make_session(model)


def ours(model):
    return [n for n in model.graph.node if n.domain == "trt_fastops"]


def attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def run_original(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def assert_matches_original(original, rewritten, tol=1e-5):
    feeds = B.example_inputs(original)
    ref = run_original(original, feeds)
    got = session(rewritten).run(None, feeds)
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        g, r = np.asarray(g, np.float64), np.asarray(r, np.float64)
        assert g.shape == r.shape
        assert np.isfinite(g).all()
        assert float(np.abs(g - r).max()) <= tol * max(1.0, float(np.abs(r).max()))


def check_plugin_fields(model):
    for node in ours(model):
        a = attrs(node)
        if node.op_type not in NORMS:  # no TensorRT plugin yet (Attention, Conv): no plugin fields
            assert not {"inputs", "outputs", "plugin_version", "plugin_namespace"} & set(a), node.name
            continue
        assert a["plugin_version"] == b"1" and a["plugin_namespace"] == b"trt_fastops"
        assert "" not in node.input, f"empty-name input in {node.name}: {list(node.input)}"
        assert node.output[-1] != ""
        present = sum(1 << k for k, name in enumerate(node.output) if name)
        if present == 1:
            assert "outputs" not in a
        else:
            assert a["outputs"] == present


# (builder kwargs, op, node inputs (slot names), `inputs` or None, `outputs` or None)
CASES = {
    "layer": (dict(), "LayerNorm", ["X", "Scale", "B"], None, None),
    "layer_no_b": (dict(bias=False), "LayerNorm", ["X", "Scale"], None, None),
    "layer_mean_inv": (dict(mean_outputs=True), "LayerNorm", ["X", "Scale", "B"], None, 0b111),
    "skip": (dict(skip_shape=(2, 4, 16)), "SkipLayerNorm", ["X", "Skip", "Scale", "B"], None, None),
    "skip_sum": (dict(skip_shape=(2, 4, 16), sum_used=True), "SkipLayerNorm", ["X", "Skip", "Scale", "B"],
                 None, 0b1001),
    "skip_bias_no_b": (dict(skip_shape=(2, 4, 16), skip_bias="post", bias=False), "SkipLayerNorm",
                       ["X", "Skip", "Scale", "Bias"], 23, None),
    "skip_bias_no_b_sum": (dict(skip_shape=(4, 16), skip_bias="pre", bias=False, sum_used=True), "SkipLayerNorm",
                           ["X", "Skip", "Scale", "Bias"], 23, 0b1001),
    "skip_bias_no_b_mean_sum": (dict(skip_shape=(2, 4, 16), skip_bias="post", bias=False, mean_outputs=True,
                                     sum_used=True), "SkipLayerNorm", ["X", "Skip", "Scale", "Bias"], 23, 0b1111),
    "skip_bias_b_mean": (dict(skip_shape=(2, 4, 16), skip_bias="post", mean_outputs=True), "SkipLayerNorm",
                         ["X", "Skip", "Scale", "B", "Bias"], None, 0b111),
    "rms": (dict(kind="rms"), "RMSNorm", ["X", "Scale"], None, None),
    "rms_skip_sum": (dict(kind="rms", skip_shape=(2, 4, 16), sum_used=True), "RMSNorm", ["X", "Scale", "Skip"],
                     None, 0b11),
    "rms_skip_bias_sum": (dict(kind="rms", skip_shape=(2, 4, 16), skip_bias="post", sum_used=True), "RMSNorm",
                          ["X", "Scale", "Skip", "Bias"], None, 0b11),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_norm_node_fields_and_numerics(case):
    kw, op, slots, inputs, outputs = CASES[case]
    original = P.norm_op(**kw)
    result = rewrite(original, plugin_attributes=True)
    out = result.model
    onnx.checker.check_model(out, full_check=True)
    (node,) = ours(out)
    assert node.op_type == op
    assert len(node.input) == len(slots)
    a = attrs(node)
    assert a.get("inputs") == inputs and a.get("outputs") == outputs
    check_plugin_fields(out)
    assert_matches_original(original, out)
    # without plugin_attributes: positional inputs (an empty B where Bias follows), no masks
    (plain,) = ours(rewrite(original).model)
    assert not {"inputs", "outputs", "plugin_version", "plugin_namespace"} & set(attrs(plain))
    if inputs is not None:
        assert list(plain.input).count("") == 1


@pytest.mark.parametrize("case", ["skip_bias_no_b_mean_sum", "rms_skip_sum", "layer_mean_inv"])
def test_rewrite_twice_with_plugin_attributes_changes_nothing(case):
    first = rewrite(P.norm_op(**CASES[case][0]), plugin_attributes=True)
    second = rewrite(first.model, plugin_attributes=True)
    assert second.report.rewrites == [] and second.report.refusals == []
    assert second.model.SerializeToString() == first.model.SerializeToString()
    # a plain rewrite of the plugin file keeps it as it is too
    assert rewrite(first.model).model.SerializeToString() == first.model.SerializeToString()


TRANSFORMERS = ["bert_tiny", "bert_tiny_decomposed", "gpt_tiny", "llama_tiny", "llama_tiny_rmsop"]


@pytest.mark.parametrize("name", TRANSFORMERS)
def test_tiny_models(name):
    original = B.build(name)
    first = rewrite(original, plugin_attributes=True)
    out = first.model
    onnx.checker.check_model(out, full_check=True)
    assert {n.op_type for n in ours(out)} <= set(NORMS) | {"Attention"} and ours(out)
    check_plugin_fields(out)
    assert_matches_original(original, out)
    second = rewrite(out, plugin_attributes=True)
    assert second.report.rewrites == [] and second.report.refusals == []
    assert second.model.SerializeToString() == out.SerializeToString()


def test_conv_nodes_get_no_plugin_fields():
    original = B.build("resnet_tiny")
    out = rewrite(original, conv="all", plugin_attributes=True).model
    convs = [n for n in ours(out) if n.op_type in ("Conv", "ConvTranspose")]
    assert convs
    for n in convs:
        assert not {"inputs", "outputs", "plugin_version", "plugin_namespace"} & set(attrs(n))


# ---------------------------------------------------------------------------
# The ORT op honours `inputs` / `outputs` (hand-written nodes)
def _skip_ln_model(inputs, node_attrs, outputs=("y",)):
    rng = np.random.default_rng(3)
    inits = [
        helper.make_tensor("scale", TensorProto.FLOAT, [16], rng.normal(1, 0.1, 16).astype(np.float32)),
        helper.make_tensor("b", TensorProto.FLOAT, [16], rng.normal(0, 0.1, 16).astype(np.float32)),
        helper.make_tensor("bias", TensorProto.FLOAT, [16], rng.normal(0, 0.1, 16).astype(np.float32)),
    ]
    node = helper.make_node("SkipLayerNorm", list(inputs), list(outputs), domain="trt_fastops", name="sln")
    node.attribute.extend(helper.make_attribute(k, v) for k, v in node_attrs.items())
    graph_outputs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs if o]
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 16]),
                                            helper.make_tensor_value_info("skip", TensorProto.FLOAT, [2, 3, 16])],
                              graph_outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("trt_fastops", 1)],
                             ir_version=10)


def _feeds():
    rng = np.random.default_rng(4)
    return {"x": rng.normal(size=(2, 3, 16)).astype(np.float32), "skip": rng.normal(size=(2, 3, 16)).astype(np.float32)}


def _reference(feeds, model, with_b):
    w = {t.name: onnx.numpy_helper.to_array(t).astype(np.float64) for t in model.graph.initializer}
    s = feeds["x"].astype(np.float64) + feeds["skip"] + w["bias"]
    mean = s.mean(-1, keepdims=True)
    y = (s - mean) / np.sqrt(((s - mean) ** 2).mean(-1, keepdims=True) + 1e-5) * w["scale"]
    return (y + w["b"] if with_b else y), s


def test_ort_op_maps_compacted_inputs_to_slots():
    feeds = _feeds()
    compact = _skip_ln_model(["x", "skip", "scale", "bias"], {"inputs": 23}, ("y", "", "", "sum"))
    compact.graph.node[0].attribute.append(helper.make_attribute("outputs", 9))
    gap = _skip_ln_model(["x", "skip", "scale", "", "bias"], {}, ("y", "", "", "sum"))
    y1, s1 = session(compact).run(None, feeds)
    y2, s2 = session(gap).run(None, feeds)
    np.testing.assert_array_equal(y1, y2)
    np.testing.assert_array_equal(s1, s2)
    y_ref, s_ref = _reference(feeds, compact, with_b=False)
    np.testing.assert_allclose(y1, y_ref, atol=1e-5)
    np.testing.assert_allclose(s1, s_ref, atol=1e-5)
    # B present through the mask: slots X, Skip, Scale, B, Bias (31) = plain positions
    full = _skip_ln_model(["x", "skip", "scale", "b", "bias"], {"inputs": 31})
    (y3,) = session(full).run(None, feeds)
    np.testing.assert_allclose(y3, _reference(feeds, full, with_b=True)[0], atol=1e-5)
    # B without Bias, compacted the same way as a plain trailing drop: 15
    no_bias = _skip_ln_model(["x", "skip", "scale", "b"], {"inputs": 15})
    (y4,) = session(no_bias).run(None, feeds)
    assert np.isfinite(y4).all()


@pytest.mark.parametrize("inputs,node_attrs,outputs,message", [
    (["x", "skip", "scale", "bias"], {"inputs": 31}, ("y",),
     "SkipLayerNorm: the node has 4 inputs, but attribute 'inputs' = 31 names 5"),
    (["x", "skip", "scale", "bias"], {"inputs": 32}, ("y",),
     "SkipLayerNorm: attribute 'inputs' is 32, expected a bitmask over the 5 input slots"),
    (["x", "skip", "scale", "bias"], {"inputs": 23.0}, ("y",),
     "SkipLayerNorm: attribute 'inputs' is a float, expected an int (a bitmask of input slots)"),
    (["x", "skip", "scale"], {"outputs": 8}, ("y",),
     "SkipLayerNorm: attribute 'outputs' is 8, expected a bitmask over the 4 output slots with bit 0 (Y) set"),
    (["x", "skip", "scale"], {"outputs": 1}, ("y", "", "", "sum"),
     "SkipLayerNorm: output 'Sum'"),
    # X absent from the mask: the op's own rule on required inputs speaks
    (["skip", "scale", "bias"], {"inputs": 22}, ("y",), "SkipLayerNorm: input 'X'"),
])
def test_ort_op_refuses_bad_masks(inputs, node_attrs, outputs, message):
    model = _skip_ln_model(inputs, node_attrs, outputs)
    with pytest.raises(Exception) as e:
        session(model).run(None, _feeds())
    assert message in str(e.value)
    assert "(node 'sln')" in str(e.value)
