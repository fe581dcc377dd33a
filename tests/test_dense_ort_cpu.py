"""trt_fastops Dense (Y = act(MatMul(X, W) + bias)) through ONNX Runtime's CPU execution
provider (the float64-accumulating reference, plugins/dense/dense_cpu.h), against numpy
float64 (activation "gelu": the exact GELU through math.erf).

Outputs are bound to NaN-filled buffers (IO binding) so an element the op does not write
shows up. bfloat16 graphs wrap the op between Cast nodes (numpy has no bfloat16); inputs are
generated exactly representable in their dtype so the casts are exact. W and bias are graph
inputs or initializers (what the rewriter writes).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

ort = pytest.importorskip("onnxruntime")

from trt_fastops import DOMAIN  # noqa: E402
from trt_fastops.ort import make_session  # noqa: E402

IR_VERSION = 10  # onnxruntime 1.31 reads up to 11; onnx 1.23 would write 12+
SLOTS = ["X", "W", "bias"]
ELEM = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16,
        "float64": TensorProto.DOUBLE, "int32": TensorProto.INT32}
NP = {"float32": np.float32, "float16": np.float16, "float64": np.float64, "int32": np.int32}
DTYPES = ["float32", "float16", "bfloat16"]
# The CPU reference accumulates in float64 and rounds once (via float32) to Y's dtype: a few
# output ulps, relative to |Y| (inputs are exact in their dtype, so the float64 sums agree).
RTOL = {"float32": 4e-7, "float16": 1.5e-3, "bfloat16": 1e-2}
ATOL = {"float32": 1e-9, "float16": 1e-7, "bfloat16": 1e-7}


# ---------------------------------------------------------------------------
# helpers


def round_bf16(a: np.ndarray) -> np.ndarray:
    """float32 -> nearest bfloat16 (ties to even), returned as float32."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def rand(rng, shape, dtype, scale=1.0):
    """Random values (never zero) exactly representable in `dtype`, as the numpy array to feed
    (bfloat16: float32 holding bf16 values)."""
    a = np.asarray(rng.standard_normal(shape) * scale, dtype=np.float32)
    a[a == 0] = 0.5
    if dtype == "bfloat16":
        return round_bf16(a)
    if dtype in ("float64", "float32", "float16"):
        return a.astype(NP[dtype])
    return rng.integers(1, 5, size=shape).astype(NP[dtype])


_ERF = np.frompyfunc(math.erf, 1, 1)


def gelu(v):
    """The exact GELU in float64: 0.5 v (1 + erf(v / sqrt 2))."""
    v = np.asarray(v, np.float64)
    return 0.5 * v * (1.0 + _ERF(v / math.sqrt(2.0)).astype(np.float64))


def reference(feeds, activation="none"):
    """float64 Y = act(X @ W (+ bias))."""
    x = np.asarray(feeds["X"], np.float64)
    w = np.asarray(feeds["W"], np.float64)
    m = int(np.prod(x.shape[:-1]))  # explicit: reshape(-1, 0) is ambiguous when K = 0
    y = (x.reshape(m, x.shape[-1]) @ w).reshape(x.shape[:-1] + (w.shape[1],))
    if "bias" in feeds:
        y = y + np.asarray(feeds["bias"], np.float64)
    if activation == "gelu":
        y = gelu(y)
    return y


def initializer(name, arr, dtype):
    if dtype == "bfloat16":
        bits = (np.ascontiguousarray(arr, np.float32).view(np.uint32) >> 16).astype(np.uint16)
        return helper.make_tensor(name, TensorProto.BFLOAT16, arr.shape, bits.tobytes(), raw=True)
    return numpy_helper.from_array(np.asarray(arr, NP[dtype]), name)


def build_model(dtype, shapes, *, inits=None, in_dtypes=None, cast_out=True, node_attrs=None, node_name="dense"):
    """One trt_fastops Dense node. shapes: slot -> graph shape (list; None = unknown rank; str
    entries symbolic) for graph inputs; inits: slot -> array stored as an initializer; slots in
    neither are omitted. in_dtypes overrides single inputs' dtypes. bfloat16 graph inputs come in
    as float32 through Cast; so does Y unless cast_out=False."""
    inits = inits or {}
    types = {s: dtype for s in SLOTS}
    types.update(in_dtypes or {})
    pre, post, graph_in, initializers, node_in = [], [], [], [], []
    for slot in SLOTS:
        if slot in inits:
            initializers.append(initializer(slot, inits[slot], types[slot]))
        elif slot in shapes:
            if types[slot] == "bfloat16":
                graph_in.append(helper.make_tensor_value_info(slot + "_f32", TensorProto.FLOAT, shapes[slot]))
                pre.append(helper.make_node("Cast", [slot + "_f32"], [slot], to=TensorProto.BFLOAT16))
            else:
                graph_in.append(helper.make_tensor_value_info(slot, ELEM[types[slot]], shapes[slot]))
        else:
            continue
        node_in.append(slot)
    if dtype == "bfloat16" and cast_out:
        post.append(helper.make_node("Cast", ["Y"], ["Y_f32"], to=TensorProto.FLOAT))
        graph_out = [helper.make_tensor_value_info("Y_f32", TensorProto.FLOAT, None)]
    else:
        graph_out = [helper.make_tensor_value_info("Y", ELEM[dtype], None)]
    node = helper.make_node("Dense", node_in, ["Y"], domain=DOMAIN, name=node_name)
    # Attached afterwards: make_node's own parameter `inputs` would swallow an attribute of that name.
    node.attribute.extend(helper.make_attribute(k, v) for k, v in (node_attrs or {}).items())
    graph = helper.make_graph(pre + [node] + post, f"Dense_{dtype}", graph_in, graph_out, initializer=initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)],
                             ir_version=IR_VERSION)


def feed_name(slot, dtype):
    return slot + "_f32" if dtype == "bfloat16" else slot


def out_name(dtype):
    return "Y_f32" if dtype == "bfloat16" else "Y"


def run_poisoned(sess, feeds, shape, npdt, out):
    """Run with Y bound to a NaN-filled buffer that ORT must write in place (zero-element
    outputs are left to ORT). Returns Y."""
    io = sess.io_binding()
    for name, arr in feeds.items():
        io.bind_cpu_input(name, np.ascontiguousarray(arr))
    if int(np.prod(shape)) == 0:
        io.bind_output(out, "cpu")
        sess.run_with_iobinding(io)
        return np.array(io.get_outputs()[0].numpy(), copy=True)
    buf = np.full(shape, np.nan, dtype=npdt)  # kept referenced: the OrtValue only borrows it
    io.bind_ortvalue_output(out, ort.OrtValue.ortvalue_from_numpy(buf))
    sess.run_with_iobinding(io)
    assert np.array_equal(io.get_outputs()[0].numpy(), buf, equal_nan=True), "ORT did not write into the bound Y"
    return buf


def make_feeds(rng, dtype, x_shape, n, *, bias=True):
    k = x_shape[-1]
    feeds = {"X": rand(rng, x_shape, dtype), "W": rand(rng, (k, n), dtype, 1.0 / np.sqrt(max(k, 1)))}
    if bias:
        feeds["bias"] = rand(rng, (n,), dtype, 0.5)
    return feeds


def check_case(dtype, feeds, *, inits=(), graph_shapes=None, activation=None):
    """Builds the model (slots in `inits` as initializers; attribute 'activation' when given),
    runs it with Y poisoned and compares with the float64 reference. Returns the session."""
    shapes = graph_shapes or {k: list(v.shape) for k, v in feeds.items()}
    model = build_model(dtype, {k: v for k, v in shapes.items() if k not in inits},
                        inits={k: feeds[k] for k in inits},
                        node_attrs=None if activation is None else {"activation": activation})
    sess = make_session(model)
    ref = reference(feeds, activation or "none")
    graph_feeds = {feed_name(k, dtype): v for k, v in feeds.items() if k not in inits}
    got = run_poisoned(sess, graph_feeds, ref.shape, np.float32 if dtype == "bfloat16" else NP[dtype],
                       out_name(dtype)).astype(np.float64)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    assert not np.isnan(got).any(), f"Dense {dtype}: Y has unwritten (NaN) elements"
    np.testing.assert_allclose(got, ref, rtol=RTOL[dtype], atol=ATOL[dtype], err_msg=f"Dense {dtype}")
    return sess


# ---------------------------------------------------------------------------
# correctness

SHAPES = [  # (X shape, N)
    ((2, 3, 16), 8),
    ((5, 7), 3),
    ((4, 1), 5),          # K = 1
    ((13, 9), 6),         # odd M
    ((1, 1), 1),
    ((2, 1, 3, 10), 4),   # rank 4: leading dims flatten into M
    ((33, 40), 17),
    ((3, 64), 96),
]


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("x_shape,n", SHAPES, ids=[f"{'x'.join(map(str, s))}-n{n}" for s, n in SHAPES])
def test_shapes(x_shape, n, dtype, bias):
    rng = np.random.default_rng(len(x_shape) * 100 + sum(x_shape) + n + DTYPES.index(dtype))
    check_case(dtype, make_feeds(rng, dtype, x_shape, n, bias=bias))


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_weights_as_initializers(dtype, bias):
    """The rewriter's form: W and bias are initializers, X has symbolic leading dims."""
    rng = np.random.default_rng(7 + DTYPES.index(dtype))
    feeds = make_feeds(rng, dtype, (2, 5, 48), 24, bias=bias)
    inits = ("W", "bias") if bias else ("W",)
    check_case(dtype, feeds, inits=inits, graph_shapes={"X": ["batch", "seq", 48]})


@pytest.mark.parametrize("dtype", DTYPES)
def test_large_values_cancel(dtype):
    """Sums that cancel: a result computed in the output dtype would be far off."""
    rng = np.random.default_rng(11)
    k = 64
    x = rand(rng, (6, k), dtype)
    w = rand(rng, (k, 5), dtype)
    w[: k // 2] = w[k // 2:]
    x[:, k // 2:] = -x[:, : k // 2]
    check_case(dtype, {"X": x, "W": w, "bias": rand(rng, (5,), dtype)})


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("x_shape,n", [((0, 8), 4), ((2, 0, 8), 4), ((3, 8), 0), ((3, 0), 5), ((2, 4, 0), 3)],
                         ids=["m0", "m0-rank3", "n0", "k0", "k0-rank3"])
def test_empty_dims(x_shape, n, dtype, bias):
    """M = 0 or N = 0: empty Y. K = 0: Y = bias broadcast over rows, or zeros."""
    rng = np.random.default_rng(13)
    feeds = make_feeds(rng, dtype, x_shape, n, bias=bias)
    check_case(dtype, feeds)


def test_symbolic_and_unknown_dims():
    rng = np.random.default_rng(17)
    feeds = make_feeds(rng, "float16", (2, 5, 24), 12)
    sess = check_case("float16", feeds, graph_shapes={"X": ["batch", "seq", 24], "W": [24, 12], "bias": [12]})
    y = sess.get_outputs()[0]
    assert y.type == "tensor(float16)" and y.shape == ["batch", "seq", 12], (y.type, y.shape)
    # W's N symbolic: Y's last dim is unknown (a fresh symbol), the leading ones keep X's names.
    sess = check_case("float16", feeds, graph_shapes={"X": ["batch", "seq", 24], "W": [24, "n"], "bias": ["n"]})
    y = sess.get_outputs()[0]
    assert y.shape[:2] == ["batch", "seq"] and len(y.shape) == 3, y.shape
    # X with no shape at all (rank unknown until run time).
    check_case("float16", feeds, graph_shapes={"X": None, "W": [24, 12], "bias": [12]})


@pytest.mark.parametrize("dtype", DTYPES)
def test_output_dtype(dtype):
    """Y gets X's dtype in the session's metadata."""
    sess = make_session(build_model(dtype, {"X": [2, 8], "W": [8, 4], "bias": [4]}, cast_out=False))
    elem = {"float32": "float", "float16": "float16", "bfloat16": "bfloat16"}[dtype]
    (y,) = sess.get_outputs()
    assert (y.type, y.shape) == (f"tensor({elem})", [2, 4])


def test_inputs_mask_attribute():
    """The optional 'inputs' slot bitmask every op reads (here it can only equal the positions)."""
    rng = np.random.default_rng(19)
    feeds = make_feeds(rng, "float32", (3, 8), 4)
    model = build_model("float32", {k: list(v.shape) for k, v in feeds.items()}, node_attrs={"inputs": 7})
    np.testing.assert_allclose(make_session(model).run(None, feeds)[0], reference(feeds), rtol=4e-7, atol=1e-9)


def test_one_session_many_shapes_and_threads():
    from concurrent.futures import ThreadPoolExecutor

    sess = make_session(build_model("float32", {"X": ["m", 32], "W": [32, 16], "bias": [16]}))
    rng = np.random.default_rng(23)
    cases = [make_feeds(rng, "float32", (m, 32), 16) for m in (1, 7, 64, 257)]
    for c in cases[1:]:
        c["W"], c["bias"] = cases[0]["W"], cases[0]["bias"]

    def work(i):
        feeds = cases[i % len(cases)]
        np.testing.assert_allclose(sess.run(None, feeds)[0], reference(feeds), rtol=4e-7, atol=1e-9)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(work, range(32)))


# ---------------------------------------------------------------------------
# activation "gelu": Y = GELU(X @ W + bias), the exact (erf) GELU in float64, one rounding

GELU_SHAPES = [((2, 3, 16), 8), ((13, 9), 6), ((4, 1), 5), ((33, 40), 17), ((3, 64), 96), ((1, 1), 1)]


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("x_shape,n", GELU_SHAPES, ids=[f"{'x'.join(map(str, s))}-n{n}" for s, n in GELU_SHAPES])
def test_gelu_shapes(x_shape, n, dtype, bias):
    rng = np.random.default_rng(300 + len(x_shape) * 100 + sum(x_shape) + n + DTYPES.index(dtype))
    check_case(dtype, make_feeds(rng, dtype, x_shape, n, bias=bias), activation="gelu")


def as_fed(a, dtype):
    """`a` (values exact in `dtype`) as the array to feed (bfloat16: float32 holding bf16 values)."""
    a = np.asarray(a, np.float32)
    return round_bf16(a) if dtype == "bfloat16" else a.astype(NP[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_gelu_tails(dtype):
    """v = x * w + 1/4 across [-10, 10] (w in steps of 1/2, x in {1, 1/2, -1/4}): GELU's negative
    tail (tiny values: erf near -1) and its identity-like positive side. Only column 0 of X and
    row 0 of W are non-zero, so v is exact."""
    k, n = 4, 41
    x = np.zeros((3, k), np.float32)
    x[:, 0] = [1.0, 0.5, -0.25]
    w = np.zeros((k, n), np.float32)
    w[0] = np.linspace(-10, 10, n)
    feeds = {"X": as_fed(x, dtype), "W": as_fed(w, dtype), "bias": as_fed(np.full(n, 0.25, np.float32), dtype)}
    check_case(dtype, feeds, activation="gelu")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
def test_gelu_k0(dtype, bias):
    """K = 0: Y = GELU(bias) broadcast over rows, or GELU(0) = 0."""
    rng = np.random.default_rng(310)
    check_case(dtype, make_feeds(rng, dtype, (3, 0), 5, bias=bias), activation="gelu")


def test_gelu_initializers_and_symbolic_dims():
    """The rewriter's form: W and bias initializers, X with symbolic leading dims, activation gelu."""
    rng = np.random.default_rng(320)
    feeds = make_feeds(rng, "float16", (2, 5, 48), 24)
    check_case("float16", feeds, inits=("W", "bias"), graph_shapes={"X": ["batch", "seq", 48]}, activation="gelu")


def test_activation_none_explicit():
    """activation = "none" is the default, spelled out."""
    rng = np.random.default_rng(330)
    check_case("float32", make_feeds(rng, "float32", (5, 16), 8), activation="none")


# ---------------------------------------------------------------------------
# errors: our message, naming op, input and expectation; the process survives


def session_error(model):
    with pytest.raises(Exception) as e:
        make_session(model)
    return str(e.value)


def assert_survives():
    rng = np.random.default_rng(29)
    check_case("float32", make_feeds(rng, "float32", (2, 8), 4))


CREATE_ERRORS = [
    # (id, dtype, graph shapes, overrides of input dtypes, expected fragments)
    ("w-rank3", "float32", {"X": [2, 3], "W": [3, 4, 5]}, {},
     ["Dense: input 'W' (index 1) must be 2-D [K, N], got [3, 4, 5]"]),
    ("w-rank1", "float16", {"X": [2, 3], "W": [3]}, {},
     ["Dense: input 'W' (index 1) must be 2-D [K, N], got [3]"]),
    ("k-mismatch", "float32", {"X": [2, 768], "W": [512, 64]}, {},
     ["Dense: X's last dim (768) must equal W's first dim (512): input 'X' (index 0) has shape [2, 768], "
      "input 'W' (index 1) [512, 64]"]),
    ("k-mismatch-rank3", "bfloat16", {"X": ["b", "s", 16], "W": [8, 4]}, {},
     ["Dense: X's last dim (16) must equal W's first dim (8)"]),
    ("bias-length", "float32", {"X": [2, 16], "W": [16, 8], "bias": [7]}, {},
     ["Dense: input 'bias' (index 2) has shape [7], expected [8] (N, W's last dim; W has shape [16, 8])"]),
    ("bias-rank", "float16", {"X": [2, 16], "W": [16, 8], "bias": [1, 8]}, {},
     ["Dense: input 'bias' (index 2) must be 1-D [N], got [1, 8]"]),
    ("x-rank1", "float32", {"X": [16], "W": [16, 8]}, {},
     ["Dense: input 'X' (index 0) must have rank >= 2 ([..., K]), got [16]"]),
    ("w-dtype", "float16", {"X": [2, 8], "W": [8, 4]}, {"W": "float32"},
     ["Dense: input 'W' (index 1) is float32, expected float16 (the dtype of X)"]),
    ("bias-dtype", "bfloat16", {"X": [2, 8], "W": [8, 4], "bias": [4]}, {"bias": "float16"},
     ["Dense: input 'bias' (index 2) is float16, expected bfloat16 (the dtype of X)"]),
    ("x-float64", "float64", {"X": [2, 8], "W": [8, 4]}, {},
     ["Dense: input 'X' (index 0) is float64, expected float32, float16 or bfloat16"]),
    ("x-int32", "int32", {"X": [2, 8], "W": [8, 4]}, {},
     ["Dense: input 'X' (index 0) is int32, expected float32, float16 or bfloat16"]),
]


@pytest.mark.parametrize("case", CREATE_ERRORS, ids=[c[0] for c in CREATE_ERRORS])
def test_errors_at_session_creation(case):
    _, dtype, shapes, overrides, fragments = case
    msg = session_error(build_model(dtype, shapes, in_dtypes=overrides))
    for f in fragments:
        assert f in msg, f"expected {f!r} in {msg!r}"
    assert "(node 'dense')" in msg
    assert_survives()


ATTR_ERRORS = [
    # (id, attribute value, expected fragment)
    ("relu", "relu", "Dense: attribute 'activation' is 'relu'; expected 'none' or 'gelu'"),
    ("Gelu-case", "Gelu", "Dense: attribute 'activation' is 'Gelu'; expected 'none' or 'gelu'"),
    ("empty", "", "Dense: attribute 'activation' is ''; expected 'none' or 'gelu'"),
    ("int", 1, "Dense: attribute 'activation' is an int, expected a string ('none' or 'gelu')"),
    ("float", 1.5, "Dense: attribute 'activation' is a float, expected a string ('none' or 'gelu')"),
]


@pytest.mark.parametrize("case", ATTR_ERRORS, ids=[c[0] for c in ATTR_ERRORS])
def test_activation_refused(case):
    _, value, fragment = case
    msg = session_error(build_model("float32", {"X": [2, 8], "W": [8, 4], "bias": [4]},
                                    node_attrs={"activation": value}))
    assert fragment in msg, f"expected {fragment!r} in {msg!r}"
    assert "(node 'dense')" in msg
    assert_survives()


def test_errors_at_run_time_with_dynamic_shapes():
    rng = np.random.default_rng(31)
    sess = make_session(build_model("float32", {"X": ["m", "k"], "W": ["k2", "n"], "bias": ["n2"]}))

    def run_error(feeds):
        with pytest.raises(Exception) as e:
            sess.run(None, feeds)
        return str(e.value)

    msg = run_error({"X": rand(rng, (2, 768), "float32"), "W": rand(rng, (512, 4), "float32"),
                     "bias": rand(rng, (4,), "float32")})
    assert "Dense: X's last dim (768) must equal W's first dim (512)" in msg, msg
    msg = run_error({"X": rand(rng, (2, 16), "float32"), "W": rand(rng, (16, 8), "float32"),
                     "bias": rand(rng, (7,), "float32")})
    assert "Dense: input 'bias' (index 2) has shape [7], expected [8] (N, W's last dim" in msg, msg
    # X of unknown rank fed as 1-D.
    sess1 = make_session(build_model("float32", {"X": None, "W": [8, 4]}))
    with pytest.raises(Exception) as e:
        sess1.run(None, {"X": rand(rng, (8,), "float32"), "W": rand(rng, (8, 4), "float32")})
    assert "Dense: input 'X' (index 0) must have rank >= 2 ([..., K]), got [8]" in str(e.value)
    # The session still works afterwards.
    feeds = make_feeds(rng, "float32", (3, 16), 8)
    np.testing.assert_allclose(sess.run(None, feeds)[0], reference(feeds), rtol=4e-7, atol=1e-9)
    assert_survives()


def test_gelu_path_names():
    """dense_set_gelu_path refuses an unknown name, naming what the build has, and keeps its setting."""
    _C = pytest.importorskip("trt_fastops._C")
    tiles = list(_C.dense_sm90_tiles())
    with pytest.raises(ValueError, match=r"unknown GELU path 'cutlass_huge' \(this build has 'auto', 'fallback'"):
        _C.dense_set_gelu_path("cutlass_huge")
    previous = _C.dense_set_gelu_path("fallback")
    try:
        last = "fallback"
        for tile in tiles:
            assert _C.dense_set_gelu_path(tile) == last
            last = tile
        assert _C.dense_set_gelu_path("auto") == last
    finally:
        _C.dense_set_gelu_path(previous)
