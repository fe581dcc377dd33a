"""trt_fastops EmbedLayerNorm through ONNX Runtime's CPU execution provider (the reference,
plugins/norm/embed_cpu.h) against numpy float64, its refusals, and the embed_layer_norm rule
(target "ort") on the zoo's BERT models against ONNX Runtime on the original graph.

Outputs are bound to NaN-filled buffers so an element the op does not write shows up; tables
are random (never zero) and exactly representable in their dtype.
"""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

ort = pytest.importorskip("onnxruntime")

from trt_fastops import DOMAIN, rewrite  # noqa: E402
from trt_fastops.ort import make_session  # noqa: E402

IR_VERSION = 10
SLOTS = ["input_ids", "segment_ids", "word_embedding", "position_embedding", "segment_embedding", "gamma", "beta",
         "position_ids"]
ELEM = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "int32": TensorProto.INT32,
        "int64": TensorProto.INT64}
NP = {"float32": np.float32, "float16": np.float16, "int32": np.int32, "int64": np.int64}
RTOL = {"float32": 2e-6, "float16": 2e-3}
ATOL = {"float32": 2e-6, "float16": 2e-3}


def build(dtype, feeds, *, epsilon=None, present=None, shapes=None, types=None):
    """One EmbedLayerNorm node over graph inputs named after its slots (absent slots: ''),
    Y [B, S, H] of dtype."""
    present = present if present is not None else list(feeds)
    graph_in, node_in = [], []
    for slot in SLOTS:
        if slot not in present:
            node_in.append("")
            continue
        t = (types or {}).get(slot) or (str(feeds[slot].dtype) if slot in feeds else dtype)
        shape = (shapes or {}).get(slot, list(feeds[slot].shape) if slot in feeds else None)
        graph_in.append(helper.make_tensor_value_info(slot, ELEM[t], shape))
        node_in.append(slot)
    while node_in and node_in[-1] == "":
        node_in.pop()
    attrs = {} if epsilon is None else {"epsilon": epsilon}
    node = helper.make_node("EmbedLayerNorm", node_in, ["Y"], domain=DOMAIN, name="embed", **attrs)
    graph = helper.make_graph([node], "embed", graph_in, [helper.make_tensor_value_info("Y", ELEM[dtype], None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)],
                             ir_version=IR_VERSION)


def make_feeds(rng, dtype, *, batch=2, seq=5, hidden=24, vocab=30, positions=8, types=3, segment=True,
               beta=True, position_ids=None, index=np.int64):
    def table(rows, scale=1.0):
        a = (rng.standard_normal((rows, hidden)) * scale).astype(np.float32)
        a[a == 0] = 0.25
        return a.astype(NP[dtype])

    f = {"input_ids": rng.integers(-vocab, vocab, (batch, seq)).astype(index),  # negative: from the end
         "word_embedding": table(vocab), "position_embedding": table(positions, 0.5),
         "gamma": (1 + 0.1 * rng.standard_normal(hidden)).astype(NP[dtype])}
    if segment:
        f["segment_ids"] = rng.integers(0, types, (batch, seq)).astype(np.int32)
        f["segment_embedding"] = table(types, 0.3)
    if beta:
        f["beta"] = (0.1 * rng.standard_normal(hidden)).astype(NP[dtype])
    if position_ids is not None:
        f["position_ids"] = rng.integers(0, positions, (position_ids, seq)).astype(index)
    return f


def reference(f, epsilon=1e-5):
    ids = f["input_ids"]
    batch, seq = ids.shape
    e = np.asarray(f["word_embedding"], np.float64)[ids]  # negative indices wrap, as in ONNX Gather
    if "position_ids" in f:
        pos = np.broadcast_to(f["position_ids"], ids.shape)
    else:
        pos = np.broadcast_to(np.arange(seq), ids.shape)
    e = e + np.asarray(f["position_embedding"], np.float64)[pos]
    if "segment_ids" in f:
        e = e + np.asarray(f["segment_embedding"], np.float64)[f["segment_ids"]]
    mean = e.mean(-1, keepdims=True)
    var = ((e - mean) ** 2).mean(-1, keepdims=True)
    y = (e - mean) / np.sqrt(var + epsilon) * np.asarray(f["gamma"], np.float64)
    return y + np.asarray(f["beta"], np.float64) if "beta" in f else y


def run_poisoned(sess, feeds, shape, npdt):
    io = sess.io_binding()
    for name, arr in feeds.items():
        io.bind_cpu_input(name, np.ascontiguousarray(arr))
    buf = np.full(shape, np.nan, dtype=npdt)
    io.bind_ortvalue_output("Y", ort.OrtValue.ortvalue_from_numpy(buf))
    sess.run_with_iobinding(io)
    return buf


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("case", ["full", "no_segment", "no_beta", "position_ids_1", "position_ids_b", "int32"])
def test_embed_layer_norm_cpu(dtype, case):
    rng = np.random.default_rng(hash((dtype, case)) % 2**32)
    kw = {"no_segment": {"segment": False}, "no_beta": {"beta": False}, "position_ids_1": {"position_ids": 1},
          "position_ids_b": {"position_ids": 2}, "int32": {"index": np.int32}}.get(case, {})
    f = make_feeds(rng, dtype, **kw)
    sess = make_session(build(dtype, f, epsilon=1e-6))
    got = run_poisoned(sess, f, f["input_ids"].shape + (24,), NP[dtype]).astype(np.float64)
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got, reference(f, 1e-6), rtol=RTOL[dtype], atol=ATOL[dtype])


def test_embed_layer_norm_cpu_large_hidden_and_empty():
    rng = np.random.default_rng(3)
    f = make_feeds(rng, "float32", batch=1, seq=3, hidden=4100, segment=False)
    sess = make_session(build("float32", f))
    got = run_poisoned(sess, f, (1, 3, 4100), np.float32)
    np.testing.assert_allclose(got, reference(f), rtol=2e-6, atol=2e-6)
    f = make_feeds(rng, "float32", batch=0, seq=3)
    out = make_session(build("float32", f)).run(None, f)[0]
    assert out.shape == (0, 3, 24)


@pytest.mark.parametrize("slot,value,match", [
    ("input_ids", 30, r"input_ids\[1, 2\] = 30 is out of range \[-30, 30\)"),
    ("input_ids", -31, r"input_ids\[1, 2\] = -31 is out of range"),
    ("segment_ids", 3, r"segment_ids\[1, 2\] = 3 is out of range \[-3, 3\)"),
])
def test_embed_layer_norm_cpu_refuses_bad_index(slot, value, match):
    f = make_feeds(np.random.default_rng(5), "float32")
    f[slot][1, 2] = value
    sess = make_session(build("float32", f))
    with pytest.raises(Exception, match=match):
        sess.run(None, f)


def test_embed_layer_norm_cpu_refuses_long_sequence():
    f = make_feeds(np.random.default_rng(6), "float32", seq=9, positions=8)
    sess = make_session(build("float32", f))
    with pytest.raises(Exception, match=r"sequence length 9 exceeds the 8 rows of input 'position_embedding'"):
        sess.run(None, f)


@pytest.mark.parametrize("change,match", [
    ({"types": {"input_ids": "float32"}}, r"input 'input_ids' \(index 0\) is float32, expected int32 or int64"),
    ({"shapes": {"position_embedding": [8, 16]}}, r"input 'position_embedding' \(index 3\) has shape \[8, 16\]; "
                                                  r"its hidden size 16 differs from 24"),
    ({"present": ["input_ids", "segment_ids", "word_embedding", "position_embedding", "gamma"]},
     r"input 'segment_ids' \(index 1\) is given without input 'segment_embedding' \(index 4\)"),
    ({"types": {"gamma": "float16"}}, r"input 'gamma' \(index 5\) is float16, expected float32"),
    ({"shapes": {"input_ids": [2, 5, 1]}}, r"input 'input_ids' \(index 0\) must be 2-D \[batch, sequence\]"),
])
def test_embed_layer_norm_refusals_at_session_creation(change, match):
    f = make_feeds(np.random.default_rng(7), "float32")
    with pytest.raises(Exception, match=match):
        make_session(build("float32", f, **change))


# ---------------------------------------------------------------------------
# the rule


@pytest.mark.parametrize("name,dims", [("bert_tiny_dynamic", {"batch": 2, "sequence": 8}),
                                       ("bert_tiny_dynamic", {"batch": 1, "sequence": 16})])
def test_rule_on_bert(name, dims):
    from models import build as B

    model = B.build(name, dtype="float32", seed=0)
    ours = rewrite(model, target="ort")
    counts = ours.report.counts()
    assert counts.get("EmbedLayerNorm") == 1, counts
    nodes = [n for n in ours.model.graph.node if n.op_type == "EmbedLayerNorm"]
    assert [n.domain for n in nodes] == [DOMAIN]
    # the position-id slice (its copy) is gone with the lookups
    assert not any(n.op_type == "Slice" for n in ours.model.graph.node)
    assert rewrite(model).report.counts().get("EmbedLayerNorm") is None  # portable: no such op
    feeds = B.example_inputs(model, seed=1, dims=dims)
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = make_session(ours.model).run(None, feeds)
    for r, g in zip(ref, got):
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-4)


def test_rule_refuses_unprovable_positions():
    """Positions sliced from 1 (not 0..S-1): refused, and the report says why."""
    from models import build as B

    model = B.build("bert_tiny_dynamic", dtype="float32", seed=0)
    sl = next(n for n in model.graph.node if n.op_type == "Slice")
    model.graph.initializer.append(numpy_helper.from_array(np.array([1], np.int64), "start_one"))
    sl.input[1] = "start_one"
    onnx.checker.check_model(model)
    result = rewrite(model, target="ort")
    assert "EmbedLayerNorm" not in result.report.counts()
    reasons = [r.reason for r in result.report.refusals if r.rule == "embed_layer_norm"]
    assert reasons and "is not [:, 0:end] of the arange" in reasons[0], reasons
