"""rewrite(plugin_attributes=True): one file for ONNX Runtime and TensorRT's ONNX parser.

Every node of ours gets plugin_version / plugin_namespace (every op has a TensorRT plugin). Norm
and Attention nodes also get `outputs` (bitmask of the present output slots) when there is more
than Y, and no empty-name inputs: a missing middle optional input is dropped and `inputs` names
the remaining slots (plugins/trt/README.md). Conv / ConvTranspose never need either (X, W, B? ->
Y) and their plugin creators do not take them. Our ORT ops map node positions back to slots
through `inputs`, so the same file still runs on ORT CPU and matches the plain rewrite. The
attributes written are the fields the plugin creators declare (getFieldNames), checked against
plugins/trt/*_plugin.cc and the op layers that list the attribute names.
"""
from __future__ import annotations

import re

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from models import attention_patterns as AP
from models import build as B
from models import norm_patterns as P
from trt_fastops.rewriter import PLUGIN_SLOTS, SLOT_MASK_OPS, rewrite

ort = pytest.importorskip("onnxruntime")

NORMS = ("LayerNorm", "SkipLayerNorm", "RMSNorm")
REPO = Path(__file__).resolve().parents[1]
PARSER_ONLY = {"plugin_version", "plugin_namespace"}  # read by TensorRT's ONNX parser, not passed on
SLOT_FIELDS = {"inputs", "outputs"}
A = onnx.AttributeProto
_CONV = {"kernel_shape": A.INTS, "strides": A.INTS, "dilations": A.INTS, "pads": A.INTS, "auto_pad": A.STRING,
         "group": A.INT, "activation": A.STRING}
#: the fields each plugin creator declares (getFieldNames) -> the ONNX attribute kind that carries it
CREATOR_FIELDS = {
    "LayerNorm": {"axis": A.INT, "epsilon": A.FLOAT, "stash_type": A.INT, "inputs": A.INT, "outputs": A.INT},
    "SkipLayerNorm": {"axis": A.INT, "epsilon": A.FLOAT, "inputs": A.INT, "outputs": A.INT},
    "RMSNorm": {"axis": A.INT, "epsilon": A.FLOAT, "stash_type": A.INT, "inputs": A.INT, "outputs": A.INT},
    "Attention": {**{k: A.INT for k in ("is_causal", "kv_num_heads", "q_num_heads", "qk_matmul_output_mode",
                                        "softmax_precision", "left_window_size", "right_window_size",
                                        "packed_qkv")},
                  "scale": A.FLOAT, "softcap": A.FLOAT, "inputs": A.INT, "outputs": A.INT,
                  "schedule_workspace": A.INT},
    "Conv": {**_CONV, "max_workspace_mb": A.INT},
    "ConvTranspose": {**_CONV, "output_padding": A.INTS, "output_shape": A.INTS, "output_crop": A.INTS,
                      "max_workspace_mb": A.INT},
}


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
    if _ort_refuses(model):
        from onnx.reference import ReferenceEvaluator

        return ReferenceEvaluator(model).run(None, feeds)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _ort_refuses(model):
    """ONNX Runtime 1.31's CPU Attention refuses past_key without present_key (onnx's reference takes it)."""
    for n in model.graph.node:
        if n.op_type == "Attention" and n.domain in ("", "ai.onnx"):
            if len(n.input) > 4 and n.input[4] and (len(n.output) < 2 or not n.output[1]):
                return True
    return False


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
    nodes = ours(model)
    assert nodes
    for node in nodes:
        a = attrs(node)
        assert a["plugin_version"] == b"1" and a["plugin_namespace"] == b"trt_fastops", node.name
        fields = CREATOR_FIELDS[node.op_type]
        kinds = {x.name: x.type for x in node.attribute}
        for name in set(a) - PARSER_ONLY:
            # the parser passes only declared fields: anything else would be lost silently
            assert name in fields, f"{node.name}: attribute {name!r} is no field of the {node.op_type} plugin"
            assert kinds[name] == fields[name], f"{node.name}: attribute {name!r} has kind {kinds[name]}"
        assert "" not in node.input, f"empty-name input in {node.name}: {list(node.input)}"
        assert node.output[-1] != ""
        in_slots, out_slots = PLUGIN_SLOTS[node.op_type]
        assert len(node.output) <= len(out_slots)
        present = sum(1 << k for k, name in enumerate(node.output) if name)
        if node.op_type not in SLOT_MASK_OPS:  # conv: X, W, B? -> Y, positions are slots
            assert not SLOT_FIELDS & set(a) and present == 1 and len(node.input) in (2, 3), node.name
            continue
        if present == 1:
            assert "outputs" not in a
        else:
            assert a["outputs"] == present
        if "inputs" in a:
            assert bin(a["inputs"]).count("1") == len(node.input) and a["inputs"] < 1 << len(in_slots)
            assert a["inputs"] != (1 << len(node.input)) - 1  # only written for a gap


def assert_same_as_plain(original, plugin_model, feeds=None):
    """The plugin file and the plain rewrite compute the same numbers on ORT CPU (same kernels)."""
    plain = rewrite(original, conv="all").model
    feeds = B.example_inputs(original) if feeds is None else feeds
    got = session(plugin_model).run(None, feeds)
    ref = session(plain).run(None, feeds)
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        np.testing.assert_array_equal(g, r)


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


TRANSFORMERS = ["bert_tiny", "bert_tiny_decomposed", "gpt_tiny", "llama_tiny", "llama_tiny_rmsop",
                "llama_tiny_gqa", "llama_tiny_attention_op"]


@pytest.mark.parametrize("name", TRANSFORMERS)
def test_tiny_models(name):
    original = B.build(name)
    first = rewrite(original, plugin_attributes=True)
    out = first.model
    onnx.checker.check_model(out, full_check=True)
    got_ops = {n.op_type for n in ours(out)}
    assert got_ops <= set(NORMS) | {"Attention"} and "Attention" in got_ops
    check_plugin_fields(out)
    assert_matches_original(original, out, tol=1e-4)
    assert_same_as_plain(original, out)
    second = rewrite(out, plugin_attributes=True)
    assert second.report.rewrites == [] and second.report.refusals == []
    assert second.model.SerializeToString() == out.SerializeToString()


@pytest.mark.parametrize("name", ["resnet_tiny", "unet_tiny", "conv1d_tiny"])
def test_conv_nets(name):
    original = B.build(name)
    out = rewrite(original, conv="all", plugin_attributes=True).model
    onnx.checker.check_model(out, full_check=True)
    convs = [n for n in ours(out) if n.op_type in ("Conv", "ConvTranspose")]
    assert convs
    if name == "unet_tiny":
        assert {"Conv", "ConvTranspose"} <= {n.op_type for n in convs}
    check_plugin_fields(out)
    for n in convs:
        assert not SLOT_FIELDS & set(attrs(n))
    assert_matches_original(original, out, tol=1e-4)
    assert_same_as_plain(original, out)
    again = rewrite(out, conv="all", plugin_attributes=True)
    assert again.report.rewrites == [] and again.model.SerializeToString() == out.SerializeToString()


# (builder, kwargs, `inputs` or None, `outputs` or None, node inputs)
ATTENTION_CASES = {
    "past_present": (AP.onnx_attention, dict(past=3, outputs=3), 0b110111, 0b111, ["q", "k", "v", "past_key", "past_value"]),
    "past_no_present": (AP.onnx_attention, dict(past=3, outputs=1), 0b110111, None,
                        ["q", "k", "v", "past_key", "past_value"]),
    "past_present_causal_gqa_4d": (AP.onnx_attention, dict(past=2, outputs=3, kv_heads=2, layout="4d",
                                                           attrs={"is_causal": 1}), 0b110111, 0b111, None),
    "mask_past_present": (AP.onnx_attention, dict(mask="bool", past=2, outputs=3), None, 0b111, None),
    "mask_only": (AP.onnx_attention, dict(mask="additive"), None, None, ["q", "k", "v", "mask"]),
    "softcap_scale": (AP.onnx_attention, dict(attrs={"softcap": 3.0, "scale": 0.2}), None, None, ["q", "k", "v"]),
    "mha_past_present": (AP.mha, dict(past=3, outputs=3), 0b110111, 0b111, None),
    "mha_past_present_unidirectional": (AP.mha, dict(past=3, outputs=3, unidirectional=1), 0b110111, 0b111, None),
    "mha_attention_bias": (AP.mha, dict(attention_bias=True), None, None, None),
}


@pytest.mark.parametrize("case", sorted(ATTENTION_CASES))
def test_attention_node_fields_and_numerics(case):
    build, kw, inputs, outputs, node_inputs = ATTENTION_CASES[case]
    original = build(**kw)
    out = rewrite(original, plugin_attributes=True).model
    onnx.checker.check_model(out, full_check=True)
    (node,) = ours(out)
    assert node.op_type == "Attention"
    a = attrs(node)
    assert a.get("inputs") == inputs and a.get("outputs") == outputs
    if node_inputs is not None:
        assert list(node.input) == node_inputs
    check_plugin_fields(out)
    feeds = B.example_inputs(original)
    assert_matches_original(original, out, tol=1e-4)
    assert_same_as_plain(original, out, feeds)
    (plain,) = ours(rewrite(original).model)
    assert not SLOT_FIELDS & set(attrs(plain))
    if inputs is not None:  # the plain rewrite keeps the empty attn_mask by position
        assert list(plain.input).count("") == 1 and len(plain.input) == 6
    second = rewrite(out, plugin_attributes=True)
    assert second.report.rewrites == [] and second.model.SerializeToString() == out.SerializeToString()


def test_attention_unused_present_key_is_a_placeholder_slot():
    # present_value used, present_key not: outputs Y, "", present_value -> outputs = 0b101
    original = AP.onnx_attention(past=2, outputs=3)
    del original.graph.output[1]
    out = rewrite(original, plugin_attributes=True).model
    (node,) = ours(out)
    assert list(node.output)[1] == "" and attrs(node)["outputs"] == 0b101 and attrs(node)["inputs"] == 0b110111
    check_plugin_fields(out)
    assert_matches_original(original, out, tol=1e-4)
    assert_same_as_plain(original, out)


def test_creator_fields_match_the_plugin_sources():
    """CREATOR_FIELDS (what this file checks against) is what the creators declare: each
    creator declares the op layer's attribute names, the norm and Attention creators also
    `inputs` / `outputs`, the Attention creator `schedule_workspace`, the conv creators
    `max_workspace_mb` instead."""
    src = {p.name: p.read_text() for p in (REPO / "plugins").glob("*/*.cc")}
    declares = {name: set(re.findall(r"field_names_\.declare\((\w+)", src[name]))
                for name in ("norm_plugin.cc", "attention_plugin.cc", "conv_plugin.cc")}
    assert declares["norm_plugin.cc"] >= {"FIELD_INPUTS", "FIELD_OUTPUTS"}
    assert declares["attention_plugin.cc"] >= {"FIELD_INPUTS", "FIELD_OUTPUTS"}
    assert "FIELD_INPUTS" not in declares["conv_plugin.cc"] and "FIELD_OUTPUTS" not in declares["conv_plugin.cc"]
    assert 'FIELD_MAX_WORKSPACE = "max_workspace_mb"' in src["conv_plugin.cc"]
    assert 'FIELD_SCHEDULE_WORKSPACE = "schedule_workspace"' in src["attention_plugin.cc"]
    assert "FIELD_SCHEDULE_WORKSPACE" in declares["attention_plugin.cc"]
    assert re.search(r'FIELD_INPUTS = "inputs";\s*constexpr const char\* FIELD_OUTPUTS = "outputs"',
                     (REPO / "plugins/trt/plugin_base.h").read_text())
    # the op layers' attribute lists
    names = re.search(r"ATTR_NAMES\[\] = \{([^}]*)\}", src["attention_op.cc"]).group(1)
    assert set(re.findall(r'"(\w+)"', names)) == set(CREATOR_FIELDS["Attention"]) - SLOT_FIELDS - {"schedule_workspace"}
    conv = dict(re.findall(r'\{"(\w+)", ConvAttrKind::\w+, (true|false)\}', src["conv_op.cc"]))
    kind = dict(re.findall(r'\{"(\w+)", ConvAttrKind::(\w+), (?:true|false)\}', src["conv_op.cc"]))
    to_onnx = {"ints": A.INTS, "int_": A.INT, "string": A.STRING}
    for op in ("Conv", "ConvTranspose"):
        expected = {k: to_onnx[kind[k]] for k, t in conv.items() if op == "ConvTranspose" or t == "false"}
        assert {k: v for k, v in CREATOR_FIELDS[op].items() if k != "max_workspace_mb"} == expected
    assert re.search(r'names = \{"axis", "epsilon"\};\s*if \(norm_signature\(op\)\.has_stash_type\) '
                     r'names\.push_back\("stash_type"\)', src["norm_op.cc"])
    assert set(PLUGIN_SLOTS) == set(CREATOR_FIELDS)


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


# ---------------------------------------------------------------------------
# The conv ORT ops read `inputs` / `outputs` as every op does (one shared helper): for X, W, B? -> Y
# a valid mask is the positions; a mask that contradicts the node is refused with the same messages.
def _conv_model(inputs, node_attrs, op="Conv"):
    rng = np.random.default_rng(5)
    w_shape = [4, 3, 3, 3] if op == "Conv" else [3, 4, 3, 3]
    inits = [helper.make_tensor("w", TensorProto.FLOAT, w_shape, rng.normal(size=w_shape).astype(np.float32)),
             helper.make_tensor("b", TensorProto.FLOAT, [4], rng.normal(size=4).astype(np.float32))]
    node = helper.make_node(op, list(inputs), ["y"], domain="trt_fastops", name="cv", kernel_shape=[3, 3],
                            pads=[1, 1, 1, 1])
    node.attribute.extend(helper.make_attribute(k, v) for k, v in node_attrs.items())
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("trt_fastops", 1)],
                             ir_version=10)


@pytest.mark.parametrize("op", ["Conv", "ConvTranspose"])
def test_conv_ort_op_accepts_masks_that_match_positions(op):
    x = {"x": np.random.default_rng(6).normal(size=(2, 3, 6, 6)).astype(np.float32)}
    (ref,) = session(_conv_model(["x", "w", "b"], {}, op)).run(None, x)
    assert np.isfinite(ref).all()
    for inputs, mask in ((["x", "w", "b"], {"inputs": 7}), (["x", "w", "b"], {"inputs": 7, "outputs": 1}),
                         (["x", "w", "b"], {"plugin_version": "1", "plugin_namespace": "trt_fastops"})):
        (y,) = session(_conv_model(inputs, mask, op)).run(None, x)
        np.testing.assert_array_equal(y, ref)
    (no_bias,) = session(_conv_model(["x", "w"], {"inputs": 3}, op)).run(None, x)
    (plain,) = session(_conv_model(["x", "w"], {}, op)).run(None, x)
    np.testing.assert_array_equal(no_bias, plain)


@pytest.mark.parametrize("inputs,node_attrs,message", [
    (["x", "w", "b"], {"inputs": 3}, "Conv: the node has 3 inputs, but attribute 'inputs' = 3 names 2"),
    (["x", "w", "b"], {"inputs": 8}, "Conv: attribute 'inputs' is 8, expected a bitmask over the 3 input slots"),
    (["x", "w"], {"inputs": 3.0}, "Conv: attribute 'inputs' is a float, expected an int (a bitmask of input slots)"),
    (["x", "w"], {"outputs": 2},
     "Conv: attribute 'outputs' is 2, expected a bitmask over the 1 output slots with bit 0 (Y) set"),
    (["x", "w"], {"outputs": "1"}, "Conv: attribute 'outputs' is a string, expected an int (a bitmask of output slots)"),
    # W absent from the mask: the op's own rule on required inputs speaks
    (["x", "b"], {"inputs": 5}, "Conv: input 'W' (index 1) is missing"),
])
def test_conv_ort_op_refuses_bad_masks(inputs, node_attrs, message):
    with pytest.raises(Exception) as e:
        session(_conv_model(inputs, node_attrs)).run(None, {"x": np.ones((2, 3, 6, 6), np.float32)})
    assert message in str(e.value)
    assert "(node 'cv')" in str(e.value)
