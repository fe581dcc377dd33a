"""The attention rules one at a time: every variant fuses to one trt_fastops Attention node with the
right inputs and attributes and computes what ONNX Runtime computes for the ORIGINAL graph (through
onnx.reference with the float64 Attention of models/reference.py, and through our ORT CPU op);
every refusal leaves the graph alone and says why; rewriting twice changes nothing."""
from __future__ import annotations

import collections

import numpy as np
import onnx
import pytest

from models import attention_patterns as P
from models import build as B
from models.reference import run_reference
from trt_fastops.rewriter import rewrite

ort = pytest.importorskip("onnxruntime")


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------
def feeds_for(model, seed=1):
    rng = np.random.default_rng(seed)
    feeds = {}
    for inp in model.graph.input:
        tt = inp.type.tensor_type
        shape = [d.dim_value for d in tt.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if dtype == np.bool_:
            arr = rng.integers(0, 2, shape).astype(bool)
            if arr.ndim:
                arr[..., 0] = True  # no fully masked rows (the decomposed graphs average V there)
        elif inp.name in ("attention_mask", "key_padding_mask"):
            arr = np.ones(shape)
            arr[-1, ..., shape[-1] // 2:] = 0  # pad the second half of the last sequence
        elif np.issubdtype(dtype, np.integer):
            arr = rng.integers(0, 2, shape)
        else:
            arr = rng.standard_normal(shape)
        feeds[inp.name] = np.asarray(arr).astype(dtype)
    return feeds


def ours(model):
    return [n for n in model.graph.node if n.domain == "trt_fastops"]


def op_types(model):
    return [n.op_type for n in model.graph.node if n.op_type != "Constant"]


def attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def custom_op_session(model):
    try:
        import trt_fastops
        from trt_fastops.ort import make_session

        trt_fastops.library_path("ort")
    except (ImportError, FileNotFoundError) as e:
        pytest.skip(f"trt_fastops ORT library not available: {e}")
    return make_session(model)


def assert_close(got, ref, dtype):
    tol = 1e-4 if np.dtype(dtype) == np.float32 else 2e-2
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        assert g.shape == r.shape and g.dtype == r.dtype
        np.testing.assert_allclose(g.astype(np.float64), r.astype(np.float64), rtol=tol, atol=tol)


def check_same_numbers(original, result, *, custom=True):
    """The rewritten graph computes what ONNX Runtime computes for the original."""
    onnx.checker.check_model(result.model, full_check=True)
    assert result.model.ir_version <= 13
    feeds = feeds_for(original)
    ref = ort.InferenceSession(original.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    dtype = ref[0].dtype
    assert_close(run_reference(result.model, feeds), ref, dtype)
    if custom:
        assert_close(custom_op_session(result.model).run(None, feeds), ref, dtype)


def rewrote_one(model, rule):
    result = rewrite(model, ops=["Attention"])
    nodes = ours(result.model)
    assert [n.op_type for n in nodes] == ["Attention"], result.report.to_text()
    assert result.report.refusals == [], result.report.to_text()
    (rec,) = result.report.rewrites
    assert rec.rules == [rule] and rec.op == "Attention"
    return result, nodes[0]


def assert_idempotent(result):
    second = rewrite(result.model, ops=result.report.ops)
    assert second.report.rewrites == [] and second.report.refusals == []
    assert second.model.SerializeToString() == result.model.SerializeToString()


def assert_refused(model, reason_part, rule):
    result = rewrite(model, ops=["Attention"])
    assert ours(result.model) == []
    assert op_types(result.model) == op_types(model)
    reasons = [r.reason for r in result.report.refusals if r.rule == rule]
    assert any(reason_part in r for r in reasons), f"{reason_part!r} not in {reasons}"
    assert result.report.rewrites == []
    assert f"refused  Attention ({rule})" in result.report.to_text()
    return result


# ---------------------------------------------------------------------------
# attention_decomposed
# ---------------------------------------------------------------------------
S8 = 1 / np.sqrt(8)
# kwargs -> (form, expected attributes, number of op inputs, op types left besides Attention)
DECOMPOSED = {
    "bert_div_padding": ({"mask": "padding"}, "3d", {"scale": S8, "q_num_heads": 4, "kv_num_heads": 4}, 4,
                         ["Unsqueeze", "Cast", "Sub", "Mul"]),
    "scale_mul": ({"scale": "mul"}, "3d", {"scale": S8}, 3, []),
    "sdpa_sqrt_split": ({"scale": "sqrt_split"}, "3d", {"scale": S8}, 3, []),
    "timm_scale_on_q": ({"scale": "q"}, "3d", {"scale": S8}, 3, []),
    "no_scale": ({"scale": "none"}, "3d", {"scale": 1.0}, 3, []),
    "custom_scale": ({"scale": "div", "scale_value": 0.05}, "3d", {"scale": 0.05}, 3, []),
    "kt_two_transposes": ({"kt": "two"}, "3d", {"scale": S8}, 3, []),
    "gpt2_causal_where": ({"mask": "causal_where", "mask_fill": -10000.0}, "3d", {"is_causal": 1}, 3, []),
    "hf_causal_where_min": ({"mask": "causal_where", "mask_fill": float(np.finfo(np.float32).min)}, "3d",
                            {"is_causal": 1}, 3, []),
    "causal_add_inf": ({"mask": "causal_add"}, "3d", {"is_causal": 1}, 3, []),
    "causal_add_min": ({"mask": "causal_add", "mask_fill": -1e9}, "3d", {"is_causal": 1}, 3, []),
    "masked_fill": ({"mask": "masked_fill"}, "3d", {"is_causal": 1}, 3, []),
    "bottom_right_stays_a_mask": ({"mask": "bottom_right", "kv_seq": 7}, "3d", {}, 4, []),
    "bool_mask_input": ({"mask": "bool_input"}, "3d", {}, 4, []),
    "bool_mask_broadcast_rank2": ({"mask": "bool_input", "mask_shape": [5, 5]}, "3d", {}, 4, []),
    "additive_mask_input": ({"mask": "additive_input", "mask_shape": [1, 4, 5, 5]}, "3d", {}, 4, []),
    "causal_and_padding": ({"mask": "causal_and_padding"}, "3d", {"is_causal": 1}, 4,
                           ["Unsqueeze", "Cast", "Sub", "Mul"]),
    "bool_and_additive": ({"mask": "bool_and_additive"}, "3d", {}, 4, ["Where", "Add"]),
    "sdpa_bool_as_additive": ({"mask": "sdpa_bool"}, "3d", {}, 4, ["Where"]),
    "softmax_float32_casts": ({"softmax_cast": True}, "3d", {}, 3, []),
    "dropout_eval": ({"dropout": "eval"}, "3d", {}, 3, []),
    "softcap": ({"softcap": 5.0, "mask": "causal_where"}, "3d", {"softcap": 5.0, "is_causal": 1}, 3, []),
    "cross_attention": ({"kv_seq": 7, "mask": "padding"}, "3d", {}, 4, ["Unsqueeze", "Cast", "Sub", "Mul"]),
    "v_head_dim_16": ({"v_head_dim": 16}, "3d", {}, 3, []),
    "gqa_repeat_kv": ({"kv_heads": 2, "mask": "causal_add"}, "3d", {"q_num_heads": 4, "kv_num_heads": 2,
                                                                    "is_causal": 1}, 3, []),
    "mqa_repeat_kv": ({"kv_heads": 1}, "3d", {"q_num_heads": 4, "kv_num_heads": 1}, 3, []),
    "opset13": ({"opset": 13, "mask": "padding"}, "3d", {}, 4, ["Unsqueeze", "Cast", "Sub", "Mul"]),
    "rope_4d": ({"rope": True, "mask": "causal_where"}, "4d", {"is_causal": 1}, 3, None),
    "gqa_rope_4d": ({"kv_heads": 2, "rope": True, "softmax_cast": True}, "4d", {}, 3, None),
    "inputs_4d": ({"layout": "4d"}, "4d", {}, 3, ["Transpose", "Reshape"]),
    "inputs_4d_gqa": ({"layout": "4d", "kv_heads": 2}, "4d", {}, 3, ["Transpose", "Reshape"]),
    "mqa_broadcast_4d": ({"layout": "4d", "kv_heads": 1, "repeat_kv": False}, "4d", {}, 3, ["Transpose", "Reshape"]),
    "output_4d": ({"merge": False}, "4d", {}, 3, ["Reshape"] * 3 + ["Transpose"] * 3),
}


@pytest.mark.parametrize("kw,form,want,n_inputs,left", DECOMPOSED.values(), ids=DECOMPOSED.keys())
def test_decomposed_variants(kw, form, want, n_inputs, left):
    m = P.decomposed(**kw)
    result, node = rewrote_one(m, "attention_decomposed")
    a = attrs(node)
    for k, v in want.items():
        assert a[k] == pytest.approx(v, rel=1e-6), (k, a)
    assert "softcap" in a if kw.get("softcap") else "softcap" not in a
    assert ("is_causal" in a) == ("is_causal" in want)
    assert len(node.input) == n_inputs
    rec = result.report.rewrites[0]
    assert rec.details["form"] == form
    if form == "3d":
        assert list(node.input[:3]) == ["q", "k", "v"] and node.output[0] == "y"
        assert a["q_num_heads"] == 4 and a["kv_num_heads"] == (kw.get("kv_heads") or 4)
    else:
        assert "q_num_heads" not in a and "kv_num_heads" not in a
    if left is not None:
        assert sorted(t for t in op_types(result.model) if t != "Attention") == sorted(left)
    assert "Softmax" not in op_types(result.model) and "MatMul" not in op_types(result.model)
    if kw.get("kv_heads", 4) < 4 and kw.get("repeat_kv", True):
        assert "Expand" not in op_types(result.model)  # repeat_kv undone
        assert "repeat_kv" in rec.details["gqa"]
    check_same_numbers(m, result)
    assert_idempotent(result)


def test_decomposed_float16():
    m = P.decomposed(dtype="float16", mask="padding", softmax_cast=True)
    result, node = rewrote_one(m, "attention_decomposed")
    assert attrs(node)["scale"] == pytest.approx(float(np.float16(1) / np.float16(np.sqrt(8))), rel=1e-3)
    check_same_numbers(m, result)


# ---------------------------------------------------------------------------
# attention_decomposed on timm's packed QKV (Linear -> Reshape -> Transpose(2, 0, 3, 1, 4) -> slots)
# ---------------------------------------------------------------------------
# kwargs -> op types left around the Attention (besides Constants)
PACKED = {
    "timm_gather": ({}, ["MatMul", "Add", "Split"]),
    "unbind_split_squeeze": ({"unbind": "split"}, ["MatMul", "Add", "Split"]),
    "unbind_split_num_outputs": ({"unbind": "split18", "opset": 18}, ["MatMul", "Add", "Split"]),
    "sdpa_sqrt_split": ({"scale": "sqrt_split"}, ["MatMul", "Add", "Split"]),
    "scale_div": ({"scale": "div"}, ["MatMul", "Add", "Split"]),
    "merge_0_0_minus1": ({"merge": "infer"}, ["MatMul", "Add", "Split"]),
    "no_bias": ({"bias": False}, ["MatMul", "Split"]),
    "opset11_split_attribute": ({"opset": 11}, ["MatMul", "Add", "Split"]),
    "packed_kv_separate_q": ({"slots": "kv"}, ["MatMul", "Add", "MatMul", "Add", "Split"]),
    "heads_2_dim_16": ({"heads": 2, "head_dim": 16}, ["MatMul", "Add", "Split"]),
}


def _packed_split(model):
    (split,) = [n for n in model.graph.node if n.op_type == "Split"]
    return split


@pytest.mark.parametrize("kw,left", PACKED.values(), ids=PACKED.keys())
def test_packed_qkv_3d(kw, left):
    m = P.packed(**kw)
    result, node = rewrote_one(m, "attention_decomposed")
    heads, d = kw.get("heads", 4), kw.get("head_dim", 8)
    a = attrs(node)
    assert a["q_num_heads"] == a["kv_num_heads"] == heads
    assert a["scale"] == pytest.approx(d ** -0.5, rel=1e-6)
    assert sorted(t for t in op_types(result.model) if t != "Attention") == sorted(left)
    assert node.output[0] == "y"  # the merge Reshape / Transpose are gone
    split = _packed_split(result.model)
    n = 2 if kw.get("slots") == "kv" else 3
    assert attrs(split)["axis"] == 2 and len(split.output) == n
    sizes = attrs(split).get("split")
    if sizes is None:  # opset 13+: an input
        sizes = [int(x) for x in onnx.numpy_helper.to_array(
            next(c for c in result.model.graph.node if c.output[0] == split.input[1]).attribute[0].t)]
    assert list(sizes) == [heads * d] * n
    if n == 3:
        assert list(node.input) == list(split.output)
    else:  # q: the separate projection (its plain head split); k, v: the packed slots
        assert list(node.input[1:]) == list(split.output) and node.input[0] not in split.output
    rec = result.report.rewrites[0]
    assert rec.details["form"] == "3d" and "split once on its last axis" in rec.details["packed"]
    assert "split once on its last axis" in result.report.to_text()
    check_same_numbers(m, result)
    assert_idempotent(result)


def test_packed_qkv_float16():
    m = P.packed(dtype="float16")
    result, node = rewrote_one(m, "attention_decomposed")
    assert attrs(node)["q_num_heads"] == 4 and "Transpose" not in op_types(result.model)
    check_same_numbers(m, result)


def test_packed_qkv_dynamic_batch_and_sequence():
    m = P.packed(dynamic=True)
    result, node = rewrote_one(m, "attention_decomposed")
    assert sorted(op_types(result.model)) == ["Add", "Attention", "MatMul", "Split"]
    onnx.checker.check_model(result.model, full_check=True)
    for b, s in [(1, 3), (3, 7)]:
        x = np.random.default_rng(b).standard_normal((b, s, 32)).astype(np.float32)
        (ref,) = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
        assert_close(custom_op_session(result.model).run(None, {"x": x}), [ref], np.float32)
        assert_close(run_reference(result.model, {"x": x}), [ref], np.float32)


@pytest.mark.parametrize("extra_use", ["qkv", "k"])
def test_packed_qkv_used_elsewhere_takes_the_4d_form(extra_use):
    """A Split would copy the projection while the 5-D Transpose stays for the other user: the
    4-D form reads the slots as they are instead."""
    m = P.packed(extra_use=extra_use)
    result, node = rewrote_one(m, "attention_decomposed")
    assert result.report.rewrites[0].details["form"] == "4d" and "q_num_heads" not in attrs(node)
    assert "Split" not in op_types(result.model) and op_types(result.model).count("Gather") == 3
    check_same_numbers(m, result)


def test_vit_block_has_no_head_transposes():
    """models/ ViT (timm export): per layer one Split feeds the Attention and its 3-D output goes
    straight into the projection; the only Reshape / Transpose left are the patch embedding's."""
    original = B.build("vit_tiny")
    result = rewrite(original)
    counts = collections.Counter(op_types(result.model))
    layers = 2
    assert counts["Attention"] == counts["Split"] == layers
    assert counts["Transpose"] == counts["Reshape"] == 1 and counts["Gather"] == 0, counts
    for node in ours(result.model):
        if node.op_type == "Attention":
            split = next(n for n in result.model.graph.node if n.output and n.output[0] == node.input[0])
            assert split.op_type == "Split" and list(node.input) == list(split.output)
            user = next(n for n in result.model.graph.node if node.output[0] in n.input)
            assert user.op_type == "MatMul"  # attn.proj
    feeds = B.example_inputs(original)
    ref = ort.InferenceSession(original.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    assert_close(custom_op_session(result.model).run(None, feeds), ref, np.float32)


def test_decomposed_report_text():
    result = rewrite(P.decomposed(kv_heads=2, mask="causal_where"), ops=["Attention"])
    text = result.report.to_text()
    assert "rewrote  Attention" in text and "causal mask -> is_causal=1" in text
    assert "repeat_kv x2 undone" in text and "3D Q/K/V" in text
    rec = result.report.rewrites[0]
    assert {"MatMul", "Softmax", "Where", "Div", "Expand", "Unsqueeze"} <= set(rec.replaced_ops)


DECOMPOSED_REFUSALS = {
    "dropout_training": ({"dropout": "train"}, "runs in training mode"),
    "dropout_runtime_mode": ({"dropout": "runtime"}, "training_mode input 'training' of Dropout '/Dropout' is not a "
                                                     "constant"),
    "softmax_axis": ({"softmax_axis": 2}, "has axis=2; attention normalizes over the keys"),
    "softmax_default_axis_opset11": ({"softmax_axis": 1, "opset": 11}, "has axis=1"),
    "scale_graph_input": ({"scale": "input"}, "the scale 's' of Mul '/Mul' is not a constant (a graph input)"),
    "scale_per_head_tensor": ({"scale": "tensor"}, "scales the scores by a tensor of shape [1, 4, 1, 1], not a scalar"),
    "scale_after_additive_mask": ({"scale": "after_mask", "mask": "padding"}, "is added before the scale"),
    "probabilities_returned": ({"expose": "probs"}, "intermediate value '/Softmax_output_0' of Softmax '/Softmax' is a "
                                                    "graph output"),
    "scores_returned": ({"expose": "scores"}, "intermediate value '/Div_output_0' of Div '/Div' is a graph output"),
    "where_fill_not_masking": ({"mask": "causal_where", "mask_fill": -5.0}, "the Where fill is -5"),
    "mask_broadcasts_keys": ({"mask": "additive_input", "mask_shape": [2, 1, 5, 1]}, "broadcasts over the keys"),
}


@pytest.mark.parametrize("kw,reason", DECOMPOSED_REFUSALS.values(), ids=DECOMPOSED_REFUSALS.keys())
def test_decomposed_refusals(kw, reason):
    result = assert_refused(P.decomposed(**kw), reason, "attention_decomposed")
    # one refusal per attention (the 3-D and 4-D variants say the same once)
    assert len([r for r in result.report.refusals if r.rule == "attention_decomposed"]) == 1


def test_softmax_not_from_a_matmul_is_not_reported():
    # Softmax(x) @ v without a Q.K^T: not attention, no refusal noise
    g = P.GraphBuilder("x")
    x = g.input("x", onnx.TensorProto.FLOAT, [2, 4, 5, 5])
    v = g.input("v", onnx.TensorProto.FLOAT, [2, 4, 5, 8])
    y = g.node("MatMul", [g.node("Softmax", [x], axis=-1), v], outputs=["y"])
    g.outputs.append(onnx.helper.make_tensor_value_info(y, onnx.TensorProto.FLOAT, [2, 4, 5, 8]))
    result = rewrite(g.model(17), ops=["Attention"])
    assert result.report.rewrites == [] and result.report.refusals == []


# ---------------------------------------------------------------------------
# attention (the ONNX op)
# ---------------------------------------------------------------------------
ONNX_ATTENTION = {
    "3d": {},
    "4d": {"layout": "4d"},
    "causal": {"attrs": {"is_causal": 1}},
    "gqa_3d": {"kv_heads": 2},
    "mqa_4d": {"kv_heads": 1, "layout": "4d"},
    "bool_mask": {"mask": "bool"},
    "additive_mask": {"mask": "additive"},
    "past_present_causal": {"past": 3, "outputs": 3, "attrs": {"is_causal": 1}},
    "softcap_scale": {"attrs": {"softcap": 3.0, "scale": 0.2}},
    "softmax_precision_float": {"attrs": {"softmax_precision": 1}},
    "opset24": {"opset": 24, "mask": "bool"},
    "float16": {"dtype": "float16", "mask": "additive"},
}


@pytest.mark.parametrize("kw", ONNX_ATTENTION.values(), ids=ONNX_ATTENTION.keys())
def test_onnx_attention(kw):
    m = P.onnx_attention(**kw)
    original = m.graph.node[0]
    result, node = rewrote_one(m, "attention")
    assert list(node.input) == list(original.input)
    assert list(node.output) == list(original.output)
    a = attrs(node)
    for k, v in attrs(original).items():
        if k not in ("left_window_size", "right_window_size"):
            assert a[k] == pytest.approx(v), k
    check_same_numbers(m, result)
    assert_idempotent(result)


def test_onnx_attention_opset25_without_window():
    # ONNX Runtime 1.31 does not know Attention-25: compared with onnx's reference instead
    m = P.onnx_attention(opset=25, attrs={"left_window_size": -1, "right_window_size": -1, "is_causal": 1})
    result, node = rewrote_one(m, "attention")
    assert attrs(node) == {"is_causal": 1, "q_num_heads": 4, "kv_num_heads": 4}
    feeds = feeds_for(m)
    from onnx.reference import ReferenceEvaluator

    assert_close(custom_op_session(result.model).run(None, feeds), ReferenceEvaluator(m).run(None, feeds), "float32")


def test_onnx_attention_unused_present_outputs_are_dropped():
    m = P.onnx_attention(past=2, outputs=3)
    del m.graph.output[1:]
    result, node = rewrote_one(m, "attention")
    assert list(node.output) == ["y"]
    check_same_numbers(m, result)


ONNX_ATTENTION_REFUSALS = {
    "qk_matmul_output": ({"outputs": 4}, "output qk_matmul_output is used"),
    "nonpad_kv_seqlen": ({"opset": 24, "nonpad": True}, "has the nonpad_kv_seqlen input"),
    "sliding_window": ({"opset": 25, "attrs": {"left_window_size": 2}}, "left_window_size=2 (sliding-window"),
    "softmax_precision_double": ({"attrs": {"softmax_precision": 11}}, "softmax_precision=11 (float64)"),
}


@pytest.mark.parametrize("kw,reason", ONNX_ATTENTION_REFUSALS.values(), ids=ONNX_ATTENTION_REFUSALS.keys())
def test_onnx_attention_refusals(kw, reason):
    assert_refused(P.onnx_attention(**kw), reason, "attention")


# ---------------------------------------------------------------------------
# attention_mha (com.microsoft MultiHeadAttention)
# ---------------------------------------------------------------------------
MHA = {
    "plain": ({}, 3, []),
    "qkv_bias": ({"bias": True}, 3, ["Slice", "Add"] * 3),
    "key_padding_mask_2d": ({"key_padding_mask": "2d"}, 4, ["Greater", "Where", "Unsqueeze"]),
    "key_padding_mask_3d": ({"key_padding_mask": "3d"}, 4, ["Greater", "Where", "Unsqueeze"]),
    "mask_filter_value": ({"key_padding_mask": "2d", "mask_filter_value": -3.0}, 4, ["Greater", "Where", "Unsqueeze"]),
    "attention_bias": ({"attention_bias": True}, 4, []),
    "bias_mask_and_attention_bias": ({"bias": True, "key_padding_mask": "2d", "attention_bias": True}, 4,
                                     ["Slice", "Add"] * 3 + ["Greater", "Where", "Unsqueeze", "Add"]),
    "unidirectional": ({"unidirectional": 1}, 3, []),
    "scale": ({"scale": 0.2}, 3, []),
    "past_present_unidirectional": ({"past": 3, "unidirectional": 1, "outputs": 3}, 6, []),
    "past_present": ({"past": 3, "outputs": 3}, 6, []),
    "cross_attention": ({"kv_seq": 7}, 3, []),
    "float16": ({"dtype": "float16", "bias": True, "key_padding_mask": "2d"}, 4,
                ["Slice", "Add"] * 3 + ["Greater", "Where", "Unsqueeze"]),
}


@pytest.mark.parametrize("kw,n_inputs,left", MHA.values(), ids=MHA.keys())
def test_mha(kw, n_inputs, left):
    m = P.mha(**kw)
    result, node = rewrote_one(m, "attention_mha")
    a = attrs(node)
    assert a["q_num_heads"] == a["kv_num_heads"] == 4
    assert a.get("is_causal", 0) == kw.get("unidirectional", 0)
    assert a.get("scale", 0.0) == pytest.approx(kw.get("scale", 0.0))
    assert len(node.input) == n_inputs and list(node.output) == list(m.graph.node[-1].output)
    assert sorted(t for t in op_types(result.model) if t != "Attention") == sorted(left)
    check_same_numbers(m, result)
    assert_idempotent(result)


MHA_REFUSALS = {
    "packed_qkv": ({"packed": "qkv"}, "has packed QKV"),
    "packed_kv": ({"packed": "kv"}, "has packed KV"),
    "bnsh_key_value": ({"kv_layout": "bnsh"}, "only the 3-D [B, L, D] form is mapped"),
    "key_lengths_mask": ({"key_padding_mask": "lengths"}, "has shape [2]; only [B, T] and [B, S, T] masks"),
    "qk_output": ({"outputs": 4}, "output qk is used"),
    "unidirectional_cross": ({"unidirectional": 1, "kv_seq": 7}, "aligns that mask differently"),
}


@pytest.mark.parametrize("kw,reason", MHA_REFUSALS.values(), ids=MHA_REFUSALS.keys())
def test_mha_refusals(kw, reason):
    assert_refused(P.mha(**kw), reason, "attention_mha")


# ---------------------------------------------------------------------------
# whole models (exporter-style): only the Attention rules
# ---------------------------------------------------------------------------
# name -> (3-D form, causal, kv heads of the op's K)
ATTENTION_MODELS = {
    "bert_tiny": ("3d", False, 4),
    "bert_tiny_dynamic": ("3d", False, 4),
    "gpt_tiny": ("3d", True, 4),
    "llama_tiny": ("3d", True, 4),
    "llama_tiny_gqa": ("4d", True, 2),
    "llama_tiny_gqa_norope": ("3d", True, 2),
    "llama_tiny_attention_op": ("3d", True, 2),
    "vit_tiny": ("3d", False, 4),   # timm's packed QKV: one Split of the projection feeds the 3-D form
}


@pytest.fixture(scope="module")
def attention_only():
    cache = {}

    def get(name, dtype="float32"):
        if (name, dtype) not in cache:
            model = B.build(name, dtype=dtype)
            cache[name, dtype] = (model, rewrite(model, ops=["Attention"]))
        return cache[name, dtype]

    return get


@pytest.mark.parametrize("name", ATTENTION_MODELS)
def test_models_attention_only(name, attention_only):
    form, causal, kv_heads = ATTENTION_MODELS[name]
    original, result = attention_only(name)
    layers = 2
    nodes = ours(result.model)
    assert [n.op_type for n in nodes] == ["Attention"] * layers
    assert result.report.counts() == {"Attention": layers} and result.report.refusals == []
    counts = collections.Counter(op_types(result.model))
    assert counts["Softmax"] == 0 and counts["Expand"] == 0
    rule = "attention" if name.endswith("attention_op") else "attention_decomposed"
    assert all(r.rules == [rule] for r in result.report.rewrites)
    for node in nodes:
        a = attrs(node)
        assert a.get("is_causal", 0) == int(causal)
        if form == "3d":
            assert a["q_num_heads"] == 4 and a["kv_num_heads"] == kv_heads
        else:
            k_shape = {vi.name: vi for vi in onnx.shape_inference.infer_shapes(result.model).graph.value_info}
            assert "q_num_heads" not in a
            assert k_shape[node.input[1]].type.tensor_type.shape.dim[1].dim_value == kv_heads
    # the norms are left alone
    assert counts["LayerNormalization"] + counts["RMSNormalization"] + counts["ReduceMean"] == \
        collections.Counter(op_types(original))["LayerNormalization"] + \
        collections.Counter(op_types(original))["RMSNormalization"] + \
        collections.Counter(op_types(original))["ReduceMean"]
    onnx.checker.check_model(result.model, full_check=True)
    assert result.model.ir_version == original.ir_version <= 13


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("name", ATTENTION_MODELS)
def test_models_attention_only_numerics(name, dtype, attention_only):
    original, result = attention_only(name, dtype)
    feeds = B.example_inputs(original)
    ref = ort.InferenceSession(original.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    assert_close(custom_op_session(result.model).run(None, feeds), ref, dtype)
    if dtype == "float32":
        assert_close(run_reference(result.model, feeds), ref, dtype)


@pytest.mark.parametrize("name", ATTENTION_MODELS)
def test_models_attention_only_idempotent(name, attention_only):
    _, result = attention_only(name)
    assert_idempotent(result)


def test_ops_filter_and_cli(tmp_path, capsys):
    from trt_fastops import cli

    bert = B.build("bert_tiny")
    assert {n.op_type for n in ours(rewrite(bert, ops=["SkipLayerNorm"]).model)} == {"SkipLayerNorm"}
    assert {n.op_type for n in ours(rewrite(bert).model)} == {"SkipLayerNorm", "Attention"}
    src, out = tmp_path / "bert.onnx", tmp_path / "bert.fast.onnx"
    B.save(bert, src)
    assert cli.main(["rewrite", str(src), "-o", str(out), "--ops", "Attention"]) == 0
    assert "(Attention): 2 rewrites (Attention 2)" in capsys.readouterr().out
    assert [n.op_type for n in ours(onnx.load(str(out)))] == ["Attention"] * 2
