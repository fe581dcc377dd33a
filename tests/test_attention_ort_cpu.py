"""trt_fastops Attention (ONNX Attention-23 semantics) through ONNX Runtime's CPU
execution provider, against a float64 numpy reference on random inputs.

Outputs are bound to NaN-filled buffers (IO binding) so an element the op does
not write shows up. bfloat16 graphs wrap the op between Cast nodes (numpy has
no bfloat16); inputs are generated exactly representable in their dtype so the
casts are exact. Also cross-checked against ONNX Runtime's own CPU Attention
(opset 23) and onnx's reference implementation where they run.

tests/gpu/test_attention_ort_cuda.py imports this module for its helpers
(make_case, build_model, reference, feed_name / out_name).
"""
from __future__ import annotations

import zlib

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

ort = pytest.importorskip("onnxruntime")

from trt_fastops import DOMAIN  # noqa: E402
from trt_fastops.ort import make_session  # noqa: E402

IR_VERSION = 10  # onnxruntime 1.31 reads up to 11; onnx 1.23 would write 12+
INPUTS = ["Q", "K", "V", "attn_mask", "past_key", "past_value"]
OUTPUTS = ["Y", "present_key", "present_value", "qk_matmul_output"]
ELEM = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16,
        "float64": TensorProto.DOUBLE, "int32": TensorProto.INT32, "bool": TensorProto.BOOL}
NP = {"float32": np.float32, "float16": np.float16, "float64": np.float64, "int32": np.int32, "bool": np.bool_}
DTYPES = ["float32", "float16", "bfloat16"]
# Y: a few output ulps (the CPU op accumulates in float64 and rounds once).
TOL = {"float32": 1e-5, "float16": 1e-3, "bfloat16": 8e-3}


# ---------------------------------------------------------------------------
# helpers


def seed_of(key) -> int:
    """A seed that is the same in every process (hash() of a str is salted per process)."""
    return zlib.crc32(repr(key).encode())


def round_bf16(a: np.ndarray) -> np.ndarray:
    """float32 -> nearest bfloat16 (ties to even), returned as float32."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def rand(rng, shape, dtype, *, scale=1.0, offset=0.0):
    """Random values (never zero) exactly representable in `dtype`, as the numpy
    array to feed (bfloat16: float32 holding bfloat16 values)."""
    a = np.asarray(rng.standard_normal(shape) * scale + offset, dtype=np.float32)
    a[a == 0] = 0.5
    if dtype == "bfloat16":
        return round_bf16(a)
    if dtype in ("float64", "float32", "float16"):
        return a.astype(NP[dtype])
    if dtype == "bool":
        return rng.random(shape) > 0.3
    return rng.integers(1, 5, size=shape).astype(NP[dtype])


def make_case(rng, dtype, *, batch=2, q_heads=4, kv_heads=2, q_len=5, kv_len=7, head_dim=8, v_head_dim=None,
              rank=4, past_len=None, mask=None, mask_shape=None, attrs=None, q_scale=1.0):
    """Random feeds and attributes for one node. mask: None, "bool" or "additive";
    mask_shape defaults to the full [batch, q_heads, q_len, total]. past_len: None
    (no past_key / past_value) or the past length (0 allowed). 3-D inputs get
    q_num_heads / kv_num_heads."""
    v_head_dim = head_dim if v_head_dim is None else v_head_dim
    attrs = dict(attrs or {})
    if rank == 4:
        shapes = {"Q": (batch, q_heads, q_len, head_dim), "K": (batch, kv_heads, kv_len, head_dim),
                  "V": (batch, kv_heads, kv_len, v_head_dim)}
    else:
        shapes = {"Q": (batch, q_len, q_heads * head_dim), "K": (batch, kv_len, kv_heads * head_dim),
                  "V": (batch, kv_len, kv_heads * v_head_dim)}
        attrs.setdefault("q_num_heads", q_heads)
        attrs.setdefault("kv_num_heads", kv_heads)
    total = kv_len + (past_len or 0)
    if past_len is not None:
        shapes["past_key"] = (batch, kv_heads, past_len, head_dim)
        shapes["past_value"] = (batch, kv_heads, past_len, v_head_dim)
    feeds = {}
    for slot, shp in shapes.items():
        feeds[slot] = rand(rng, shp, dtype, scale=q_scale if slot == "Q" else 1.0)
    if mask is not None:
        shp = tuple(mask_shape) if mask_shape is not None else (batch, q_heads, q_len, total)
        feeds["attn_mask"] = rand(rng, shp, "bool" if mask == "bool" else dtype, scale=0.7)
    # Keep the dict in slot order (build_model and the feeds follow it).
    return {k: feeds[k] for k in INPUTS if k in feeds}, attrs


def reference(feeds, attrs, outputs=("Y",)):
    """float64 reference of ONNX Attention-23 (opset 23 semantics, fully masked rows -> 0)."""
    f = {k: (v if v.dtype == np.bool_ else np.asarray(v, np.float64)) for k, v in feeds.items()}
    q, k, v = f["Q"], f["K"], f["V"]
    three_d = q.ndim == 3
    if three_d:
        hq, hkv = attrs["q_num_heads"], attrs["kv_num_heads"]
        b = q.shape[0]
        q = q.reshape(b, q.shape[1], hq, q.shape[2] // hq).transpose(0, 2, 1, 3)
        k = k.reshape(b, k.shape[1], hkv, k.shape[2] // hkv).transpose(0, 2, 1, 3)
        v = v.reshape(b, v.shape[1], hkv, v.shape[2] // hkv).transpose(0, 2, 1, 3)
    past = 0
    if "past_key" in f:
        past = f["past_key"].shape[2]
        k = np.concatenate([f["past_key"], k], axis=2)
        v = np.concatenate([f["past_value"], v], axis=2)
    b, hq, sq, d = q.shape
    hkv, total = k.shape[1], k.shape[2]
    scale = float(np.float32(attrs["scale"])) if "scale" in attrs else 1.0 / np.sqrt(d)
    kr = np.repeat(k, hq // hkv, axis=1)  # query head h uses kv head h // (hq / hkv)
    vr = np.repeat(v, hq // hkv, axis=1)
    s = scale * np.einsum("bhid,bhjd->bhij", q, kr)
    cap = float(np.float32(attrs.get("softcap", 0.0)))
    if cap > 0:
        s = cap * np.tanh(s / cap)
    allowed = np.ones(s.shape, bool)
    if "attn_mask" in f:
        m = f["attn_mask"]
        pad = [(0, 0)] * (m.ndim - 1) + [(0, total - m.shape[-1])]
        if m.dtype == np.bool_:
            allowed &= np.broadcast_to(np.pad(m, pad, constant_values=False), s.shape)
        else:
            s = s + np.broadcast_to(np.pad(m, pad, constant_values=-np.inf), s.shape)
    if attrs.get("is_causal", 0):
        i = np.arange(sq)[:, None]
        j = np.arange(total)[None, :]
        allowed &= j <= i + past
    s = np.where(allowed, s, -np.inf)
    mx = s.max(axis=-1, keepdims=True) if total > 0 else np.full(s.shape[:-1] + (1,), -np.inf)
    full = np.isneginf(mx)
    e = np.exp(s - np.where(full, 0.0, mx))
    den = e.sum(axis=-1, keepdims=True)
    p = e / np.where(den == 0, 1.0, den)
    y = p @ vr
    if three_d:
        y = y.transpose(0, 2, 1, 3).reshape(b, sq, hq * y.shape[3])
    ref = {"Y": y, "present_key": k, "present_value": v}
    return {o: ref[o] for o in outputs}


def casts(slot, dtype, mask_dtype=None):
    """True when the slot's graph input goes through float32 + Cast (bfloat16 tensors)."""
    if slot == "attn_mask":
        return mask_dtype == "bfloat16"
    return dtype == "bfloat16"


def feed_name(slot, dtype, mask_dtype=None):
    return slot + "_f32" if casts(slot, dtype, mask_dtype) else slot


def out_name(slot, dtype):
    return slot + "_f32" if dtype == "bfloat16" else slot


def mask_dtype_of(feeds, dtype):
    m = feeds.get("attn_mask")
    if m is None:
        return None
    return "bool" if m.dtype == np.bool_ else dtype


def build_model(dtype, in_shapes, outputs=("Y",), attrs=None, *, in_dtypes=None, node_name="attention",
                op_domain=DOMAIN, opset=23):
    """One Attention node. in_shapes: slot -> graph shape (list; None = unknown rank;
    str entries are symbolic dims); slots not given are omitted (''). outputs: output
    slots requested. in_dtypes: slot -> dtype name overriding `dtype` (the mask:
    "bool" or an additive dtype). bfloat16 tensors enter as float32 through Cast,
    bfloat16 outputs leave through Cast to float32."""
    types = {k: dtype for k in in_shapes}
    types.update(in_dtypes or {})
    pre, post, graph_in, graph_out, node_in = [], [], [], [], []
    for slot in INPUTS:
        if slot not in in_shapes:
            node_in.append("")
            continue
        if types[slot] == "bfloat16":
            graph_in.append(helper.make_tensor_value_info(slot + "_f32", TensorProto.FLOAT, in_shapes[slot]))
            pre.append(helper.make_node("Cast", [slot + "_f32"], [slot], to=TensorProto.BFLOAT16))
        else:
            graph_in.append(helper.make_tensor_value_info(slot, ELEM[types[slot]], in_shapes[slot]))
        node_in.append(slot)
    while node_in and node_in[-1] == "":
        node_in.pop()
    node_out = []
    for slot in OUTPUTS:
        if slot not in outputs:
            node_out.append("")
            continue
        node_out.append(slot)
        if dtype == "bfloat16":
            post.append(helper.make_node("Cast", [slot], [slot + "_f32"], to=TensorProto.FLOAT))
            graph_out.append(helper.make_tensor_value_info(slot + "_f32", TensorProto.FLOAT, None))
        else:
            graph_out.append(helper.make_tensor_value_info(slot, ELEM[dtype], None))
    while node_out and node_out[-1] == "":
        node_out.pop()
    node = helper.make_node("Attention", node_in, node_out, domain=op_domain, name=node_name, **dict(attrs or {}))
    graph = helper.make_graph(pre + [node] + post, f"attention_{dtype}", graph_in, graph_out)
    opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(DOMAIN, 1)] if op_domain == DOMAIN else [])
    return helper.make_model(graph, opset_imports=opsets, ir_version=IR_VERSION)


def model_for(dtype, feeds, attrs, outputs=("Y",), graph_shapes=None, **kw):
    shapes = graph_shapes or {k: list(v.shape) for k, v in feeds.items()}
    in_dtypes = {"attn_mask": mask_dtype_of(feeds, dtype)} if "attn_mask" in feeds else None
    return build_model(dtype, shapes, outputs, attrs, in_dtypes=in_dtypes, **kw)


def graph_feeds(feeds, dtype):
    md = mask_dtype_of(feeds, dtype)
    return {feed_name(k, dtype, md): np.ascontiguousarray(v) for k, v in feeds.items()}


def run_poisoned(sess, feeds, out_specs):
    """Run with outputs bound to NaN-filled buffers (zero-element outputs left to
    ORT). out_specs: graph output name -> (shape, numpy dtype). Returns name -> array."""
    io = sess.io_binding()
    for name, arr in feeds.items():
        io.bind_cpu_input(name, np.ascontiguousarray(arr))
    bufs = {}
    names = []
    for name, (shape, npdt) in out_specs.items():
        names.append(name)
        if int(np.prod(shape)) > 0:
            bufs[name] = np.full(shape, np.nan, dtype=npdt)  # referenced here: the OrtValue borrows it
            io.bind_ortvalue_output(name, ort.OrtValue.ortvalue_from_numpy(bufs[name]))
        else:
            io.bind_output(name, "cpu")
    sess.run_with_iobinding(io)
    got = {n: np.array(v.numpy(), copy=True) for n, v in zip(names, io.get_outputs())}
    for name, buf in bufs.items():  # ORT wrote into our buffers, not new ones
        assert np.array_equal(got[name], buf, equal_nan=True), name
    return got


def out_specs(dtype, outputs, ref):
    npdt = np.float32 if dtype == "bfloat16" else NP[dtype]
    return {out_name(o, dtype): (ref[o].shape, npdt) for o in outputs}


def compare(dtype, got, ref, outputs, what="", tol=None):
    t = TOL[dtype] if tol is None else tol
    for o in outputs:
        g = np.asarray(got[out_name(o, dtype)], np.float64)
        r = ref[o]
        assert g.shape == r.shape, (what, o, g.shape, r.shape)
        assert not np.isnan(g).any(), f"{dtype} {what}: output {o} has unwritten (NaN) elements"
        if o == "Y":
            np.testing.assert_allclose(g, r, rtol=t, atol=t, err_msg=f"{dtype} {what} output {o}")
        else:  # present_key / present_value are copies
            np.testing.assert_array_equal(g, r, err_msg=f"{dtype} {what} output {o}")


def check(dtype, feeds, attrs, outputs=("Y",), *, graph_shapes=None, sess=None, what="", tol=None):
    if sess is None:
        sess = make_session(model_for(dtype, feeds, attrs, outputs, graph_shapes))
    ref = reference(feeds, attrs, outputs)
    got = run_poisoned(sess, graph_feeds(feeds, dtype), out_specs(dtype, outputs, ref))
    compare(dtype, got, ref, outputs, what, tol)
    return sess


# ---------------------------------------------------------------------------
# correctness

# (batch, q_heads, kv_heads, q_len, kv_len, head_dim, v_head_dim)
CONFIGS = [
    (2, 4, 4, 5, 5, 8, 8),        # MHA, square
    (2, 4, 2, 5, 7, 8, 8),        # GQA, Sq < Skv
    (1, 6, 1, 9, 4, 16, 16),      # MQA, Sq > Skv
    (2, 4, 2, 3, 6, 8, 12),       # v head dim differs
    (1, 2, 2, 1, 17, 64, 64),     # decode-like, one query
    (3, 1, 1, 4, 4, 1, 1),        # head dim 1
    (1, 3, 3, 5, 6, 3, 5),        # odd head dims
    (1, 2, 1, 4, 5, 256, 256),    # the largest head dim
    (1, 8, 2, 33, 65, 128, 64),   # bigger, exercises the thread-pool split
]
CONFIG_IDS = ["mha", "gqa", "mqa", "dv", "decode", "d1", "odd", "d256", "big"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rank", [4, 3])
@pytest.mark.parametrize("cfg", CONFIGS, ids=CONFIG_IDS)
def test_shapes(cfg, rank, dtype):
    b, hq, hkv, sq, skv, d, dv = cfg
    rng = np.random.default_rng(seed_of((cfg, rank, dtype)))
    feeds, attrs = make_case(rng, dtype, batch=b, q_heads=hq, kv_heads=hkv, q_len=sq, kv_len=skv, head_dim=d,
                             v_head_dim=dv, rank=rank)
    check(dtype, feeds, attrs)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rank", [4, 3])
@pytest.mark.parametrize("sq,skv,past", [(6, 6, None), (4, 9, None), (9, 4, None), (1, 1, None), (3, 3, 5),
                                         (1, 1, 12), (5, 2, 3), (4, 4, 0)])
def test_causal(sq, skv, past, rank, dtype):
    """Top-left without past (j <= i), offset by the past length with it (j <= i + past)."""
    rng = np.random.default_rng(sq * 100 + skv * 10 + (past or 0) + rank)
    feeds, attrs = make_case(rng, dtype, q_len=sq, kv_len=skv, past_len=past, rank=rank, attrs={"is_causal": 1})
    outs = ("Y", "present_key", "present_value") if past is not None else ("Y",)
    check(dtype, feeds, attrs, outs)


TOTAL = 7  # kv_len 4 + past 3 in the mask tests below
MASK_SHAPES = [
    (2, 4, 5, TOTAL), (1, 4, 5, TOTAL), (2, 1, 5, TOTAL), (2, 4, 1, TOTAL), (1, 1, 1, TOTAL), (2, 1, 1, TOTAL),
    (4, 5, TOTAL), (1, 5, TOTAL), (4, 1, TOTAL), (1, 1, TOTAL),
    (5, TOTAL), (1, TOTAL),
    (TOTAL,),
    # shorter than total: the missing keys are masked
    (2, 4, 5, 4), (4, 5, 3), (5, 1), (1, 6), (2,), (5, 0),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["bool", "additive"])
@pytest.mark.parametrize("mask_shape", MASK_SHAPES, ids=["x".join(map(str, s)) or "scalar" for s in MASK_SHAPES])
def test_masks(mask_shape, kind, dtype):
    """Every broadcast rank (1 ... 4) and pattern, and masks shorter than total_seq."""
    rng = np.random.default_rng(seed_of((mask_shape, kind, dtype)))
    feeds, attrs = make_case(rng, dtype, batch=2, q_heads=4, kv_heads=2, q_len=5, kv_len=4, past_len=3,
                             mask=kind, mask_shape=mask_shape)
    check(dtype, feeds, attrs, ("Y", "present_key", "present_value"))


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("kind", ["bool", "additive"])
@pytest.mark.parametrize("rank", [4, 3])
def test_mask_with_causal(rank, kind, dtype):
    """Causal composed with masks, some broadcast over q_seq: the causal frontier is
    per query row, as ONNX's function body (Range over Q's length) computes it. (onnx's
    Python reference takes q_seq from such a mask's shape instead and gives every row
    row 0's frontier; ONNX Runtime refuses such masks.)"""
    rng = np.random.default_rng(rank * 10 + len(kind))
    for sq, skv, past in [(5, 5, None), (3, 8, None), (4, 2, 5)]:
        total = skv + (past or 0)
        for shape in [(sq, total), (1, 4, 1, total), (2, 1, sq, total - 1)]:
            feeds, attrs = make_case(rng, dtype, batch=2, q_heads=4, kv_heads=1, q_len=sq, kv_len=skv,
                                     past_len=past, rank=rank, mask=kind, mask_shape=shape,
                                     attrs={"is_causal": 1})
            check(dtype, feeds, attrs, what=f"sq={sq} skv={skv} past={past} mask={shape}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("softcap,scale", [(2.0, None), (0.5, None), (30.0, 0.3), (None, 0.01), (None, 2.5),
                                           (None, 0.0), (0.0, None)])
def test_softcap_and_scale(softcap, scale, dtype):
    rng = np.random.default_rng(17)
    attrs = {}
    if softcap is not None:
        attrs["softcap"] = softcap
    if scale is not None:
        attrs["scale"] = scale
    for rank in (4, 3):
        feeds, attrs_r = make_case(rng, dtype, rank=rank, attrs=attrs, q_scale=3.0, mask="additive",
                                   mask_shape=(5, 7))
        check(dtype, feeds, attrs_r, what=f"rank {rank}")


def test_softcap_keeps_masked_keys_masked():
    """softcap comes before the mask: a -inf additive entry stays -inf (ONNX test_attention_4d_softcap_neginf_mask)."""
    rng = np.random.default_rng(3)
    feeds, attrs = make_case(rng, "float32", mask="additive", mask_shape=(5, 7), attrs={"softcap": 0.5})
    feeds["attn_mask"][:, ::2] = -np.inf
    check("float32", feeds, attrs)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rank", [4, 3])
@pytest.mark.parametrize("outs", [("Y", "present_key", "present_value"), ("Y",), ("Y", "present_key"),
                                  ("Y", "present_value")], ids=["both", "none", "key", "value"])
@pytest.mark.parametrize("heads", [(4, 4), (4, 2), (6, 1)], ids=["mha", "gqa", "mqa"])
def test_past_and_present(heads, outs, rank, dtype):
    """present = concat(past, new); without the present outputs the concatenation
    goes to scratch from ORT's allocator."""
    hq, hkv = heads
    rng = np.random.default_rng(seed_of((heads, outs, rank, dtype)))
    for sq, skv, past, dv in [(1, 1, 9, 8), (4, 4, 6, 12), (3, 5, 0, 8), (2, 3, 1, 4)]:
        feeds, attrs = make_case(rng, dtype, q_heads=hq, kv_heads=hkv, q_len=sq, kv_len=skv, past_len=past,
                                 v_head_dim=dv, rank=rank, mask="bool", mask_shape=(sq, skv + past))
        check(dtype, feeds, attrs, outs, what=f"sq={sq} skv={skv} past={past}")


@pytest.mark.parametrize("rank", [4, 3])
def test_present_without_past(rank):
    """No past: present_key / present_value are K / V laid out as 4-D (as ONNX's reference returns them)."""
    rng = np.random.default_rng(40 + rank)
    feeds, attrs = make_case(rng, "float16", rank=rank, kv_heads=2, q_heads=4, v_head_dim=6)
    check("float16", feeds, attrs, ("Y", "present_key", "present_value"))


@pytest.mark.parametrize("dtype", DTYPES)
def test_fully_masked_rows_are_zero(dtype):
    rng = np.random.default_rng(5)
    # bool: rows 1 and 3 all false; additive: row 2 all -inf; a 0-length mask masks everything.
    feeds, attrs = make_case(rng, dtype, mask="bool", mask_shape=(5, 7))
    feeds["attn_mask"][1] = False
    feeds["attn_mask"][3] = False
    ref = reference(feeds, attrs)["Y"]
    assert (ref[:, :, [1, 3]] == 0).all() and (ref[:, :, [0, 2, 4]] != 0).any()
    check(dtype, feeds, attrs)
    feeds, attrs = make_case(rng, dtype, mask="additive", mask_shape=(1, 1, 5, 7), past_len=None)
    feeds["attn_mask"][..., 2, :] = -np.inf
    check(dtype, feeds, attrs)
    feeds, attrs = make_case(rng, dtype, mask="bool", mask_shape=(5, 0))
    assert (reference(feeds, attrs)["Y"] == 0).all()
    check(dtype, feeds, attrs)
    # causal with a boolean mask hiding the only visible key of row 0
    feeds, attrs = make_case(rng, dtype, mask="bool", mask_shape=(5, 5), kv_len=5, attrs={"is_causal": 1})
    feeds["attn_mask"][0, 0] = False
    check(dtype, feeds, attrs)


@pytest.mark.parametrize("rank", [4, 3])
@pytest.mark.parametrize("sizes", [dict(batch=0), dict(q_len=0), dict(kv_len=0), dict(kv_len=0, past_len=0),
                                   dict(kv_len=0, past_len=3)], ids=["b0", "sq0", "skv0", "total0", "skv0past3"])
def test_empty(sizes, rank):
    """Zero-sized dims: nothing to do, except kv 0 (no keys: every row fully masked -> zeros)."""
    rng = np.random.default_rng(6)
    feeds, attrs = make_case(rng, "float32", rank=rank, **sizes)
    outs = ("Y", "present_key", "present_value") if "past_len" in sizes else ("Y",)
    check("float32", feeds, attrs, outs)


def test_empty_with_mask():
    """A mask broadcast over a 0-sized dim has no elements; nothing to compute."""
    rng = np.random.default_rng(61)
    for kind in ("bool", "additive"):
        feeds, attrs = make_case(rng, "float16", q_len=0, mask=kind, mask_shape=(0, 7))
        check("float16", feeds, attrs)
        feeds, attrs = make_case(rng, "float16", batch=0, mask=kind, mask_shape=(0, 4, 5, 7))
        check("float16", feeds, attrs)


def compact(model, drop):
    """The rewriter's --plugin-attributes form: the node's inputs without the
    slots in `drop` (no empty names) and 'inputs' = bitmask of the slots kept."""
    node = model.graph.node[[n.op_type for n in model.graph.node].index("Attention")]
    names = list(node.input) + [""] * (len(INPUTS) - len(node.input))
    kept = [(i, n) for i, n in enumerate(names) if n and i not in drop]
    del node.input[:]
    node.input.extend(n for _, n in kept)
    node.attribute.append(helper.make_attribute("inputs", sum(1 << i for i, _ in kept)))
    return model


@pytest.mark.parametrize("rank", [4, 3])
def test_inputs_outputs_bitmask_attributes(rank):
    """past_key / past_value without attn_mask, as TensorRT needs it: no empty input
    name, 'inputs' = 0b110111 names the slots; 'outputs' = 7 (Y, present_key, present_value)."""
    rng = np.random.default_rng(62)
    outs = ("Y", "present_key", "present_value")
    feeds, attrs = make_case(rng, "float16", rank=rank, past_len=3, attrs={"is_causal": 1})
    model = compact(model_for("float16", feeds, attrs, outs), drop=())
    model.graph.node[0].attribute.append(helper.make_attribute("outputs", 7))
    assert list(model.graph.node[0].input) == ["Q", "K", "V", "past_key", "past_value"]
    check("float16", feeds, attrs, outs, sess=make_session(model))
    # With a mask too: nothing dropped, the mask says every slot.
    feeds, attrs = make_case(rng, "float16", rank=rank, past_len=3, mask="bool", mask_shape=(5, 10))
    model = compact(model_for("float16", feeds, attrs, outs), drop=())
    check("float16", feeds, attrs, outs, sess=make_session(model))
    # Only Y requested with 'outputs' = 1.
    feeds, attrs = make_case(rng, "float16", rank=rank, past_len=2)
    model = compact(model_for("float16", feeds, attrs), drop=())
    model.graph.node[0].attribute.append(helper.make_attribute("outputs", 1))
    check("float16", feeds, attrs, sess=make_session(model))


def test_inputs_outputs_bitmask_errors():
    rng = np.random.default_rng(63)
    feeds, attrs = make_case(rng, "float32", past_len=3)
    gf = graph_feeds(feeds, "float32")
    model = compact(model_for("float32", feeds, attrs), drop=())
    model.graph.node[0].attribute[-1].i = 0b000111  # names 3 slots, the node has 5 inputs
    expect_error(model, gf, "Attention: the node has 5 inputs, but attribute 'inputs' = 7 names 3")
    model = compact(model_for("float32", feeds, attrs), drop=())
    model.graph.node[0].attribute[-1].i = 64
    expect_error(model, gf, "Attention: attribute 'inputs' is 64, expected a bitmask over the 6 input slots")
    model = model_for("float32", feeds, attrs, ("Y", "present_key"))
    model.graph.node[0].attribute.append(helper.make_attribute("outputs", 1))
    expect_error(model, gf, "Attention: output 'present_key' (index 1) is used but attribute 'outputs' = 1 "
                            "does not include it")
    model = model_for("float32", feeds, attrs)
    model.graph.node[0].attribute.append(helper.make_attribute("outputs", 2))
    expect_error(model, gf, "Attention: attribute 'outputs' is 2, expected a bitmask over the 4 output slots with "
                            "bit 0 (Y) set")
    model = model_for("float32", feeds, attrs)
    model.graph.node[0].attribute.append(helper.make_attribute("inputs", 1.5))
    expect_error(model, gf, "Attention: attribute 'inputs' is a float, expected an int (a bitmask of input slots)")


@pytest.mark.parametrize("dtype", DTYPES)
def test_dynamic_shapes_one_session(dtype):
    """Symbolic dims at graph time; one session runs many shapes."""
    rng = np.random.default_rng(7)
    shapes = {"Q": ["b", 4, "sq", 16], "K": ["b", 2, "skv", 16], "V": ["b", 2, "skv", 16],
              "attn_mask": ["sq", "t"], "past_key": ["b", 2, "p", 16], "past_value": ["b", 2, "p", 16]}
    outs = ("Y", "present_key", "present_value")
    probe, attrs = make_case(rng, dtype, head_dim=16, past_len=2, mask="bool", mask_shape=(5, 9),
                             attrs={"is_causal": 1})
    sess = make_session(model_for(dtype, probe, attrs, outs, graph_shapes=shapes))
    for b, sq, skv, p in [(1, 1, 1, 8), (2, 5, 5, 0), (3, 2, 7, 4), (1, 16, 16, 16)]:
        feeds, _ = make_case(rng, dtype, batch=b, head_dim=16, q_len=sq, kv_len=skv, past_len=p, mask="bool",
                             mask_shape=(sq, skv + p), attrs={"is_causal": 1})
        check(dtype, feeds, attrs, outs, sess=sess, what=f"b={b} sq={sq} skv={skv} p={p}")


@pytest.mark.parametrize("precision", [1, 10, 11, 16])
def test_softmax_precision_accepted(precision):
    """Softmax runs in float32 or wider whatever softmax_precision asks for."""
    rng = np.random.default_rng(precision)
    feeds, attrs = make_case(rng, "float16", attrs={"softmax_precision": precision})
    check("float16", feeds, attrs)


def test_window_attrs_minus_one_accepted():
    rng = np.random.default_rng(8)
    feeds, attrs = make_case(rng, "float32", attrs={"left_window_size": -1, "right_window_size": -1})
    check("float32", feeds, attrs)


def test_qk_matmul_output_mode_without_the_output_is_fine():
    rng = np.random.default_rng(9)
    for mode in range(4):
        feeds, attrs = make_case(rng, "float32", attrs={"qk_matmul_output_mode": mode})
        check("float32", feeds, attrs)


def test_shape_inference_gives_y_its_shape():
    """Our shape inference types Y, so a downstream standard op sees its shape."""
    rng = np.random.default_rng(10)
    for rank, shapes, want in [
        (4, {"Q": ["b", 4, "s", 8], "K": ["b", 2, "t", 8], "V": ["b", 2, "t", 6]}, ("b", 4, "s", 6)),
        (3, {"Q": ["b", "s", 32], "K": ["b", "t", 16], "V": ["b", "t", 12]}, ("b", "s", 24)),
    ]:
        feeds, attrs = make_case(rng, "float32", rank=rank, head_dim=8, v_head_dim=6)
        model = model_for("float32", feeds, attrs, ("Y",), graph_shapes=shapes)
        sess = make_session(model)
        got = tuple(sess.get_outputs()[0].shape)
        assert got == want, got
        check("float32", feeds, attrs, sess=sess)


def test_many_threads_one_session():
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(11)
    shapes = {"Q": ["b", 4, "sq", 32], "K": ["b", 1, "skv", 32], "V": ["b", 1, "skv", 32]}
    cases = [make_case(rng, "float16", batch=b, q_heads=4, kv_heads=1, q_len=sq, kv_len=skv, head_dim=32,
                       attrs={"is_causal": 1})
             for b, sq, skv in [(1, 1, 30), (2, 17, 17), (3, 8, 40), (1, 64, 64)]]
    sess = make_session(model_for("float16", cases[0][0], cases[0][1], graph_shapes=shapes))

    def work(i):
        feeds, attrs = cases[i % len(cases)]
        check("float16", feeds, attrs, sess=sess, what=f"job {i}")

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(work, range(16)))


# ---------------------------------------------------------------------------
# packed_qkv = 1 (trt_fastops extension): Q is [B, S, (Hq + 2 * Hkv) * D] holding
# Q, K and V (one MatMul with the three weights concatenated along N), K and V
# are omitted; the op reads the three parts through strided views, no copies.


def pack_qkv(feeds, attrs):
    """The packed_qkv=1 form of a 3-D case with kv_len == q_len and v_head_dim ==
    head_dim: Q, K and V concatenated along the last dim ([Q heads | K heads | V
    heads], each head's D contiguous); K and V left out (empty input names)."""
    f = dict(feeds)
    packed = np.concatenate([f.pop("Q"), f.pop("K"), f.pop("V")], axis=-1)
    return {"Q": packed, **f}, {**attrs, "packed_qkv": 1}


def padding_mask(dtype, batch, total, padded):
    """Additive key-padding mask [B, 1, 1, total]: 0 where attended, -inf on the
    last padded[b] keys of batch b (BERT's attention_mask after (1 - m) * -inf)."""
    m = np.zeros((batch, 1, 1, total), np.float32)
    for b, n in enumerate(padded):
        if n:
            m[b, ..., total - n:] = -np.inf
    return m if dtype in ("float32", "bfloat16") else m.astype(NP[dtype])


def packed_case(rng, dtype, *, q_heads, kv_heads, seq=5, head_dim=8, batch=2, mask=None, causal=False,
                past_len=None):
    """(unpacked 3-D feeds, attrs) and their packed form. mask: None or "padding"
    (batch 0 unpadded, the others with their last total // 4 keys padded)."""
    feeds, attrs = make_case(rng, dtype, batch=batch, q_heads=q_heads, kv_heads=kv_heads, q_len=seq, kv_len=seq,
                             head_dim=head_dim, rank=3, past_len=past_len,
                             attrs={"is_causal": 1} if causal else None)
    if mask == "padding":
        total = seq + (past_len or 0)
        feeds["attn_mask"] = padding_mask(dtype, batch, total, [0] + [total // 4] * (batch - 1))
        feeds = {k: feeds[k] for k in INPUTS if k in feeds}
    return (feeds, attrs), pack_qkv(feeds, attrs)


def run_case(dtype, feeds, attrs, outputs, ref, sess=None, graph_shapes=None):
    if sess is None:
        sess = make_session(model_for(dtype, feeds, attrs, outputs, graph_shapes))
    return run_poisoned(sess, graph_feeds(feeds, dtype), out_specs(dtype, outputs, ref))


PACKED_HEADS = [(4, 4), (4, 2), (6, 1)]
PACKED_HEAD_IDS = ["mha", "gqa", "mqa"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("variant", ["plain", "padding", "causal", "padding_causal"])
@pytest.mark.parametrize("heads", PACKED_HEADS, ids=PACKED_HEAD_IDS)
def test_packed_qkv_matches_unpacked(heads, variant, dtype):
    """Packed Q (K and V omitted) gives exactly the numbers of the equivalent
    unpacked 3-D node (the CPU op computes each row the same way whatever the
    strides), and matches the float64 reference."""
    hq, hkv = heads
    rng = np.random.default_rng(seed_of((heads, variant, dtype)))
    (feeds, attrs), (pfeeds, pattrs) = packed_case(rng, dtype, q_heads=hq, kv_heads=hkv,
                                                   mask="padding" if "padding" in variant else None,
                                                   causal="causal" in variant)
    assert pfeeds["Q"].shape == (2, 5, (hq + 2 * hkv) * 8) and "K" not in pfeeds and "V" not in pfeeds
    node = next(n for n in model_for(dtype, pfeeds, pattrs).graph.node if n.op_type == "Attention")
    assert (list(node.input) + ["", ""])[:3] == ["Q", "", ""], node.input  # K, V omitted
    ref = reference(feeds, attrs)
    got = run_case(dtype, pfeeds, pattrs, ("Y",), ref)
    want = run_case(dtype, feeds, attrs, ("Y",), ref)
    y = out_name("Y", dtype)
    assert np.array_equal(got[y], want[y]), f"packed vs unpacked: max diff {np.abs(got[y] - want[y]).max()}"
    compare(dtype, got, ref, ("Y",), f"packed {variant}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("outs", [("Y", "present_key", "present_value"), ("Y",)], ids=["present", "scratch"])
@pytest.mark.parametrize("heads", PACKED_HEADS, ids=PACKED_HEAD_IDS)
def test_packed_qkv_past_and_present(heads, outs, dtype):
    """past_key / past_value with packed Q: present = concat(past, the packed K / V
    parts), copied from their strided views (into the outputs, or scratch)."""
    hq, hkv = heads
    rng = np.random.default_rng(seed_of((heads, outs, dtype, "past")))
    for seq, past, mask in [(1, 9, "padding"), (4, 6, None), (3, 0, "padding")]:
        (feeds, attrs), (pfeeds, pattrs) = packed_case(rng, dtype, q_heads=hq, kv_heads=hkv, seq=seq,
                                                       past_len=past, mask=mask, causal=True)
        ref = reference(feeds, attrs, outs)
        got = run_case(dtype, pfeeds, pattrs, outs, ref)
        want = run_case(dtype, feeds, attrs, outs, ref)
        for o in outs:
            assert np.array_equal(got[out_name(o, dtype)], want[out_name(o, dtype)]), (o, seq, past)
        compare(dtype, got, ref, outs, f"packed seq={seq} past={past}")


def test_packed_qkv_present_without_past():
    """No past: present_key / present_value are the packed K / V parts laid out as 4-D."""
    rng = np.random.default_rng(44)
    outs = ("Y", "present_key", "present_value")
    (feeds, attrs), (pfeeds, pattrs) = packed_case(rng, "float16", q_heads=4, kv_heads=2, seq=6)
    ref = reference(feeds, attrs, outs)
    compare("float16", run_case("float16", pfeeds, pattrs, outs, ref), ref, outs, "packed present")


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_packed_qkv_dynamic_shapes_one_session(dtype):
    """Symbolic batch / seq at graph time: shape inference gives Y [b, s, Hq * D];
    one session runs several shapes, the padding mask's length following seq."""
    hq, hkv, d = 4, 2, 8
    rng = np.random.default_rng(45)
    shapes = {"Q": ["b", "s", (hq + 2 * hkv) * d], "attn_mask": ["b", 1, 1, "s"]}
    (_, _), (probe, pattrs) = packed_case(rng, dtype, q_heads=hq, kv_heads=hkv, mask="padding", causal=True)
    sess = make_session(model_for(dtype, probe, pattrs, graph_shapes=shapes))
    assert tuple(sess.get_outputs()[0].shape) == ("b", "s", hq * d), sess.get_outputs()[0].shape
    for b, s in [(1, 1), (2, 5), (3, 17), (1, 64)]:
        (feeds, attrs), (pfeeds, _) = packed_case(rng, dtype, q_heads=hq, kv_heads=hkv, seq=s, batch=b,
                                                  mask="padding", causal=True)
        ref = reference(feeds, attrs)
        compare(dtype, run_case(dtype, pfeeds, pattrs, ("Y",), ref, sess=sess), ref, ("Y",), f"b={b} s={s}")


def test_packed_qkv_empty():
    """batch 0 or seq 0: nothing to compute (Y empty)."""
    rng = np.random.default_rng(46)
    for kw in (dict(batch=0), dict(seq=0)):
        (feeds, attrs), (pfeeds, pattrs) = packed_case(rng, "float32", q_heads=4, kv_heads=2, **kw)
        ref = reference(feeds, attrs)
        compare("float32", run_case("float32", pfeeds, pattrs, ("Y",), ref), ref, ("Y",), str(kw))


def test_packed_qkv_with_inputs_bitmask():
    """The TensorRT-style file: no empty names, Q and attn_mask with 'inputs' =
    0b1001 (slots 0 and 3); our ORT op maps the positions back to slots."""
    rng = np.random.default_rng(47)
    (feeds, attrs), (pfeeds, pattrs) = packed_case(rng, "float16", q_heads=4, kv_heads=2, mask="padding",
                                                   past_len=3)
    outs = ("Y", "present_key", "present_value")
    model = compact(model_for("float16", pfeeds, pattrs, outs), drop=())
    node = model.graph.node[0]
    assert list(node.input) == ["Q", "attn_mask", "past_key", "past_value"]
    assert helper.get_attribute_value(node.attribute[-1]) == 0b111001
    ref = reference(feeds, attrs, outs)
    got = run_poisoned(make_session(model), graph_feeds(pfeeds, "float16"), out_specs("float16", outs, ref))
    compare("float16", got, ref, outs, "packed, compact inputs")


def test_packed_qkv_run_time_errors():
    """A symbolic last dim passes at graph time; a packed width that (Hq + 2 * Hkv)
    does not divide is refused at run time, and the session keeps working."""
    rng = np.random.default_rng(48)
    (feeds, attrs), (pfeeds, pattrs) = packed_case(rng, "float32", q_heads=4, kv_heads=2)
    sess = make_session(model_for("float32", pfeeds, pattrs, graph_shapes={"Q": ["b", "s", "w"]}))
    with pytest.raises(Exception) as e:
        sess.run(None, {"Q": rand(rng, (2, 5, 63), "float32")})
    assert ("Attention: with packed_qkv=1, Q's last dim (63) must be (q_num_heads + 2 * kv_num_heads) * head_dim "
            "= (4 + 2 * 2) * D = 8 * D (input 'Q' (index 0) has shape [2, 5, 63])") in str(e.value), str(e.value)
    ref = reference(feeds, attrs)
    compare("float32", run_case("float32", pfeeds, pattrs, ("Y",), ref, sess=sess), ref, ("Y",), "after the error")


# ---------------------------------------------------------------------------
# cross-checks: ONNX Runtime's own Attention-23 and onnx's reference implementation

ORT_CASES = [
    dict(),
    dict(q_heads=4, kv_heads=1),
    dict(rank=3),
    dict(rank=3, q_heads=6, kv_heads=2, v_head_dim=4),
    dict(attrs={"is_causal": 1}, q_len=5, kv_len=5),
    dict(attrs={"scale": 0.2, "softcap": 3.0}),
    dict(mask="additive", mask_shape=(5, 7)),
    dict(mask="additive", mask_shape=(2, 4, 5, 7)),
    dict(mask="bool", mask_shape=(1, 4, 5, 7)),
    dict(past_len=3, mask="additive", mask_shape=(5, 10)),
    dict(past_len=3, q_len=1, kv_len=1, attrs={"is_causal": 1}),
]


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("case", ORT_CASES, ids=[str(i) for i in range(len(ORT_CASES))])
def test_matches_onnxruntime_attention(case, dtype):
    """Same node on ONNX Runtime's own CPU Attention (opset 23). Where ORT refuses a
    configuration (its CPU kernel does not cover everything), the test skips saying so."""
    rng = np.random.default_rng(1234)
    case = dict(case)
    feeds, attrs = make_case(rng, dtype, **case)
    if "bool" == case.get("mask"):
        # Keep every row attendable: runtimes differ on fully masked rows (ONNX says zeros).
        feeds["attn_mask"][..., 0] = True
    outs = ("Y", "present_key", "present_value") if "past_len" in case else ("Y",)
    theirs_model = model_for(dtype, feeds, attrs, outs, op_domain="")
    try:
        theirs_sess = ort.InferenceSession(theirs_model.SerializeToString(), providers=["CPUExecutionProvider"])
        theirs = theirs_sess.run(None, graph_feeds(feeds, dtype))
    except Exception as e:  # noqa: BLE001 - ORT's own kernel refusing is what we skip on
        pytest.skip(f"onnxruntime's own Attention does not run this case: {str(e)[:200]}")
    ref = reference(feeds, attrs, outs)
    ours = run_poisoned(make_session(model_for(dtype, feeds, attrs, outs)), graph_feeds(feeds, dtype),
                        out_specs(dtype, outs, ref))
    tol = {"float32": 2e-5, "float16": 3e-3}[dtype]  # ORT computes float16 in float16 steps
    for o, t in zip(outs, theirs):
        np.testing.assert_allclose(np.asarray(ours[out_name(o, dtype)], np.float64), np.asarray(t, np.float64),
                                   rtol=tol, atol=tol, err_msg=f"output {o} vs onnxruntime")


@pytest.mark.parametrize("case", ORT_CASES + [dict(mask="bool", mask_shape=(5, 3), past_len=2)],
                         ids=[str(i) for i in range(len(ORT_CASES) + 1)])
def test_reference_matches_onnx_reference(case):
    """Our float64 reference agrees with onnx's reference implementation (float64 inputs)."""
    op_attention = pytest.importorskip("onnx.reference.ops.op_attention")
    rng = np.random.default_rng(99)
    feeds, attrs = make_case(rng, "float32", **case)
    f64 = {k: (v if v.dtype == np.bool_ else v.astype(np.float64)) for k, v in feeds.items()}
    kw = {k: v for k, v in attrs.items()}
    got = op_attention._compute_attention(f64["Q"], f64["K"], f64["V"], attn_mask=f64.get("attn_mask"),
                                          past_key=f64.get("past_key"), past_value=f64.get("past_value"), **kw)
    ref = reference(feeds, attrs, ("Y", "present_key", "present_value"))
    np.testing.assert_allclose(got[0], ref["Y"], rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(got[1], ref["present_key"])
    np.testing.assert_array_equal(got[2], ref["present_value"])


def test_random_configs_match_onnx_reference():
    """Our op on 120 random configurations (rank, heads, lengths, head dims, past,
    mask kind / broadcast shape / short length, causal, softcap, scale) against
    onnx's reference implementation. Left out where that reference itself breaks:
    causal with a rank-1 mask (it cannot unpack the shape) or a mask broadcast over
    q_seq (see test_mask_with_causal)."""
    op_attention = pytest.importorskip("onnx.reference.ops.op_attention")
    rng = np.random.default_rng(2024)
    for it in range(120):
        rank = int(rng.choice([3, 4]))
        hkv = int(rng.integers(1, 4))
        hq = hkv * int(rng.integers(1, 4))
        sq, skv = int(rng.integers(1, 7)), int(rng.integers(1, 7))
        d, dv = int(rng.integers(1, 10)), int(rng.integers(1, 10))
        past = None if rng.random() < 0.4 else int(rng.integers(0, 5))
        total = skv + (past or 0)
        mask = [None, "bool", "additive"][int(rng.integers(0, 3))]
        attrs = {}
        if rng.random() < 0.4:
            attrs["is_causal"] = 1
        if rng.random() < 0.3:
            attrs["softcap"] = float(rng.choice([0.5, 2.0, 10.0]))
        if rng.random() < 0.3:
            attrs["scale"] = float(rng.choice([0.1, 0.5, 1.3]))
        mshape = None
        if mask is not None:
            full = [2, hq, sq, total]
            r = int(rng.integers(2 if attrs.get("is_causal") else 1, 5))
            mshape = [x if rng.random() < 0.6 else 1 for x in full[4 - r:]]
            mshape[-1] = int(rng.integers(0, total + 1)) if rng.random() < 0.3 else total
            if attrs.get("is_causal"):
                mshape[-2] = sq
        feeds, a = make_case(rng, "float32", batch=2, q_heads=hq, kv_heads=hkv, q_len=sq, kv_len=skv, head_dim=d,
                             v_head_dim=dv, rank=rank, past_len=past, mask=mask, mask_shape=mshape, attrs=attrs)
        outs = ("Y", "present_key", "present_value") if past is not None else ("Y",)
        got = make_session(model_for("float32", feeds, a, outs)).run(None, feeds)
        f64 = {k: (v if v.dtype == np.bool_ else v.astype(np.float64)) for k, v in feeds.items()}
        want = op_attention._compute_attention(f64["Q"], f64["K"], f64["V"], attn_mask=f64.get("attn_mask"),
                                               past_key=f64.get("past_key"), past_value=f64.get("past_value"), **a)
        for o, g, w in zip(outs, got, want):
            np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5,
                                       err_msg=f"config {it}: rank {rank} heads {hq}/{hkv} seq {sq}/{skv} d {d}/{dv} "
                                               f"past {past} mask {mask} {mshape} attrs {a}: output {o}")


# ---------------------------------------------------------------------------
# refusals: which op, which input, what was expected


def expect_error(model, feeds, message):
    with pytest.raises(Exception) as e:
        sess = make_session(model)
        sess.run(None, feeds)
    assert message in str(e.value), str(e.value)
    return e


def std_shapes(rank=4):
    if rank == 4:
        return {"Q": [2, 4, 5, 8], "K": [2, 2, 7, 8], "V": [2, 2, 7, 8]}
    return {"Q": [2, 5, 32], "K": [2, 7, 16], "V": [2, 7, 16]}


ERROR_CASES = [
    # (id, dtype, shapes, in_dtypes, outputs, attrs, message)
    ("q_float64", "float64", std_shapes(), None, ("Y",), {},
     "Attention: input 'Q' (index 0) is float64, expected float32, float16 or bfloat16"),
    ("q_int32", "int32", std_shapes(), None, ("Y",), {},
     "Attention: input 'Q' (index 0) is int32, expected float32, float16 or bfloat16"),
    ("k_dtype", "float32", std_shapes(), {"K": "float16"}, ("Y",), {},
     "Attention: input 'K' (index 1) is float16, expected float32 (the dtype of Q)"),
    ("v_dtype", "float16", std_shapes(), {"V": "float32"}, ("Y",), {},
     "Attention: input 'V' (index 2) is float32, expected float16 (the dtype of Q)"),
    ("past_dtype", "float16", {**std_shapes(), "past_key": [2, 2, 3, 8], "past_value": [2, 2, 3, 8]},
     {"past_value": "float32"}, ("Y",), {},
     "Attention: input 'past_value' (index 5) is float32, expected float16 (the dtype of Q)"),
    ("mask_int", "float32", {**std_shapes(), "attn_mask": [5, 7]}, {"attn_mask": "int32"}, ("Y",), {},
     "Attention: input 'attn_mask' (index 3) is int32, expected bool or float32 (an additive mask has the dtype of Q)"),
    ("mask_other_float", "float16", {**std_shapes(), "attn_mask": [5, 7]}, {"attn_mask": "float32"}, ("Y",), {},
     "Attention: input 'attn_mask' (index 3) is float32, expected bool or float16"),
    ("qk_output", "float32", std_shapes(), None, ("Y", "qk_matmul_output"), {},
     "Attention: output 'qk_matmul_output' (index 3) is requested; it is not supported yet"),
    ("past_key_alone", "float32", {**std_shapes(), "past_key": [2, 2, 3, 8]}, None, ("Y",), {},
     "Attention: input 'past_key' (index 4) is given without input 'past_value' (index 5); past_key and "
     "past_value are used together"),
    ("3d_no_heads", "float32", std_shapes(3), None, ("Y",), {"q_num_heads": 4},
     "Attention: 3-D inputs (input 'Q' (index 0) has shape [2, 5, 32]) need attributes 'q_num_heads' and "
     "'kv_num_heads' (missing: 'kv_num_heads')"),
    ("4d_with_heads", "float32", std_shapes(), None, ("Y",), {"q_num_heads": 4, "kv_num_heads": 2},
     "Attention: attribute 'q_num_heads' is given with 4-D inputs"),
    ("rank5", "float32", {"Q": [1, 2, 4, 5, 8], "K": [2, 2, 7, 8], "V": [2, 2, 7, 8]}, None, ("Y",), {},
     "Attention: input 'Q' (index 0) has shape [1, 2, 4, 5, 8] (rank 5), expected rank 4"),
    ("mixed_rank", "float32", {"Q": [2, 4, 5, 8], "K": [2, 7, 16], "V": [2, 2, 7, 8]}, None, ("Y",), {},
     "Attention: input 'K' (index 1) has rank 3 (shape [2, 7, 16]), expected rank 4 like input 'Q' (index 0)"),
    ("head_dim_300", "float32", {"Q": [1, 2, 3, 300], "K": [1, 2, 3, 300], "V": [1, 2, 3, 8]}, None, ("Y",), {},
     "Attention: head_dim is 300 (from dim 3 of input 'Q' (index 0)), expected 1 ... 256"),
    ("v_head_dim_0", "float32", {"Q": [1, 2, 3, 8], "K": [1, 2, 3, 8], "V": [1, 2, 3, 0]}, None, ("Y",), {},
     "Attention: v_head_dim is 0 (from dim 3 of input 'V' (index 2)), expected 1 ... 256"),
    ("gqa_not_multiple", "float32", {"Q": [1, 3, 3, 8], "K": [1, 2, 3, 8], "V": [1, 2, 3, 8]}, None, ("Y",), {},
     "Attention: q_num_heads 3 (from dim 1 of input 'Q' (index 0)) is not a multiple of kv_num_heads 2 "
     "(from dim 1 of input 'K' (index 1))"),
    ("gqa_attr_not_multiple", "float32", std_shapes(3), None, ("Y",), {"q_num_heads": 4, "kv_num_heads": 3},
     "Attention: attribute 'q_num_heads' (4) is not a multiple of attribute 'kv_num_heads' (3)"),
    ("hidden_not_divisible", "float32", {"Q": [2, 5, 30], "K": [2, 7, 16], "V": [2, 7, 16]}, None, ("Y",),
     {"q_num_heads": 4, "kv_num_heads": 2},
     "Attention: input 'Q' (index 0) has shape [2, 5, 30]: its last dim (hidden size) 30 is not a multiple of "
     "attribute 'q_num_heads' = 4"),
    ("3d_head_dim_mismatch", "float32", {"Q": [2, 5, 32], "K": [2, 7, 24], "V": [2, 7, 16]}, None, ("Y",),
     {"q_num_heads": 4, "kv_num_heads": 2},
     "Attention: input 'K' (index 1) has shape [2, 7, 24]: its dim 2 divided by 2 heads (head_dim) is 12, "
     "expected 8 (head_dim from dim 2 of input 'Q' (index 0) divided by 4 heads)"),
    ("batch_mismatch", "float32", {"Q": [2, 4, 5, 8], "K": [3, 2, 7, 8], "V": [2, 2, 7, 8]}, None, ("Y",), {},
     "Attention: input 'K' (index 1) has shape [3, 2, 7, 8]: its dim 0 (batch) is 3, expected 2 (batch from dim 0 "
     "of input 'Q' (index 0))"),
    ("kv_seq_mismatch", "float32", {"Q": [2, 4, 5, 8], "K": [2, 2, 7, 8], "V": [2, 2, 6, 8]}, None, ("Y",), {},
     "Attention: input 'V' (index 2) has shape [2, 2, 6, 8]: its dim 2 (kv_seq) is 6, expected 7"),
    ("qk_head_dim_mismatch", "float32", {"Q": [2, 4, 5, 8], "K": [2, 2, 7, 16], "V": [2, 2, 7, 8]}, None, ("Y",),
     {}, "Attention: input 'K' (index 1) has shape [2, 2, 7, 16]: its dim 3 (head_dim) is 16, expected 8"),
    ("past_head_dim", "float32", {**std_shapes(), "past_key": [2, 2, 3, 4], "past_value": [2, 2, 3, 8]}, None,
     ("Y",), {}, "Attention: input 'past_key' (index 4) has shape [2, 2, 3, 4]: its dim 3 (head_dim) is 4, expected 8"),
    ("past_len_mismatch", "float32", {**std_shapes(), "past_key": [2, 2, 3, 8], "past_value": [2, 2, 4, 8]}, None,
     ("Y",), {}, "Attention: input 'past_value' (index 5) has shape [2, 2, 4, 8]: its dim 2 (past_seq) is 4, "
     "expected 3"),
    ("past_rank3", "float32", {**std_shapes(), "past_key": [2, 3, 16], "past_value": [2, 3, 16]}, None, ("Y",), {},
     "Attention: input 'past_key' (index 4) has shape [2, 3, 16], expected rank 4 [batch, kv_num_heads, past_seq, "
     "head_dim] (also for 3-D Q, K, V)"),
    ("mask_bad_dim", "float32", {**std_shapes(), "attn_mask": [3, 5, 7]}, {"attn_mask": "bool"}, ("Y",), {},
     "Attention: input 'attn_mask' (index 3) has shape [3, 5, 7]: its dim 0 is 3, expected 1 or 4 (q_num_heads"),
    ("mask_too_long", "float32", {**std_shapes(), "attn_mask": [5, 8]}, None, ("Y",), {},
     "Attention: input 'attn_mask' (index 3) has shape [5, 8]: its dim 1 is 8, expected at most 7 (total_seq"),
    ("mask_rank5", "float32", {**std_shapes(), "attn_mask": [1, 2, 4, 5, 7]}, {"attn_mask": "bool"}, ("Y",), {},
     "Attention: input 'attn_mask' (index 3) has shape [1, 2, 4, 5, 7], expected rank 1 ... 4"),
    ("is_causal_2", "float32", std_shapes(), None, ("Y",), {"is_causal": 2},
     "Attention: attribute 'is_causal' is 2, expected 0 or 1"),
    ("scale_negative", "float32", std_shapes(), None, ("Y",), {"scale": -0.5},
     "Attention: attribute 'scale' is -0.5, expected a finite float >= 0"),
    ("softcap_negative", "float32", std_shapes(), None, ("Y",), {"softcap": -1.0},
     "Attention: attribute 'softcap' is -1, expected a finite float >= 0 (0: no softcap)"),
    ("softmax_precision_7", "float32", std_shapes(), None, ("Y",), {"softmax_precision": 7},
     "Attention: attribute 'softmax_precision' is 7, expected 1 (float), 10 (float16), 11 (double) or 16 (bfloat16)"),
    ("qk_mode_4", "float32", std_shapes(), None, ("Y",), {"qk_matmul_output_mode": 4},
     "Attention: attribute 'qk_matmul_output_mode' is 4, expected 0, 1, 2 or 3"),
    ("q_num_heads_0", "float32", std_shapes(3), None, ("Y",), {"q_num_heads": 0, "kv_num_heads": 2},
     "Attention: attribute 'q_num_heads' is 0, expected >= 1"),
    ("scale_as_int", "float32", std_shapes(), None, ("Y",), {"scale": 1},
     "Attention: attribute 'scale' is an int, expected a float"),
    ("is_causal_as_float", "float32", std_shapes(), None, ("Y",), {"is_causal": 1.0},
     "Attention: attribute 'is_causal' is a float, expected an int"),
    ("is_causal_as_string", "float32", std_shapes(), None, ("Y",), {"is_causal": "yes"},
     "Attention: attribute 'is_causal' is a string, expected an int"),
    ("window", "float32", std_shapes(), None, ("Y",), {"left_window_size": 2},
     "Attention: attribute 'left_window_size' is 2; sliding-window attention (ONNX Attention-25) is not supported, "
     "expected -1 (no window)"),
    # K / V omitted without packed_qkv
    ("k_missing", "float32", {"Q": [2, 4, 5, 8], "V": [2, 2, 7, 8]}, None, ("Y",), {},
     "Attention: input 'K' (index 1) is missing; it is required (unless packed_qkv=1, where Q holds Q, K and V)"),
    ("v_missing", "float32", {"Q": [2, 5, 32], "K": [2, 7, 16]}, None, ("Y",), {"q_num_heads": 4, "kv_num_heads": 2},
     "Attention: input 'V' (index 2) is missing; it is required (unless packed_qkv=1"),
    ("q_only", "float32", {"Q": [2, 5, 32]}, None, ("Y",), {"q_num_heads": 4, "kv_num_heads": 2},
     "Attention: input 'K' (index 1) is missing; it is required (unless packed_qkv=1"),
    # packed_qkv = 1
    ("packed_qkv_2", "float32", {"Q": [2, 5, 64]}, None, ("Y",), {"packed_qkv": 2, "q_num_heads": 4, "kv_num_heads": 2},
     "Attention: attribute 'packed_qkv' is 2, expected 0 (separate Q, K, V) or 1 (Q holds Q, K and V)"),
    ("packed_qkv_float", "float32", {"Q": [2, 5, 64]}, None, ("Y",), {"packed_qkv": 1.0},
     "Attention: attribute 'packed_qkv' is a float, expected an int"),
    ("packed_with_k", "float32", {"Q": [2, 5, 64], "K": [2, 5, 16]}, None, ("Y",),
     {"packed_qkv": 1, "q_num_heads": 4, "kv_num_heads": 2},
     "Attention: with packed_qkv=1, input 'K' (index 1) must be omitted (Q holds Q, K and V: [batch, seq, "
     "(q_num_heads + 2 * kv_num_heads) * head_dim])"),
    ("packed_with_v", "float32", {"Q": [2, 5, 64], "V": [2, 5, 16]}, None, ("Y",),
     {"packed_qkv": 1, "q_num_heads": 4, "kv_num_heads": 2},
     "Attention: with packed_qkv=1, input 'V' (index 2) must be omitted"),
    ("packed_no_heads", "float32", {"Q": [2, 5, 64]}, None, ("Y",), {"packed_qkv": 1, "q_num_heads": 4},
     "Attention: packed_qkv=1 needs attributes 'q_num_heads' and 'kv_num_heads' (missing: 'kv_num_heads'); they "
     "split Q's last dim into (q_num_heads + 2 * kv_num_heads) heads"),
    ("packed_4d", "float32", {"Q": [2, 4, 5, 8]}, None, ("Y",), {"packed_qkv": 1, "q_num_heads": 4, "kv_num_heads": 2},
     "Attention: with packed_qkv=1, input 'Q' (index 0) has shape [2, 4, 5, 8], expected rank 3 [batch, seq, "
     "(q_num_heads + 2 * kv_num_heads) * head_dim]"),
    ("packed_bert_width", "float16", {"Q": [2, 128, 2300]}, None, ("Y",),
     {"packed_qkv": 1, "q_num_heads": 12, "kv_num_heads": 12},
     "Attention: with packed_qkv=1, Q's last dim (2300) must be (q_num_heads + 2 * kv_num_heads) * head_dim = "
     "(12 + 2 * 12) * D = 36 * D (input 'Q' (index 0) has shape [2, 128, 2300])"),
    ("packed_head_dim_300", "float32", {"Q": [1, 3, 2400]}, None, ("Y",),
     {"packed_qkv": 1, "q_num_heads": 4, "kv_num_heads": 2},
     "Attention: head_dim is 300 (from dim 2 of input 'Q' (index 0) divided by 8 heads), expected 1 ... 256"),
    ("packed_past_head_dim", "float32", {"Q": [2, 5, 64], "past_key": [2, 2, 3, 4], "past_value": [2, 2, 3, 8]},
     None, ("Y",), {"packed_qkv": 1, "q_num_heads": 4, "kv_num_heads": 2},
     "Attention: input 'past_key' (index 4) has shape [2, 2, 3, 4]: its dim 3 (head_dim) is 4, expected 8 (head_dim "
     "from dim 2 of input 'Q' (index 0) divided by 8 heads)"),
    ("packed_past_heads", "float32", {"Q": [2, 5, 64], "past_key": [2, 4, 3, 8], "past_value": [2, 4, 3, 8]},
     None, ("Y",), {"packed_qkv": 1, "q_num_heads": 4, "kv_num_heads": 2},
     "Attention: input 'past_key' (index 4) has shape [2, 4, 3, 8]: its dim 1 (kv_num_heads) is 4, expected 2 "
     "(kv_num_heads from attribute 'kv_num_heads')"),
    ("packed_mask_len", "float32", {"Q": [2, 5, 64], "attn_mask": [2, 1, 1, 6]}, None, ("Y",),
     {"packed_qkv": 1, "q_num_heads": 4, "kv_num_heads": 2},
     "Attention: input 'attn_mask' (index 3) has shape [2, 1, 1, 6]: its dim 3 is 6, expected at most 5"),
]


@pytest.mark.parametrize("case", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_errors(case):
    _, dtype, shapes, in_dtypes, outputs, attrs, message = case
    rng = np.random.default_rng(12)
    model = build_model(dtype, shapes, outputs, attrs, in_dtypes=in_dtypes, node_name="attn_node")
    types = {k: dtype for k in shapes}
    types.update(in_dtypes or {})
    feeds = {feed_name(k, types[k], types[k]): rand(rng, v, "float32" if types[k] == "bfloat16" else types[k])
             for k, v in shapes.items()}
    e = expect_error(model, feeds, message)
    assert "(node 'attn_node')" in str(e.value), str(e.value)


def test_run_time_shape_error_then_session_still_works():
    """Symbolic dims pass at graph time; a mismatch at run time is refused with our
    message, and the session keeps working."""
    rng = np.random.default_rng(13)
    shapes = {"Q": ["b", 4, "sq", 8], "K": ["b", 2, "skv", 8], "V": ["b", 2, "skv2", 8], "attn_mask": ["a", "t"]}
    feeds, attrs = make_case(rng, "float32", mask="additive", mask_shape=(5, 7))
    sess = make_session(model_for("float32", feeds, attrs, graph_shapes=shapes))
    bad = dict(feeds)
    bad["V"] = rand(rng, (2, 2, 6, 8), "float32")
    with pytest.raises(Exception) as e:
        sess.run(None, bad)
    assert "Attention: input 'V' (index 2) has shape [2, 2, 6, 8]: its dim 2 (kv_seq) is 6, expected 7" in str(e.value)
    bad = dict(feeds)
    bad["attn_mask"] = rand(rng, (3, 7), "float32")
    with pytest.raises(Exception) as e:
        sess.run(None, bad)
    assert "its dim 0 is 3, expected 1 or 5 (q_seq" in str(e.value)
    check("float32", feeds, attrs, sess=sess)


def test_nonpad_kv_seqlen_is_refused():
    """ONNX Attention-24's 7th input does not fit our 6-input schema."""
    shapes = std_shapes()
    model = build_model("float32", shapes, ("Y",))
    model.graph.node[0].input.extend(["", "", "", "nonpad"][len(model.graph.node[0].input) - 3:])
    model.graph.input.append(helper.make_tensor_value_info("nonpad", TensorProto.INT64, [2]))
    with pytest.raises(Exception) as e:
        make_session(model)
    # K and V are optional in the schema (packed_qkv = 1 leaves them out), so ORT's minimum is 1.
    assert "has input size 7 not in range [min=1, max=6]" in str(e.value)
