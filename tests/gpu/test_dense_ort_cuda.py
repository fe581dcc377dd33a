"""trt_fastops Dense (Y = act(MatMul(X, W) + bias); cuBLASLt with the BIAS epilogue, and for
activation "gelu" the sm_90a CUTLASS GEMM with bias + erf GELU in its epilogue or the fallback,
cuBLASLt then a GELU kernel) on ONNX Runtime's CUDA execution provider, against the float64
reference of tests/test_dense_ort_cpu.py.

- Shapes: BERT's (K = 768, N = 2304 / 3072 / 768; M = 1, 128, 4096), rank-3 X, unaligned
  N = 7 / K = 13 (leading dimensions no vector width divides), N = 1, K = 1, M = 0 / N = 0 (empty
  Y) and K = 0 (Y = bias broadcast, or zeros: copies / memset, no cuBLASLt); with and without
  bias; float32 / float16 / bfloat16. W and bias are runtime inputs or initializers.
- Graphs carry the op's own dtype (bfloat16 too: no Cast nodes); every graph input is a device
  OrtValue bound through IO binding and Y is bound to a NaN-filled device buffer that ORT must
  write in place, so an element the op does not write fails. bfloat16 buffers are filled from
  their bit patterns and read back through a one-node Cast session. Inputs are random, never 0.
- CUDA graphs: enable_cuda_graph=1, 8 runs (warm-up, capture, replays) with new inputs copied in
  place and Y re-poisoned each run; and trt_fastops.runtime.OrtModel (one graph per signature).
- Plan cache (through trt_fastops._C, which shares libtrt_fastops_kernels.so with the ORT
  library in this process): hits across runs and sessions, a new M is a new plan; eviction with
  TRT_FASTOPS_DENSE_PLAN_CACHE=2 (read once per process: run in a child process).

Error bound per element: 2 * u * |ref| (Y's rounding) + c * ||x * w||_2, where ||x * w||_2 =
sqrt(sum_k x_k^2 w_k^2) is the sqrt(K)-scaled magnitude of the sum (what rounding errors of the
products and partial sums grow with). c = 16 * 2^-24 * sqrt(K) for float32 (FP32 accumulation,
whose error grows like u * sqrt(K) * ||x * w||_2; TF32's input rounding alone would be ~2^-11 *
||x * w||_2 and fail), 4u for float16 / bfloat16 (2^-9 / 2^-6: partial sums that a split-K
reduction may keep in Y's dtype). A missing or misplaced bias, a transposed W or an unwritten
row fails by orders of magnitude.

activation "gelu": g = GELU(v). |GELU'| <= 1.07 (its maximum, at v = sqrt 2), so an error in v
grows at most 1.07-fold: bound(g) = 1.07 * bound(v) + 2u|g| (g's rounding) + 2^-22 |v| (erff's
few float32 ulps, seen through 0.5 v) + the spacing of float16 subnormals (GELU's negative tail
lands there). The fallback rounds v to Y's dtype before GELU: bound(v) already holds that rounding.
Which implementation runs is asserted through _C.dense_kernel_name (the launcher's own decision):
on compute capability 9.0 with an sm_90a build, float16 / bfloat16 with K and N multiples of 8
and aligned buffers take the CUTLASS path; N = 7, K = 13, float32 or a misaligned pointer the
fallback.

Needs onnxruntime-gpu (fixture ort_cuda). TRT_FASTOPS_ORT_TEST_EP=CPUExecutionProvider runs the
same tests on the CPU EP (device buffers become host buffers, no CUDA graph; the plan-cache
counters are not asserted, since the CPU op never plans), to check the test itself without a GPU:
    TRT_FASTOPS_ORT_TEST_EP=CPUExecutionProvider python -m pytest --noconftest tests/gpu/test_dense_ort_cuda.py
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.append(str(REPO))  # appended: an installed trt_fastops wins over the source tree

# EP choice, sessions and device runs shared by the ORT EP tests.
_spec = importlib.util.spec_from_file_location("trt_fastops_test_ort_ep_common", Path(__file__).with_name("ort_ep_common.py"))
common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(common)
EP, ON_CUDA, DEVICE = common.EP, common.ON_CUDA, common.DEVICE

# Random inputs (exact in their dtype) and the float64 reference live in the CPU test module.
_spec = importlib.util.spec_from_file_location("trt_fastops_test_dense_ort_cpu", REPO / "tests" / "test_dense_ort_cpu.py")
cpu = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cpu)

from trt_fastops import DOMAIN  # noqa: E402

try:
    from trt_fastops import _C
except ImportError:  # pragma: no cover - depends on the build
    _C = None

DTYPES = ["float32", "float16", "bfloat16"]
# Typed device buffers, shared with the other ops' EP tests (ort_ep_common).
NP, ELEM, BF16_NAN = common.NP, common.ELEM, common.BF16_NAN
bf16_bits, tensor_proto = common.bf16_bits, common.tensor_proto
new_value, fill, device_tensor = common.new_value, common.fill, common.device_tensor
poison, poisoned, to_host = common.poison, common.poisoned, common.to_host
UNIT = {"float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}  # unit roundoff of Y's dtype


@pytest.fixture(scope="module")
def ort_ep(request):
    """onnxruntime with the EP under test (CUDA unless overridden)."""
    if ON_CUDA:
        return request.getfixturevalue("ort_cuda")
    return pytest.importorskip("onnxruntime")


def cache_stats():
    """The Dense plan cache counters (CUDA only: the CPU op never plans)."""
    if _C is None or not hasattr(_C, "dense_plan_cache_stats"):
        pytest.skip("trt_fastops._C has no dense bindings (dense_plan_cache_stats)")
    return _C.dense_plan_cache_stats()


# ---------------------------------------------------------------------------
# models, device buffers, runs


def dense_model(dtype, shapes, inits=None, activation=None):
    """One Dense node, every tensor in `dtype`. shapes: slot -> graph shape (None: unknown rank;
    str: symbolic) for graph inputs; inits: slot -> array stored as an initializer instead;
    activation: the node's 'activation' attribute (None: absent)."""
    inits = inits or {}
    graph_in, initializers, names = [], [], []
    for slot in cpu.SLOTS:
        if slot in inits:
            initializers.append(tensor_proto(slot, inits[slot], dtype))
        elif slot in shapes:
            graph_in.append(helper.make_tensor_value_info(slot, ELEM[dtype], shapes[slot]))
        else:
            continue
        names.append(slot)
    node = helper.make_node("Dense", names, ["Y"], domain=DOMAIN, name="dense")
    if activation is not None:
        node.attribute.append(helper.make_attribute("activation", activation))
    y = helper.make_tensor_value_info("Y", ELEM[dtype], None)
    graph = helper.make_graph([node], f"Dense_{dtype}", graph_in, [y], initializer=initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)],
                             ir_version=cpu.IR_VERSION)


session = common.session


def run_bound(ort, sess, feeds, dtype, y_shape):
    """One run: every graph input bound as a DEVICE OrtValue, Y bound to a NaN-filled DEVICE
    buffer that ORT must write in place (an empty Y is left to ORT). Returns Y as float64."""
    io = sess.io_binding()
    for name, arr in feeds.items():
        io.bind_ortvalue_input(name, device_tensor(ort, arr, dtype))
    if int(np.prod(y_shape)) == 0:
        io.bind_output("Y", DEVICE)
        sess.run_with_iobinding(io)
        io.synchronize_outputs()
        out = io.get_outputs()[0]
        assert tuple(out.shape()) == tuple(y_shape), (out.shape(), y_shape)
        return np.zeros(y_shape)
    y = poisoned(ort, y_shape, dtype)
    io.bind_ortvalue_output("Y", y)
    sess.run_with_iobinding(io)
    io.synchronize_outputs()
    assert io.get_outputs()[0].data_ptr() == y.data_ptr(), "ORT did not write into the bound output"
    return to_host(ort, y, dtype)


GELU_LIP = 1.07  # max |GELU'(v)| (at v = sqrt 2: Phi(sqrt 2) + sqrt 2 phi(sqrt 2) = 1.0682)
SUBNORMAL = {"float32": 0.0, "float16": 2.0**-24, "bfloat16": 0.0}  # float16's subnormal spacing


def references(feeds, activation="none", rows=None):
    """(float64 reference, v = X @ W + bias, ||x * w||_2 per element: the error scale). rows: the
    rows of the flattened [M, N] to compute (None: all, shaped like Y; else [len(rows), N])."""
    x = np.asarray(feeds["X"], np.float64)
    w = np.asarray(feeds["W"], np.float64)
    m = int(np.prod(x.shape[:-1]))  # explicit: reshape(-1, 0) is ambiguous when K = 0
    x2 = x.reshape(m, x.shape[-1])
    if rows is not None:
        x2 = x2[rows]
    v = x2 @ w
    if "bias" in feeds:
        v = v + np.asarray(feeds["bias"], np.float64)
    scale = np.sqrt((x2**2) @ (w**2))
    if rows is None:
        v, scale = v.reshape(x.shape[:-1] + (w.shape[1],)), scale.reshape(x.shape[:-1] + (w.shape[1],))
    ref = cpu.gelu(v) if activation == "gelu" else v
    return ref, v, scale


def bound(ref, scale, dtype, k):
    c = 16 * 2.0**-24 * np.sqrt(max(k, 1)) if dtype == "float32" else 4 * UNIT[dtype]
    return 2 * UNIT[dtype] * np.abs(ref) + c * scale + 1e-30


def bound_gelu(g, v, scale, dtype, k):
    """GELU(v)'s bound (see the top of the file)."""
    return (GELU_LIP * bound(v, scale, dtype, k) + 2 * UNIT[dtype] * np.abs(g) + 2.0**-22 * np.abs(v)
            + SUBNORMAL[dtype])


def assert_close(got, feeds, dtype, what, activation="none", rows=None):
    """got: Y as float64. rows: compare only these rows of the flattened [M, N] (large M: the
    float64 reference of every row costs more than the run); every element is checked for NaN."""
    nan = np.isnan(got)
    assert not nan.any(), f"{what}: {int(nan.sum())} of {got.size} elements unwritten (NaN)"
    ref, v, scale = references(feeds, activation, rows)
    if rows is not None:
        got = got.reshape(-1, got.shape[-1])[rows]
    assert got.shape == ref.shape, (what, got.shape, ref.shape)
    if got.size == 0:
        return
    k = feeds["X"].shape[-1]
    b = bound_gelu(ref, v, scale, dtype, k) if activation == "gelu" else bound(ref, scale, dtype, k)
    ratio = float((np.abs(got - ref) / b).max())
    assert ratio <= 1.0, f"{what}: error {ratio:.3g} x the bound"


def check(ort, dtype, feeds, *, inits=(), graph_shapes=None, what="", activation=None, rows=None):
    shapes = graph_shapes or {k: list(v.shape) for k, v in feeds.items()}
    model = dense_model(dtype, {k: v for k, v in shapes.items() if k not in inits}, {k: feeds[k] for k in inits},
                        activation)
    sess = session(ort, model)
    y_shape = feeds["X"].shape[:-1] + (feeds["W"].shape[1],)
    got = run_bound(ort, sess, {k: v for k, v in feeds.items() if k not in inits}, dtype, y_shape)
    assert_close(got, feeds, dtype, f"Dense {dtype} {what}", activation or "none", rows)
    return sess


def make_feeds(rng, dtype, x_shape, n, *, bias=True):
    return cpu.make_feeds(rng, dtype, x_shape, n, bias=bias)


# ---------------------------------------------------------------------------
# shapes

SHAPES = [  # (X shape, N)
    ((1, 768), 2304),        # BERT QKV, one token
    ((128, 768), 2304),
    ((4096, 768), 2304),
    ((2, 64, 768), 3072),    # FFN up, rank-3 X
    ((2, 64, 3072), 768),    # FFN down
    ((5, 13), 7),            # unaligned N and K
    ((3, 13), 8),
    ((9, 16), 7),
    ((17, 7), 13),
    ((1, 1), 1),
    ((6, 1), 5),             # K = 1
    ((4, 32), 1),            # N = 1
    ((3, 5, 40), 24),
]


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("x_shape,n", SHAPES, ids=[f"{'x'.join(map(str, s))}-n{n}" for s, n in SHAPES])
def test_cuda_shapes(ort_ep, x_shape, n, dtype, bias):
    rng = np.random.default_rng(sum(x_shape) * 31 + n + 7 * DTYPES.index(dtype) + bias)
    feeds = make_feeds(rng, dtype, x_shape, n, bias=bias)
    inits = ("W", "bias") if sum(x_shape) % 2 else ()  # half the cases: the rewriter's initializers
    check(ort_ep, dtype, feeds, inits=[s for s in inits if s in feeds], what=f"x={x_shape} n={n}")


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("x_shape,n", [((0, 8), 4), ((2, 0, 8), 4), ((3, 8), 0), ((3, 0), 5), ((2, 4, 0), 3),
                                       ((1000, 0), 6)], ids=["m0", "m0-rank3", "n0", "k0", "k0-rank3", "k0-m1000"])
def test_cuda_empty_dims(ort_ep, x_shape, n, dtype, bias):
    """M = 0 or N = 0: empty Y, nothing runs. K = 0: Y = bias broadcast (copies doubling the
    filled rows) or zeros (memset)."""
    rng = np.random.default_rng(13 + n + len(x_shape))
    check(ort_ep, dtype, make_feeds(rng, dtype, x_shape, n, bias=bias), what=f"x={x_shape} n={n}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_dynamic_shapes_one_session(ort_ep, dtype):
    """Symbolic M (and K, N): every shape is its own plan, planned on first use; W and bias
    change between runs."""
    sess = session(ort_ep, dense_model(dtype, {"X": ["b", "s", "k"], "W": ["k", "n"], "bias": ["n"]}))
    rng = np.random.default_rng(22 + DTYPES.index(dtype))
    for x_shape, n in [((1, 3, 64), 32), ((4, 33, 64), 32), ((1, 3, 64), 32), ((2, 5, 13), 7), ((1, 1, 768), 2304),
                       ((2, 0, 16), 8), ((2, 3, 0), 8)]:
        feeds = make_feeds(rng, dtype, x_shape, n)
        ref = cpu.reference(feeds)
        assert_close(run_bound(ort_ep, sess, feeds, dtype, ref.shape), feeds, dtype, f"Dense {dtype} x={x_shape} n={n}")


def test_cuda_large_values_cancel(ort_ep):
    """Products that cancel in pairs: Y is (nearly) the bias alone, which the epilogue must add."""
    rng = np.random.default_rng(40)
    k = 512
    x = cpu.rand(rng, (64, k), "float16")
    w = cpu.rand(rng, (k, 48), "float16", 0.5)
    w[k // 2:] = w[: k // 2]
    x[:, k // 2:] = -x[:, : k // 2]
    check(ort_ep, "float16", {"X": x, "W": w, "bias": cpu.rand(rng, (48,), "float16")}, what="cancelling sums")


# ---------------------------------------------------------------------------
# CUDA graphs


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_graph_replays(ort_ep, dtype, bias):
    """enable_cuda_graph=1: X, W, bias and Y bound to DEVICE OrtValues once; every run copies
    new inputs and weights in place and re-poisons Y, so a replay that ignored either is caught.
    8 runs cover ORT's warm-up, the capture and replays."""
    graph_replays(ort_ep, dtype, bias, (64, 768), 2304, None, 50 + DTYPES.index(dtype) + 3 * bias)


def graph_replays(ort_ep, dtype, bias, x_shape, n, activation, seed):
    shapes = {"X": list(x_shape), "W": [x_shape[-1], n]} | ({"bias": [n]} if bias else {})
    sess = session(ort_ep, dense_model(dtype, shapes, activation=activation), cuda_graph=True)
    rng = np.random.default_rng(seed)
    feeds = make_feeds(rng, dtype, x_shape, n, bias=bias)
    in_vals = {k: device_tensor(ort_ep, v, dtype) for k, v in feeds.items()}
    y_shape = (x_shape[0], n)
    y = poisoned(ort_ep, y_shape, dtype)
    io = sess.io_binding()
    for k, v in in_vals.items():
        io.bind_ortvalue_input(k, v)
    io.bind_ortvalue_output("Y", y)
    for it in range(8):
        if it > 0:
            feeds = make_feeds(rng, dtype, x_shape, n, bias=bias)
            for k, v in feeds.items():
                fill(in_vals[k], v, dtype)
            poison(y, y_shape, dtype)
        sess.run_with_iobinding(io)
        io.synchronize_outputs()
        assert_close(to_host(ort_ep, y, dtype), feeds, dtype, f"Dense {dtype} {activation or ''} graph run {it}",
                     activation or "none")


def test_cuda_graphs_through_ort_model(ort_ep):
    """trt_fastops.runtime.OrtModel: one CUDA graph per input signature; new inputs every run."""
    graphs_through_ort_model(ort_ep, None, 60)


def graphs_through_ort_model(ort_ep, activation, seed):
    from trt_fastops import runtime as R

    rng = np.random.default_rng(seed)
    w = cpu.rand(rng, (768, 3072), "float16", 1.0 / np.sqrt(768))
    b = cpu.rand(rng, (3072,), "float16", 0.5)
    model = dense_model("float16", {"X": ["b", "s", 768]}, {"W": w, "bias": b}, activation)
    m = R.OrtModel(model, "cuda:0" if ON_CUDA else "cpu")
    if ON_CUDA:
        assert m.graphs_enabled, f"CUDA graphs fell back: {m.graph_fallback}"
    for i in range(4):
        feeds = {"X": cpu.rand(rng, (2, 32, 768), "float16"), "W": w, "bias": b}
        out = m.run({"X": feeds["X"]})
        assert_close(np.asarray(out["Y"], np.float64), feeds, "float16", f"OrtModel run {i}", activation or "none")
    if ON_CUDA:
        s = m.stats()
        assert s["cuda_graphs"] is True and (s["graph_misses"], s["graph_hits"]) == (1, 3), s


# ---------------------------------------------------------------------------
# activation "gelu": the sm_90a CUTLASS GEMM (bias + erf GELU in its epilogue) where it applies,
# else cuBLASLt then the GELU kernel

A16 = 1 << 20  # a stand-in device address, 16-byte aligned: dense_kernel_name reads only alignment


def hopper_build():
    """Compute capability 9.0 (device 0, ORT's) and an sm_90a build: where the CUTLASS path runs."""
    if not ON_CUDA or _C is None:
        return False
    devs = _C.devices()
    return bool(devs) and devs[0]["capability"] == "9.0" and "90a" in _C.build_info()["cuda_archs"]


def expected_gelu_kernel(dtype, m, n, k, bias, aligned=True):
    """The launcher's rule (dense_launch.cc choose_path / sm90_tile), restated."""
    if m == 0 or n == 0:
        return "none"
    if k == 0:
        return "fill_k0+gelu" if bias else "fill_k0"
    if hopper_build() and dtype in ("float16", "bfloat16") and k % 8 == 0 and n % 8 == 0 and aligned:
        sms = _C.devices()[0]["multiprocessors"]

        def tiles(tm, tn):
            return -(-m // tm) * -(-n // tn)

        if m <= 512:
            tile = "ws_64x64" if tiles(64, 64) <= sms else "coop_128x96_c2"
        else:
            tile = "coop_128x256" if tiles(128, 256) >= sms else None
        if tile is not None:
            return f"cutlass_sm90_gelu<{dtype},{tile}>"
    return "cublaslt_bias+gelu" if bias else "cublaslt+gelu"


def assert_gelu_kernel(dtype, m, n, k, bias):
    """What the launcher runs for this problem with aligned buffers (ORT's allocations are)."""
    if not ON_CUDA:
        return
    if _C is None or not hasattr(_C, "dense_kernel_name"):
        pytest.skip("trt_fastops._C has no dense_kernel_name")
    got = _C.dense_kernel_name(dtype, A16, A16, A16, m, n, k, bias=A16 if bias else 0, activation="gelu")
    assert got == expected_gelu_kernel(dtype, m, n, k, bias), (dtype, m, n, k, bias, got)


def sample_rows(m):
    """Rows to compare against float64: all up to 4096; beyond, the first and last 512 (edge
    tiles) and every 61st (NaN, i.e. unwritten elements, is checked everywhere)."""
    if m <= 4096:
        return None
    return np.unique(np.concatenate([np.arange(512), np.arange(m - 512, m), np.arange(0, m, 61)]))


GELU_BERT = [(m, k, n) for m in (128, 4096, 16384) for k, n in ((768, 3072), (3072, 768))]


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("m,k,n", GELU_BERT, ids=[f"m{m}-k{k}-n{n}" for m, k, n in GELU_BERT])
def test_cuda_gelu_bert_shapes(ort_ep, m, k, n, dtype, bias):
    """BERT-base's MLP: FFN up (768 -> 3072, where BiasGelu follows) and down (3072 -> 768), from
    one 128-token sequence to 16384 tokens; W and bias initializers (the rewriter's form). On an
    H100: the 64x64 ping-pong tile for M = 128, the fallback for 4096 x 768 (96 large tiles < 132
    SMs), the 128x256 cooperative tile from 16384 x 768 up."""
    if not ON_CUDA and m * k * n > 128 * 768 * 3072:
        pytest.skip("CPU stand-in: the float64 CPU op is too slow at this size")
    assert_gelu_kernel(dtype, m, n, k, bias)
    rng = np.random.default_rng(m + k + n + 7 * (dtype == "bfloat16") + bias)
    feeds = make_feeds(rng, dtype, (m, k), n, bias=bias)
    check(ort_ep, dtype, feeds, inits=[s for s in ("W", "bias") if s in feeds], what=f"gelu m={m} k={k} n={n}",
          activation="gelu", rows=sample_rows(m))


GELU_SHAPES = [  # (X shape, N, dtype)
    ((5, 13), 7, "float16"),          # N and K unaligned: fallback
    ((64, 768), 7, "bfloat16"),       # N = 7: fallback
    ((64, 13), 3072, "float16"),      # K = 13: fallback
    ((9, 16), 7, "float32"),          # float32: fallback, always
    ((128, 768), 3072, "float32"),
    ((1, 768), 3072, "float16"),      # M = 1
    ((4, 32), 1, "float16"),          # N = 1: fallback
    ((3, 5, 40), 24, "bfloat16"),     # rank 3, tiny aligned: CUTLASS with partial tiles
    ((200, 768), 3072, "bfloat16"),   # partial M tile (small tile)
    ((300, 64), 200, "float16"),      # partial N tile, K = one k-block
    ((256, 72), 512, "float16"),      # K = 72: a partial k-block (TMA fills zeros)
    ((520, 256), 1024, "bfloat16"),   # M > 512, but few large tiles: fallback
    ((4100, 768), 3072, "float16"),   # large tile, partial M tile
]


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("x_shape,n,dtype", GELU_SHAPES,
                         ids=[f"{'x'.join(map(str, s))}-n{n}-{d}" for s, n, d in GELU_SHAPES])
def test_cuda_gelu_shapes(ort_ep, x_shape, n, dtype, bias):
    m, k = int(np.prod(x_shape[:-1])), x_shape[-1]
    if not ON_CUDA and m * k * n > 128 * 768 * 3072:
        pytest.skip("CPU stand-in: the float64 CPU op is too slow at this size")
    assert_gelu_kernel(dtype, m, n, k, bias)
    rng = np.random.default_rng(sum(x_shape) * 13 + n + 5 * DTYPES.index(dtype) + bias)
    feeds = make_feeds(rng, dtype, x_shape, n, bias=bias)
    inits = ("W", "bias") if sum(x_shape) % 2 else ()  # half the cases: the rewriter's initializers
    check(ort_ep, dtype, feeds, inits=[s for s in inits if s in feeds], what=f"gelu x={x_shape} n={n}",
          activation="gelu")


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("x_shape,n", [((0, 8), 4), ((3, 8), 0), ((3, 0), 5), ((1000, 0), 6)],
                         ids=["m0", "n0", "k0", "k0-m1000"])
def test_cuda_gelu_empty_dims(ort_ep, x_shape, n, dtype, bias):
    """K = 0: Y = GELU(bias) broadcast (copies, then the GELU kernel), or GELU(0) = 0 (memset)."""
    m, k = x_shape
    assert_gelu_kernel(dtype, m, n, k, bias)
    rng = np.random.default_rng(113 + n + m)
    check(ort_ep, dtype, make_feeds(rng, dtype, x_shape, n, bias=bias), what=f"gelu x={x_shape} n={n}",
          activation="gelu")


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_gelu_exact_v(ort_ep, dtype, bias):
    """The GELU itself, with v exact: X has one non-zero column and W one non-zero row, so
    v = x_i * w_j + bias_j (multiples of 1/8 in [-8.25, 8.25], exact in every dtype) carries no
    accumulation or rounding error on either path. Y must then be GELU(v) evaluated in float32 and
    rounded once: within u|g| + erff's error (2^-21 |v|). The general bound (1.07 x the GEMM's)
    could not tell the tanh approximation (cuBLASLt's GELU epilogue) from the erf form in 16-bit
    types; this can: at v = -3 they differ by 10 %. On an H100 float16 / bfloat16 run CUTLASS."""
    m, k, n = 6, 64, 72
    assert_gelu_kernel(dtype, m, n, k, bias)
    x = np.zeros((m, k), np.float32)
    x[:, 0] = [1.0, 0.5, -0.5, 1.0, -1.0, 0.5]
    w = np.zeros((k, n), np.float32)
    w[0] = (np.arange(n) % 65 - 32) / 4.0
    feeds = {"X": cpu.as_fed(x, dtype), "W": cpu.as_fed(w, dtype)}
    if bias:
        feeds["bias"] = cpu.as_fed((np.arange(n) % 5 - 2) / 8.0, dtype)
    ref, v, _ = references(feeds, "gelu")
    assert np.array_equal(cpu.as_fed(v, dtype).astype(np.float64), v), "test setup: v must be exact in dtype"
    sess = session(ort_ep, dense_model(dtype, {k_: list(a.shape) for k_, a in feeds.items()}, activation="gelu"))
    got = run_bound(ort_ep, sess, feeds, dtype, (m, n))
    err = np.abs(got - ref)
    b = UNIT[dtype] * np.abs(ref) + 2.0**-21 * np.abs(v) + SUBNORMAL[dtype] + 1e-30
    worst = int(np.argmax(err / b))
    assert (err <= b).all(), (f"gelu {dtype}: v = {v.flat[worst]}: got {got.flat[worst]!r}, "
                              f"GELU(v) = {ref.flat[worst]!r}, bound {b.flat[worst]:.3g}")


def direct_gelu(dtype, feeds, *, misaligned=None, path="auto"):
    """_C.dense_forward(activation="gelu") on torch buffers, `misaligned` ("x", "w" or "y") moved
    by one element (2 bytes), under dense_set_gelu_path(path). Y sits between NaN guard elements
    that must stay NaN (no write outside Y). Returns the kernel name dense_kernel_name gave for the
    call (asked before the run) after checking Y against the float64 reference."""
    if not ON_CUDA:
        pytest.skip("direct launcher calls need CUDA")
    torch = pytest.importorskip("torch")
    if _C is None or not hasattr(_C, "dense_set_gelu_path"):
        pytest.skip("trt_fastops._C has no dense_kernel_name / dense_set_gelu_path")
    tdt = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}[dtype]
    (m, k), n, guard = feeds["X"].shape, feeds["W"].shape[1], 8

    def place(name, arr):
        off = 1 if misaligned == name else 0
        buf = torch.full((arr.size + 2 * guard,), float("nan"), dtype=tdt, device="cuda")
        view = buf[guard + off:guard + off + arr.size].view(arr.shape)
        view.copy_(torch.from_numpy(np.ascontiguousarray(arr, np.float32)).to(tdt))  # exact: the values are
        return buf, view

    (_, x), (_, w) = place("x", feeds["X"]), place("w", feeds["W"])
    b = place("bias", feeds["bias"])[1] if "bias" in feeds else None
    y_buf, y = place("y", np.full((m, n), np.nan, np.float32))
    ws = torch.empty(_C.dense_workspace_bytes(), dtype=torch.uint8, device="cuda")
    args = (dtype, x.data_ptr(), w.data_ptr(), y.data_ptr(), m, n, k)
    kw = {"bias": b.data_ptr() if b is not None else 0, "activation": "gelu"}
    previous = _C.dense_set_gelu_path(path)
    try:
        name = _C.dense_kernel_name(*args, **kw)
        _C.dense_forward(*args, **kw, workspace=ws.data_ptr(), workspace_bytes=ws.numel(),
                         stream=torch.cuda.current_stream().cuda_stream)
        torch.cuda.synchronize()
    finally:
        _C.dense_set_gelu_path(previous)
    assert_close(y.float().cpu().numpy().astype(np.float64), feeds, dtype, f"direct {dtype} {name}", "gelu")
    off = 1 if misaligned == "y" else 0
    outside = torch.cat([y_buf[:guard + off], y_buf[guard + off + m * n:]])
    assert torch.isnan(outside).all(), f"{name} wrote outside Y"
    return name


@pytest.mark.parametrize("misaligned", [None, "x", "w", "y"], ids=["aligned", "x+2B", "w+2B", "y+2B"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_cuda_gelu_direct_alignment(dtype, misaligned):
    """A pointer moved by one element (2 bytes): TMA cannot take it, so the launcher falls back."""
    m, k, n = 96, 256, 512
    feeds = make_feeds(np.random.default_rng(130 + (dtype == "bfloat16")), dtype, (m, k), n)
    name = direct_gelu(dtype, feeds, misaligned=misaligned)
    assert name == expected_gelu_kernel(dtype, m, n, k, True, aligned=misaligned is None), name


def built_tiles():
    """The sm_90a tiles this build carries (a tuning build has them all)."""
    return list(_C.dense_sm90_tiles()) if _C is not None and hasattr(_C, "dense_sm90_tiles") else []


@pytest.mark.parametrize("shape", [(640, 768, 3072), (333, 264, 520), (48, 1024, 256)],
                         ids=["bert640", "ragged333x264x520", "m48k1024"])
@pytest.mark.parametrize("path", ["auto", "fallback"] + built_tiles())
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_cuda_gelu_forced_paths(dtype, path, shape):
    """dense_set_gelu_path: every implementation, each checked against float64, on a BERT shape (640
    tokens, 768 -> 3072), a ragged one (M, N, K no multiple of any tile: partial tiles everywhere)
    and a few-tiles, long-K one (where stream-K splits K across CTAs)."""
    m, k, n = shape
    feeds = make_feeds(np.random.default_rng(140 + (dtype == "bfloat16") + m), dtype, (m, k), n)
    name = direct_gelu(dtype, feeds, path=path)
    if not hopper_build() or path == "fallback":
        assert name == "cublaslt_bias+gelu", name
    elif path == "auto":
        assert name == expected_gelu_kernel(dtype, m, n, k, True), name
    else:
        assert name == f"cutlass_sm90_gelu<{dtype},{path}>", name


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("x_shape", [(64, 768), (2048, 768)], ids=["m64", "m2048"])
def test_cuda_gelu_graph_replays(ort_ep, x_shape, dtype, bias):
    """test_cuda_graph_replays with activation "gelu" and N = 3072 (BERT's FFN up): on an H100 the
    CUTLASS kernels (64x64 tile at M = 64, 128x256 at M = 2048: 192 tiles) captured and replayed with
    new inputs each run."""
    if not ON_CUDA and x_shape[0] > 64:
        pytest.skip("CPU stand-in: the float64 CPU op is too slow at this size")
    assert_gelu_kernel(dtype, x_shape[0], 3072, x_shape[1], bias)
    graph_replays(ort_ep, dtype, bias, x_shape, 3072, "gelu", 150 + DTYPES.index(dtype) + 3 * bias + x_shape[0])


def test_cuda_gelu_graphs_through_ort_model(ort_ep):
    """test_cuda_graphs_through_ort_model with activation "gelu"."""
    graphs_through_ort_model(ort_ep, "gelu", 160)


# ---------------------------------------------------------------------------
# plan cache, threads, errors


def test_cuda_plan_cache_hits(ort_ep):
    """A second run (and a second session) of one signature plans nothing; a new M is a new plan."""
    if not ON_CUDA:
        pytest.skip("the plan cache serves the CUDA EP only (the CPU op never plans)")
    rng = np.random.default_rng(70)
    model = dense_model("float16", {"X": ["m", 256], "W": [256, 512], "bias": [512]})
    sess = session(ort_ep, model)
    old_capacity = cache_stats()["capacity"]
    _C.dense_plan_cache_set_capacity(max(old_capacity, 64))
    try:
        _C.dense_plan_cache_clear()
        _C.dense_plan_cache_reset_stats()

        def run(s_, m):
            feeds = make_feeds(rng, "float16", (m, 256), 512)
            assert_close(run_bound(ort_ep, s_, feeds, "float16", (m, 512)), feeds, "float16", f"m={m}")
            return cache_stats()

        s1 = run(sess, 8)
        assert (s1["misses"], s1["hits"], s1["size"]) == (1, 0, 1), s1
        s2 = run(sess, 8)
        assert (s2["misses"], s2["hits"], s2["size"]) == (1, 1, 1), s2
        s3 = run(session(ort_ep, model), 8)
        assert (s3["misses"], s3["hits"], s3["size"]) == (1, 2, 1), s3
        s4 = run(sess, 24)
        assert (s4["misses"], s4["hits"], s4["size"], s4["evictions"]) == (2, 2, 2, 0), s4
        assert _C.dense_library_status()["available"], _C.dense_library_status()
    finally:
        _C.dense_plan_cache_set_capacity(old_capacity)


def test_cuda_concurrent_sessions_from_threads(ort_ep):
    """8 threads run 32 jobs over 4 models (float16 / bfloat16 / float32, bias or not), two
    sessions each, every job with its own inputs."""
    from concurrent.futures import ThreadPoolExecutor

    specs = [("float16", (16, 768), 2304, True), ("bfloat16", (9, 13), 7, True), ("float32", (33, 64), 96, False),
             ("float16", (2, 7, 128), 64, False)]
    models = []
    for dtype, xs, n, bias in specs:
        shapes = {"X": list(xs), "W": [xs[-1], n]} | ({"bias": [n]} if bias else {})
        models.append((dtype, xs, n, bias, [session(ort_ep, dense_model(dtype, shapes)) for _ in range(2)]))

    def work(i):
        dtype, xs, n, bias, sessions = models[i % len(models)]
        rng = np.random.default_rng(500 + i)
        feeds = make_feeds(rng, dtype, xs, n, bias=bias)
        for rep in range(2):
            got = run_bound(ort_ep, sessions[(i // len(models) + rep) % 2], feeds, dtype, (*xs[:-1], n))
            assert_close(got, feeds, dtype, f"job {i} rep {rep}: {dtype} x={xs} n={n}")

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(work, range(32)))


def test_cuda_errors_are_ours_and_survivable(ort_ep):
    rng = np.random.default_rng(80)
    # Session creation: K mismatch on the CUDA EP.
    with pytest.raises(Exception) as e:
        session(ort_ep, dense_model("float16", {"X": [2, 768], "W": [512, 64]}))
    assert "Dense: X's last dim (768) must equal W's first dim (512)" in str(e.value)
    # Run time: bias that does not match the fed W.
    sess = session(ort_ep, dense_model("float16", {"X": ["m", "k"], "W": ["k", "n"], "bias": ["n2"]}))
    feeds = {"X": cpu.rand(rng, (4, 16), "float16"), "W": cpu.rand(rng, (16, 8), "float16"),
             "bias": cpu.rand(rng, (7,), "float16")}
    with pytest.raises(Exception) as e:
        run_bound(ort_ep, sess, feeds, "float16", (4, 8))
    assert "Dense: input 'bias' (index 2) has shape [7], expected [8]" in str(e.value)
    # The same session still works afterwards.
    feeds["bias"] = cpu.rand(rng, (8,), "float16")
    assert_close(run_bound(ort_ep, sess, feeds, "float16", (4, 8)), feeds, "float16", "after an error")


# Eviction: TRT_FASTOPS_DENSE_PLAN_CACHE is read once per process (the first time the cache is
# used), so the test runs this file as a script in a child process with the variable set.
EVICT_CHILD_FLAG = "--dense-eviction-child"


def _eviction_child():
    import onnxruntime as ort

    rng = np.random.default_rng(90)
    configs = [((4, 64), 32 + 16 * i) for i in range(3)]  # three signatures
    sessions, all_feeds = [], []
    for xs, n in configs:
        f = make_feeds(rng, "float16", xs, n)
        all_feeds.append(f)
        sessions.append(session(ort, dense_model("float16", {k: list(v.shape) for k, v in f.items()})))
    report = {"stats": []}
    for i in (0, 1, 2, 0):  # the 4th run finds config 0 evicted (LRU with room for 2)
        f = all_feeds[i]
        assert_close(run_bound(ort, sessions[i], f, "float16", cpu.reference(f).shape), f, "float16",
                     f"eviction child, config {i}")
        report["stats"].append({k: v for k, v in _C.dense_plan_cache_stats().items()
                                if k in ("hits", "misses", "evictions", "size", "capacity")})
    print("DENSE_EVICTION_RESULT " + json.dumps(report), flush=True)


def test_cuda_plan_cache_eviction_small_capacity(ort_ep):
    if _C is None or not hasattr(_C, "dense_plan_cache_stats"):
        pytest.skip("trt_fastops._C has no dense bindings (dense_plan_cache_stats)")
    env = dict(os.environ)
    env["TRT_FASTOPS_DENSE_PLAN_CACHE"] = "2"
    env["TRT_FASTOPS_ORT_TEST_EP"] = EP
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), EVICT_CHILD_FLAG], env=env,
                          capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"eviction child failed (rc {proc.returncode}):\n{out[-6000:]}"
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("DENSE_EVICTION_RESULT ")]
    assert line, f"no result line from the eviction child:\n{out[-6000:]}"
    stats = json.loads(line[-1].split(" ", 1)[1])["stats"]
    assert all(s["capacity"] == 2 for s in stats), stats  # the variable reached the child's cache
    if not ON_CUDA:
        pytest.skip("child ran and matched the reference; eviction counters need the CUDA EP (the CPU op never plans)")
    assert [(s["misses"], s["size"], s["evictions"]) for s in stats] == [(1, 1, 0), (2, 2, 0), (3, 2, 1), (4, 2, 2)], \
        stats


if __name__ == "__main__":
    if EVICT_CHILD_FLAG in sys.argv:
        _eviction_child()
    else:
        sys.exit(f"usage: python {Path(__file__).name} {EVICT_CHILD_FLAG} (pytest runs the tests)")
