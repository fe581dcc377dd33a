"""trt_fastops norm ops (LayerNorm, SkipLayerNorm, RMSNorm) through ONNX Runtime's
CPU execution provider, against float64 numpy references.

Outputs are bound to NaN-filled buffers (IO binding) so an element the op does
not write shows up. bfloat16 graphs wrap the op between Cast nodes (numpy has
no bfloat16); inputs are generated exactly representable in their dtype so
the casts are exact.
"""
from __future__ import annotations

import itertools

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

ort = pytest.importorskip("onnxruntime")

from trt_fastops import DOMAIN  # noqa: E402
from trt_fastops.ort import make_session  # noqa: E402

IR_VERSION = 10  # onnxruntime 1.31 reads up to 11; onnx 1.23 would write 12+
SIGS = {
    "LayerNorm": (["X", "Scale", "B"], ["Y", "Mean", "InvStdDev"]),
    "SkipLayerNorm": (["X", "Skip", "Scale", "B", "Bias"], ["Y", "Mean", "InvStdDev", "Sum"]),
    "RMSNorm": (["X", "Scale", "Skip", "Bias"], ["Y", "Sum"]),
}
STAT_OUTPUTS = ("Mean", "InvStdDev")
ELEM = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16,
        "float64": TensorProto.DOUBLE, "int32": TensorProto.INT32}
NP = {"float32": np.float32, "float16": np.float16, "float64": np.float64, "int32": np.int32}
DTYPES = ["float32", "float16", "bfloat16"]
# Y / Sum tolerance: a few output ulps (the reference is float64, inputs are identical).
TOL = {"float32": 2e-5, "float16": 1.5e-3, "bfloat16": 1e-2}


# ---------------------------------------------------------------------------
# helpers


def round_bf16(a: np.ndarray) -> np.ndarray:
    """float32 -> nearest bfloat16 (ties to even), returned as float32."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def rand(rng, shape, dtype, *, scale=1.0, offset=0.0):
    """Random values (never zero) exactly representable in `dtype`, as the numpy
    array to feed (bfloat16: float32 holding bf16 values)."""
    a = np.asarray(rng.standard_normal(shape) * scale + offset, dtype=np.float32)
    a[a == 0] = 0.5
    if dtype == "bfloat16":
        return round_bf16(a)
    if dtype in ("float64", "float32", "float16"):
        return a.astype(NP[dtype])
    return (rng.integers(1, 5, size=shape)).astype(NP[dtype])


def reference(op, feeds, attrs, outputs):
    """float64 reference. feeds: slot name -> array (absent slots missing)."""
    x = np.asarray(feeds["X"], np.float64)
    rank = x.ndim
    axis = attrs.get("axis", -1)
    axis = axis + rank if axis < 0 else axis
    norm_shape = x.shape[axis:]
    # s = X + Skip + Bias is float32 arithmetic by contract (plugins/norm/norm.h);
    # everything after it is float64 here.
    s = np.asarray(feeds["X"], np.float32)
    if "Skip" in feeds:
        skip = np.asarray(feeds["Skip"], np.float32)
        dims = list(skip.shape)
        while dims and dims[0] == 1:
            dims.pop(0)
        s = s + skip.reshape(dims)
    if "Bias" in feeds:
        s = s + np.asarray(feeds["Bias"], np.float32).reshape(norm_shape)
    s = s.astype(np.float64)
    red = tuple(range(axis, rank))
    mean = s.mean(axis=red, keepdims=True) if op != "RMSNorm" else np.zeros(x.shape[:axis] + (1,) * (rank - axis))
    var = ((s - mean) ** 2).mean(axis=red, keepdims=True)
    rstd = 1.0 / np.sqrt(var + attrs.get("epsilon", 1e-5))

    def param(name):
        p = np.asarray(feeds[name], np.float64)
        return p.reshape(()) if p.size == 1 else p.reshape(norm_shape)

    y = (s - mean) * rstd * param("Scale")
    if "B" in feeds:
        y = y + param("B")
    ref = {"Y": y, "Mean": mean, "InvStdDev": rstd, "Sum": s}
    return {k: ref[k] for k in outputs}


def value_info(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def build_model(op, dtype, in_shapes, outputs, attrs=None, *, in_dtypes=None, cast_out=True, node_name="norm"):
    """One trt_fastops node. in_shapes: slot -> graph shape (list; None = unknown
    rank; entries may be str for symbolic dims); slots not given are omitted.
    outputs: output slot names requested. in_dtypes overrides single inputs'
    dtypes. bfloat16 inputs come in as float32 and go through Cast; so do
    bfloat16 outputs unless cast_out=False."""
    inputs, outs = SIGS[op]
    types = {k: dtype for k in in_shapes}
    types.update(in_dtypes or {})
    pre, post, graph_in, graph_out = [], [], [], []
    node_in = []
    for slot in inputs:
        if slot not in in_shapes:
            node_in.append("")
            continue
        if types[slot] == "bfloat16":
            graph_in.append(value_info(slot + "_f32", TensorProto.FLOAT, in_shapes[slot]))
            pre.append(helper.make_node("Cast", [slot + "_f32"], [slot], to=TensorProto.BFLOAT16))
        else:
            graph_in.append(value_info(slot, ELEM[types[slot]], in_shapes[slot]))
        node_in.append(slot)
    while node_in and node_in[-1] == "":
        node_in.pop()
    node_out = []
    for slot in outs:
        if slot not in outputs:
            node_out.append("")
            continue
        node_out.append(slot)
        if slot in STAT_OUTPUTS:
            graph_out.append(value_info(slot, TensorProto.FLOAT, None))
        elif dtype == "bfloat16" and cast_out:
            post.append(helper.make_node("Cast", [slot], [slot + "_f32"], to=TensorProto.FLOAT))
            graph_out.append(value_info(slot + "_f32", TensorProto.FLOAT, None))
        else:
            graph_out.append(value_info(slot, ELEM[dtype], None))
    while node_out and node_out[-1] == "":
        node_out.pop()
    node = helper.make_node(op, node_in, node_out, domain=DOMAIN, name=node_name, **dict(attrs or {}))
    graph = helper.make_graph(pre + [node] + post, f"{op}_{dtype}", graph_in, graph_out)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)],
                             ir_version=IR_VERSION)


def feed_name(slot, dtype):
    return slot + "_f32" if dtype == "bfloat16" else slot


def out_name(slot, dtype):
    return slot + "_f32" if dtype == "bfloat16" and slot not in STAT_OUTPUTS else slot


def run_poisoned(sess, feeds, out_specs):
    """Run with outputs bound to NaN-filled buffers. out_specs: graph output name
    -> (shape, numpy dtype). Returns name -> array (the bound buffers)."""
    io = sess.io_binding()
    for name, arr in feeds.items():
        io.bind_cpu_input(name, np.ascontiguousarray(arr))
    # Keep the numpy buffers referenced here: the OrtValues only borrow them.
    bufs = {name: np.full(shape, np.nan, dtype=npdt) for name, (shape, npdt) in out_specs.items()}
    for name, buf in bufs.items():
        io.bind_ortvalue_output(name, ort.OrtValue.ortvalue_from_numpy(buf))
    sess.run_with_iobinding(io)
    outs = dict(zip(sess.get_outputs_names() if hasattr(sess, "get_outputs_names") else
                    [o.name for o in sess.get_outputs()], io.get_outputs()))
    for name, buf in bufs.items():  # ORT wrote into our buffers, not new ones
        assert np.array_equal(outs[name].numpy(), buf, equal_nan=True), name
    return bufs


def make_case(rng, op, dtype, x_shape, *, axis=-1, present=None, skip_shape=None, scale_shape=None,
              b_shape=None, x_scale=2.0, x_offset=0.5):
    """Random feeds for one case. present: optional input slots to include."""
    inputs, _ = SIGS[op]
    rank = len(x_shape)
    a = axis + rank if axis < 0 else axis
    norm_shape = tuple(x_shape[a:])
    present = set(inputs) if present is None else set(present) | {"X", "Scale"} | ({"Skip"} if op == "SkipLayerNorm" else set())
    shapes = {"X": tuple(x_shape)}
    shapes["Scale"] = tuple(scale_shape) if scale_shape is not None else norm_shape
    if "B" in present and "B" in inputs:
        shapes["B"] = tuple(b_shape) if b_shape is not None else norm_shape
    if "Skip" in present and "Skip" in inputs:
        shapes["Skip"] = tuple(skip_shape) if skip_shape is not None else tuple(x_shape)
    if "Bias" in present and "Bias" in inputs:
        shapes["Bias"] = norm_shape
    feeds = {}
    for slot, shp in shapes.items():
        if slot == "X":
            feeds[slot] = rand(rng, shp, dtype, scale=x_scale, offset=x_offset)
        elif slot in ("Scale",):
            feeds[slot] = rand(rng, shp, dtype, scale=0.5, offset=1.0)
        else:
            feeds[slot] = rand(rng, shp, dtype, scale=0.5)
    return feeds


def check_case(op, dtype, feeds, outputs, attrs=None, *, graph_shapes=None, tol_scale=1.0):
    attrs = dict(attrs or {})
    shapes = graph_shapes or {k: list(v.shape) for k, v in feeds.items()}
    model = build_model(op, dtype, shapes, outputs, attrs)
    sess = make_session(model)
    ref = reference(op, feeds, attrs, outputs)
    out_np = {o: (np.float32 if (o in STAT_OUTPUTS or dtype == "bfloat16") else NP[dtype]) for o in outputs}
    got = run_poisoned(sess, {feed_name(k, dtype): v for k, v in feeds.items()},
                       {out_name(o, dtype): (ref[o].shape, out_np[o]) for o in outputs})
    for o in outputs:
        g = got[out_name(o, dtype)].astype(np.float64)
        r = ref[o]
        assert g.shape == r.shape, (o, g.shape, r.shape)
        assert not np.isnan(g).any(), f"{op} {dtype}: output {o} has unwritten (NaN) elements"
        if o in STAT_OUTPUTS:
            np.testing.assert_allclose(g, r, rtol=2e-5 * tol_scale, atol=2e-5 * tol_scale, err_msg=f"{op} {dtype} {o}")
        else:
            t = TOL[dtype] * tol_scale
            np.testing.assert_allclose(g, r, rtol=t, atol=t, err_msg=f"{op} {dtype} {o}")
    return sess


def all_outputs(op):
    return SIGS[op][1]


# ---------------------------------------------------------------------------
# correctness

RANK_AXIS = [(shape, axis) for shape in [(7,), (3, 5), (2, 3, 4), (2, 3, 4, 5)]
             for axis in range(-len(shape), len(shape))]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,axis", RANK_AXIS, ids=[f"{'x'.join(map(str, s))}-axis{a}" for s, a in RANK_AXIS])
@pytest.mark.parametrize("op", list(SIGS))
def test_ranks_and_axes(op, shape, axis, dtype):
    rng = np.random.default_rng(hash((op, shape, axis, dtype)) % 2**32)
    feeds = make_case(rng, op, dtype, shape, axis=axis)
    check_case(op, dtype, feeds, all_outputs(op), {"axis": axis})


COLS = [1, 2, 3, 7, 31, 64, 255, 768, 1000, 4099, 16387]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", COLS)
@pytest.mark.parametrize("op", list(SIGS))
def test_cols(op, cols, dtype):
    rng = np.random.default_rng(cols * 7 + len(op))
    rows = 3 if cols < 4000 else 2
    feeds = make_case(rng, op, dtype, (rows, cols))
    check_case(op, dtype, feeds, all_outputs(op))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("x_shape", [(0, 16), (1, 16), (1, 1, 5), (2, 0, 8), (1,), (513, 9), (4099, 64)])
@pytest.mark.parametrize("op", list(SIGS))
def test_rows(op, x_shape, dtype):
    rng = np.random.default_rng(len(x_shape) + sum(x_shape))
    feeds = make_case(rng, op, dtype, x_shape)
    check_case(op, dtype, feeds, all_outputs(op))


def optional_combos(op):
    inputs, outputs = SIGS[op]
    opt_in = [s for s in inputs if s in ("B", "Bias") or (op == "RMSNorm" and s == "Skip")]
    opt_out = outputs[1:]
    for nin in range(len(opt_in) + 1):
        for ins in itertools.combinations(opt_in, nin):
            for nout in range(len(opt_out) + 1):
                for outs in itertools.combinations(opt_out, nout):
                    if op == "RMSNorm" and "Skip" not in ins and ("Bias" in ins or "Sum" in outs):
                        continue  # refused, see test_rms_bias_or_sum_without_skip
                    yield ins, ("Y",) + outs


COMBOS = [(op, ins, outs) for op in SIGS for ins, outs in optional_combos(op)]


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("op,ins,outs", COMBOS,
                         ids=[f"{op}-in[{','.join(i)}]-out[{','.join(o)}]" for op, i, o in COMBOS])
def test_optional_inputs_outputs(op, ins, outs, dtype):
    rng = np.random.default_rng(len(ins) * 10 + len(outs))
    feeds = make_case(rng, op, dtype, (4, 3, 20), present=ins)
    check_case(op, dtype, feeds, outs)


SKIP_SHAPES = [
    ((2, 3, 8), (3, 8)), ((2, 3, 8), (1, 3, 8)), ((2, 3, 8), (8,)), ((2, 3, 8), (1, 1, 8)),
    ((4, 1, 8), (1, 8)), ((4, 1, 8), (4, 1, 8)), ((2, 3, 8), (1, 1, 1, 3, 8)), ((5, 6), (6,)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("x_shape,skip_shape", SKIP_SHAPES, ids=[f"{x}-{s}" for x, s in SKIP_SHAPES])
@pytest.mark.parametrize("op", ["SkipLayerNorm", "RMSNorm"])
def test_broadcast_skip(op, x_shape, skip_shape, dtype):
    rng = np.random.default_rng(len(x_shape) * 3 + len(skip_shape))
    feeds = make_case(rng, op, dtype, x_shape, skip_shape=skip_shape)
    check_case(op, dtype, feeds, all_outputs(op))


def test_broadcast_skip_over_two_leading_dims_with_axis():
    rng = np.random.default_rng(5)
    # axis=1: normalized dims [3, 8]; Skip covers them, broadcast over dim 0.
    feeds = make_case(rng, "SkipLayerNorm", "float32", (4, 3, 8), axis=1, skip_shape=(3, 8))
    check_case("SkipLayerNorm", "float32", feeds, all_outputs("SkipLayerNorm"), {"axis": 1})


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scale_shape,b_shape", [((1,), (1,)), ((), ()), ((1, 1), (8,)), ((8,), (1,)), ((1, 8), (1, 1, 8))])
@pytest.mark.parametrize("op", list(SIGS))
def test_scalar_and_leading_one_params(op, scale_shape, b_shape, dtype):
    rng = np.random.default_rng(len(scale_shape) * 5 + len(b_shape))
    feeds = make_case(rng, op, dtype, (3, 8), scale_shape=scale_shape, b_shape=b_shape)
    check_case(op, dtype, feeds, all_outputs(op))


def test_param_shape_with_leading_ones_in_normalized_shape():
    rng = np.random.default_rng(9)
    # normalized shape [1, 8] (axis=1 on [3, 1, 8]); Scale [8] matches once 1s are dropped.
    feeds = make_case(rng, "LayerNorm", "float32", (3, 1, 8), axis=1, scale_shape=(8,), b_shape=(1, 1, 8))
    check_case("LayerNorm", "float32", feeds, all_outputs("LayerNorm"), {"axis": 1})


@pytest.mark.parametrize("op", list(SIGS))
def test_epsilon_and_large_offset(op):
    # Large mean relative to the spread: catches one-pass variance formulas.
    rng = np.random.default_rng(11)
    feeds = make_case(rng, op, "float32", (6, 300), x_scale=0.01, x_offset=300.0)
    check_case(op, "float32", feeds, all_outputs(op), {"epsilon": 0.25})


@pytest.mark.parametrize("op", list(SIGS))
def test_symbolic_and_unknown_dims(op):
    rng = np.random.default_rng(13)
    feeds = make_case(rng, op, "float16", (2, 5, 24))
    shapes = {k: ["batch", "seq", 24] if v.ndim == 3 else [24] for k, v in feeds.items()}
    sess = check_case(op, "float16", feeds, all_outputs(op), graph_shapes=shapes)
    y = sess.get_outputs()[0]
    assert y.type == "tensor(float16)" and y.shape == ["batch", "seq", 24], (y.type, y.shape)
    # X with no shape at all (rank unknown until run time).
    shapes = {k: None if k == "X" else list(v.shape) for k, v in feeds.items()}
    check_case(op, "float16", feeds, all_outputs(op), graph_shapes=shapes)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", list(SIGS))
def test_output_dtypes(op, dtype):
    """Y (and Sum) get X's dtype, Mean/InvStdDev float32, in the session's metadata."""
    inputs, outputs = SIGS[op]
    shapes = {s: [2, 8] if s in ("X", "Skip") else [8] for s in inputs}
    sess = make_session(build_model(op, dtype, shapes, outputs, cast_out=False))
    got = {o.name: o.type for o in sess.get_outputs()}
    elem = {"float32": "float", "float16": "float16", "bfloat16": "bfloat16"}[dtype]
    want = {o: "tensor(float)" if o in STAT_OUTPUTS else f"tensor({elem})" for o in outputs}
    assert got == want


def test_many_sessions_share_the_library():
    rng = np.random.default_rng(17)
    feeds = make_case(rng, "LayerNorm", "float32", (3, 16))
    model = build_model("LayerNorm", "float32", {k: list(v.shape) for k, v in feeds.items()}, ["Y"])
    sessions = [make_session(model) for _ in range(8)]
    ref = reference("LayerNorm", feeds, {}, ["Y"])["Y"]
    for s in sessions:
        np.testing.assert_allclose(s.run(None, feeds)[0], ref, rtol=2e-5, atol=2e-5)
    del sessions
    np.testing.assert_allclose(make_session(model).run(None, feeds)[0], ref, rtol=2e-5, atol=2e-5)


def test_concurrent_registration_and_runs():
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(19)
    feeds = make_case(rng, "RMSNorm", "float32", (5, 33))
    model = build_model("RMSNorm", "float32", {k: list(v.shape) for k, v in feeds.items()}, ["Y", "Sum"])
    ref = reference("RMSNorm", feeds, {}, ["Y"])["Y"]

    def work(_):
        return make_session(model).run(["Y"], feeds)[0]

    with ThreadPoolExecutor(8) as pool:
        for y in pool.map(work, range(16)):
            np.testing.assert_allclose(y, ref, rtol=2e-5, atol=2e-5)


def test_session_options_and_model_forms(tmp_path):
    from trt_fastops.ort import session_options

    rng = np.random.default_rng(23)
    feeds = make_case(rng, "LayerNorm", "float32", (2, 8))
    model = build_model("LayerNorm", "float32", {k: list(v.shape) for k, v in feeds.items()}, ["Y"])
    ref = reference("LayerNorm", feeds, {}, ["Y"])["Y"]
    path = tmp_path / "ln.onnx"
    onnx.save(model, path)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    for m in (model, model.SerializeToString(), str(path), path):
        sess = make_session(m, session_options=session_options(ort.SessionOptions()) if m is path else None)
        np.testing.assert_allclose(sess.run(None, feeds)[0], ref, rtol=2e-5, atol=2e-5)
    assert session_options(so) is so
    with pytest.raises(TypeError, match="ModelProto, bytes, str or pathlib.Path"):
        make_session(42)
    with pytest.raises(FileNotFoundError):
        make_session(tmp_path / "missing.onnx")


def test_cuda_requested_without_cuda_ep():
    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("this onnxruntime has the CUDA EP")
    model = build_model("LayerNorm", "float32", {"X": [2, 8], "Scale": [8]}, ["Y"])
    with pytest.raises(RuntimeError, match="CUDAExecutionProvider.*not available.*onnxruntime-gpu"):
        make_session(model, ("CUDAExecutionProvider",))
    with pytest.raises(ValueError, match="cuda_graph=True needs CUDAExecutionProvider"):
        make_session(model, ("CPUExecutionProvider",), cuda_graph=True)


# ---------------------------------------------------------------------------
# errors: our message, naming op, input and expectation; the process survives


def session_error(model):
    with pytest.raises(Exception) as e:
        make_session(model)
    return str(e.value)


def run_error(op, dtype, graph_shapes, feeds, outputs=("Y",), attrs=None):
    sess = make_session(build_model(op, dtype, graph_shapes, list(outputs), attrs))
    with pytest.raises(Exception) as e:
        sess.run(None, {feed_name(k, dtype): v for k, v in feeds.items()})
    return str(e.value)


def assert_survives():
    rng = np.random.default_rng(29)
    feeds = make_case(rng, "LayerNorm", "float32", (2, 8))
    check_case("LayerNorm", "float32", feeds, ["Y"])


CREATE_ERRORS = [
    # (id, op, dtype, graph shapes, outputs, attrs, overrides of input dtypes, expected fragments)
    ("scale-shape", "LayerNorm", "float32", {"X": [2, 3, 768], "Scale": [768, 2]}, ["Y"], {}, {},
     ["LayerNorm: input 'Scale' (index 1) has shape [768, 2], expected the normalized shape [768] of X (dims [2, 3)) or a single element"]),
    ("scale-rank", "RMSNorm", "float32", {"X": [2, 768], "Scale": [2, 768]}, ["Y"], {}, {},
     ["RMSNorm: input 'Scale' (index 1) has shape [2, 768], expected the normalized shape [768]"]),
    ("b-shape", "SkipLayerNorm", "float16", {"X": [2, 8], "Skip": [2, 8], "Scale": [8], "B": [7]}, ["Y"], {}, {},
     ["SkipLayerNorm: input 'B' (index 3) has shape [7], expected the normalized shape [8]"]),
    ("bias-scalar", "SkipLayerNorm", "float32", {"X": [2, 8], "Skip": [2, 8], "Scale": [8], "Bias": [1]}, ["Y"], {}, {},
     ["SkipLayerNorm: input 'Bias' (index 4) has shape [1], expected the normalized shape [8] of X (dims [1, 2))"]),
    ("skip-shape", "SkipLayerNorm", "float32", {"X": [2, 3, 8], "Skip": [2, 8], "Scale": [8]}, ["Y"], {}, {},
     ["SkipLayerNorm: input 'Skip' (index 1) has shape [2, 8], expected X's shape [2, 3, 8] or a suffix"]),
    ("skip-not-covering", "SkipLayerNorm", "float32", {"X": [2, 3, 8], "Skip": [8], "Scale": [3, 8]}, ["Y"], {"axis": 1}, {},
     ["SkipLayerNorm: input 'Skip' (index 1) has shape [8]", "covers the normalized dims [1, 3)"]),
    ("dtype-mismatch", "SkipLayerNorm", "float16", {"X": [2, 8], "Skip": [2, 8], "Scale": [8]}, ["Y"], {}, {"Skip": "float32"},
     ["SkipLayerNorm: input 'Skip' (index 1) is float32, expected float16 (the dtype of X)"]),
    ("dtype-mismatch-scale", "LayerNorm", "bfloat16", {"X": [2, 8], "Scale": [8]}, ["Y"], {}, {"Scale": "float16"},
     ["LayerNorm: input 'Scale' (index 1) is float16, expected bfloat16 (the dtype of X)"]),
    ("x-float64", "LayerNorm", "float64", {"X": [2, 8], "Scale": [8]}, ["Y"], {}, {},
     ["LayerNorm: input 'X' (index 0) is float64, expected float32, float16 or bfloat16"]),
    ("x-int32", "RMSNorm", "int32", {"X": [2, 8], "Scale": [8]}, ["Y"], {}, {},
     ["RMSNorm: input 'X' (index 0) is int32, expected float32, float16 or bfloat16"]),
    ("scale-float64", "LayerNorm", "float32", {"X": [2, 8], "Scale": [8]}, ["Y"], {}, {"Scale": "float64"},
     ["LayerNorm: input 'Scale' (index 1) is float64, expected float32 (the dtype of X)"]),
    ("axis-range", "LayerNorm", "float32", {"X": [2, 8], "Scale": [8]}, ["Y"], {"axis": 2}, {},
     ["LayerNorm: attribute 'axis' is 2, expected a value in [-2, 2) for input 'X' (index 0) of rank 2"]),
    ("axis-range-neg", "RMSNorm", "float32", {"X": [2, 8], "Scale": [8]}, ["Y"], {"axis": -3}, {},
     ["RMSNorm: attribute 'axis' is -3, expected a value in [-2, 2)"]),
    ("stash-type", "LayerNorm", "float32", {"X": [2, 8], "Scale": [8]}, ["Y"], {"stash_type": 0}, {},
     ["LayerNorm: attribute 'stash_type' is 0, expected 1"]),
    ("stash-type-rms", "RMSNorm", "float16", {"X": [2, 8], "Scale": [8]}, ["Y"], {"stash_type": 16}, {},
     ["RMSNorm: attribute 'stash_type' is 16, expected 1"]),
    ("epsilon", "LayerNorm", "float32", {"X": [2, 8], "Scale": [8]}, ["Y"], {"epsilon": -1.0}, {},
     ["LayerNorm: attribute 'epsilon' is -1, expected a finite float >= 0"]),
    ("axis-float", "LayerNorm", "float32", {"X": [2, 8], "Scale": [8]}, ["Y"], {"axis": 1.0}, {},
     ["LayerNorm: attribute 'axis' is a float, expected an int"]),
    ("cols-zero", "LayerNorm", "float32", {"X": [2, 0], "Scale": [1]}, ["Y"], {}, {},
     ["LayerNorm: input 'X' (index 0) has shape [2, 0]; its normalized dims [1, 2) hold no elements, expected at least one"]),
    ("rms-bias-no-skip", "RMSNorm", "float32", {"X": [2, 8], "Scale": [8], "Bias": [8]}, ["Y"], {}, {},
     ["RMSNorm: input 'Bias' (index 3) is given without input 'Skip' (index 2)"]),
    ("rms-sum-no-skip", "RMSNorm", "float32", {"X": [2, 8], "Scale": [8]}, ["Y", "Sum"], {}, {},
     ["RMSNorm: output 'Sum' (index 1) is requested without input 'Skip' (index 2)"]),
]


@pytest.mark.parametrize("case", CREATE_ERRORS, ids=[c[0] for c in CREATE_ERRORS])
def test_errors_at_session_creation(case):
    _, op, dtype, shapes, outputs, attrs, overrides, fragments = case
    model = build_model(op, dtype, shapes, outputs, attrs, in_dtypes=overrides)
    msg = session_error(model)
    for f in fragments:
        assert f in msg, f"expected {f!r} in {msg!r}"
    assert "(node 'norm')" in msg
    assert_survives()


def test_errors_at_run_time_with_dynamic_shapes():
    rng = np.random.default_rng(31)
    # Scale's shape known only at run time.
    msg = run_error("LayerNorm", "float32", {"X": ["n", "c"], "Scale": ["k"]},
                    {"X": rand(rng, (2, 8), "float32"), "Scale": rand(rng, (7,), "float32")})
    assert "LayerNorm: input 'Scale' (index 1) has shape [7], expected the normalized shape [8] of X (dims [1, 2)) or a single element" in msg
    # cols == 0 only visible at run time.
    msg = run_error("RMSNorm", "float16", {"X": ["n", "c"], "Scale": [1]},
                    {"X": np.zeros((3, 0), np.float16), "Scale": rand(rng, (1,), "float16")})
    assert "RMSNorm: input 'X' (index 0) has shape [3, 0]; its normalized dims [1, 2) hold no elements" in msg
    # X of unknown rank fed as a scalar.
    msg = run_error("LayerNorm", "float32", {"X": None, "Scale": [1]},
                    {"X": np.array(1.5, np.float32), "Scale": rand(rng, (1,), "float32")})
    assert "LayerNorm: input 'X' (index 0) is a scalar (shape []), expected a tensor of rank >= 1" in msg
    # axis valid for the graph's symbolic rank but not for... the fed rank (unknown-rank X).
    msg = run_error("LayerNorm", "float32", {"X": None, "Scale": [8]},
                    {"X": rand(rng, (8,), "float32"), "Scale": rand(rng, (8,), "float32")}, attrs={"axis": -2})
    assert "LayerNorm: attribute 'axis' is -2, expected a value in [-1, 1)" in msg
    # Skip broadcast that does not fit, at run time.
    msg = run_error("SkipLayerNorm", "float32", {"X": ["a", "b", 8], "Skip": ["c", 8], "Scale": [8]},
                    {"X": rand(rng, (2, 3, 8), "float32"), "Skip": rand(rng, (2, 8), "float32"),
                     "Scale": rand(rng, (8,), "float32")})
    assert "SkipLayerNorm: input 'Skip' (index 1) has shape [2, 8], expected X's shape [2, 3, 8]" in msg
    assert_survives()
