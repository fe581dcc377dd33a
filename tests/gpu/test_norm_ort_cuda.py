"""trt_fastops norm ops on ONNX Runtime's CUDA execution provider (our CUDA
kernels via launch_norm), against the float64 references of
tests/test_norm_ort_cpu.py.

Every session has session.disable_cpu_ep_fallback = 1 and only the CUDA EP,
so a node cannot silently run on CPU. Outputs are bound to NaN-filled device
buffers. One test runs under the CUDA EP's CUDA graphs (enable_cuda_graph=1,
IO binding with device OrtValues, replays with new inputs copied in place).

Needs onnxruntime-gpu (fixture ort_cuda). TRT_FASTOPS_ORT_TEST_EP=CPUExecutionProvider
runs the same tests on the CPU EP (device buffers become host buffers, no CUDA
graph), to check the test itself without a GPU:
    TRT_FASTOPS_ORT_TEST_EP=CPUExecutionProvider python -m pytest --noconftest tests/gpu/test_norm_ort_cuda.py
"""
from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

# EP choice, sessions and device runs shared by the ORT EP tests.
_spec = importlib.util.spec_from_file_location("trt_fastops_test_ort_ep_common", Path(__file__).with_name("ort_ep_common.py"))
common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(common)
EP, ON_CUDA, DEVICE = common.EP, common.ON_CUDA, common.DEVICE

# Shared helpers and the float64 reference live in the CPU test module.
_spec = importlib.util.spec_from_file_location(
    "trt_fastops_test_norm_ort_cpu", Path(__file__).resolve().parents[1] / "test_norm_ort_cpu.py")
cpu = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cpu)


SIGS, STAT_OUTPUTS, NP = cpu.SIGS, cpu.STAT_OUTPUTS, cpu.NP
DTYPES = ["float32", "float16", "bfloat16"]
# float32 statistics on the GPU (the reference uses float64): a little looser than CPU.
TOL = {"float32": 1e-4, "float16": 2e-3, "bfloat16": 1.6e-2}
STAT_TOL = 1e-4

HIDDEN = [1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 320,
          511, 512, 513, 640, 768, 1000, 1023, 1024, 1025, 1536, 2047, 2048, 2049, 2560, 3072, 4095,
          4096, 4097, 5120, 6144, 8192, 8193, 10240, 12288, 16383, 16384, 16385, 20480, 24576, 32768,
          32769, 65536, 131073]
SHAPES = ([(rows, cols) for cols in HIDDEN for rows in (1, 3)]
          + [(0, 768), (0, 1), (0, 16385), (4096, 1024), (65537, 8), (1000, 4096), (300, 5120), (7, 50000)])


@pytest.fixture(scope="module")
def ort_ep(request):
    """onnxruntime with the EP under test (CUDA unless overridden)."""
    if ON_CUDA:
        return request.getfixturevalue("ort_cuda")
    return pytest.importorskip("onnxruntime")


session = common.session


def out_specs(op, dtype, outputs, ref):
    """graph output name -> (shape, numpy dtype) for the requested op outputs."""
    specs = {}
    for o in outputs:
        npdt = np.float32 if (o in STAT_OUTPUTS or dtype == "bfloat16") else NP[dtype]
        specs[cpu.out_name(o, dtype)] = (ref[o].shape, npdt)
    return specs


device_value = common.device_value


run_device = common.run_device


def compare(op, dtype, got, ref, outputs, what="", tol_scale=1.0):
    for o in outputs:
        g = np.asarray(got[cpu.out_name(o, dtype)], np.float64)
        r = ref[o]
        assert g.shape == r.shape, (what, o, g.shape, r.shape)
        assert not np.isnan(g).any(), f"{op} {dtype} {what}: output {o} has unwritten (NaN) elements"
        t = (STAT_TOL if o in STAT_OUTPUTS else TOL[dtype]) * tol_scale
        np.testing.assert_allclose(g, r, rtol=t, atol=t, err_msg=f"{op} {dtype} {what} output {o}")


def check(ort, sess, op, dtype, feeds, outputs, attrs=None, what="", tol_scale=1.0):
    attrs = dict(attrs or {})
    ref = cpu.reference(op, feeds, attrs, outputs)
    got = run_device(ort, sess, {cpu.feed_name(k, dtype): v for k, v in feeds.items()},
                     out_specs(op, dtype, outputs, ref))
    compare(op, dtype, got, ref, outputs, what, tol_scale)


def dynamic_shapes(op, present):
    """Graph shapes with symbolic rows/cols, for running many shapes per session."""
    shapes = {}
    for slot in present:
        shapes[slot] = ["rows", "cols"] if slot in ("X", "Skip") else ["cols"]
    return shapes


# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", list(SIGS))
def test_cuda_hidden_sizes_and_rows(ort_ep, op, dtype):
    """All inputs and outputs present; hidden 1..131073 (odd and aligned), rows 0/1/3/large."""
    inputs, outputs = SIGS[op]
    sess = session(ort_ep, cpu.build_model(op, dtype, dynamic_shapes(op, inputs), list(outputs)))
    rng = np.random.default_rng(1000 + len(op) + DTYPES.index(dtype))
    for rows, cols in SHAPES:
        feeds = cpu.make_case(rng, op, dtype, (rows, cols))
        check(ort_ep, sess, op, dtype, feeds, outputs, what=f"rows={rows} cols={cols}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", list(SIGS))
def test_cuda_ranks_and_axes(ort_ep, op, dtype):
    rng = np.random.default_rng(2000 + len(op))
    for shape, axis in cpu.RANK_AXIS + [((4, 6, 2, 96), 2), ((3, 2, 1024), -1), ((2, 1, 8, 40), 1)]:
        feeds = cpu.make_case(rng, op, dtype, shape, axis=axis)
        model = cpu.build_model(op, dtype, {k: list(v.shape) for k, v in feeds.items()}, list(SIGS[op][1]),
                                {"axis": axis})
        check(ort_ep, session(ort_ep, model), op, dtype, feeds, SIGS[op][1], {"axis": axis},
              what=f"shape={shape} axis={axis}")


COMBOS = [(op, ins, outs) for op in SIGS for ins, outs in cpu.optional_combos(op)]


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("op,ins,outs", COMBOS,
                         ids=[f"{op}-in[{','.join(i)}]-out[{','.join(o)}]" for op, i, o in COMBOS])
def test_cuda_optional_inputs_outputs(ort_ep, op, ins, outs, dtype):
    rng = np.random.default_rng(3000 + len(ins) * 10 + len(outs))
    present = [s for s in SIGS[op][0] if s in ("X", "Scale") or s in ins or (op == "SkipLayerNorm" and s == "Skip")]
    sess = session(ort_ep, cpu.build_model(op, dtype, dynamic_shapes(op, present), list(outs)))
    for rows, cols in [(5, 768), (3, 1000), (2, 4096), (1, 7)]:
        feeds = cpu.make_case(rng, op, dtype, (rows, cols), present=ins)
        check(ort_ep, sess, op, dtype, feeds, outs, what=f"rows={rows} cols={cols}")


SKIP_SHAPES = cpu.SKIP_SHAPES + [((8, 128, 768), (128, 768)), ((4, 16, 1024), (1, 16, 1024)), ((64, 4096), (4096,))]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["SkipLayerNorm", "RMSNorm"])
def test_cuda_broadcast_skip(ort_ep, op, dtype):
    rng = np.random.default_rng(4000 + len(op))
    for x_shape, skip_shape in SKIP_SHAPES:
        feeds = cpu.make_case(rng, op, dtype, x_shape, skip_shape=skip_shape)
        model = cpu.build_model(op, dtype, {k: list(v.shape) for k, v in feeds.items()}, list(SIGS[op][1]))
        check(ort_ep, session(ort_ep, model), op, dtype, feeds, SIGS[op][1], what=f"x={x_shape} skip={skip_shape}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", list(SIGS))
def test_cuda_scalar_and_leading_one_params(ort_ep, op, dtype):
    rng = np.random.default_rng(5000 + len(op))
    for cols in (8, 1024, 1000):
        for scale_shape, b_shape in [((1,), (1,)), ((), ()), ((1, 1), (cols,)), ((cols,), (1,)), ((1, cols), (1, 1, cols))]:
            feeds = cpu.make_case(rng, op, dtype, (3, cols), scale_shape=scale_shape, b_shape=b_shape)
            model = cpu.build_model(op, dtype, {k: list(v.shape) for k, v in feeds.items()}, list(SIGS[op][1]))
            check(ort_ep, session(ort_ep, model), op, dtype, feeds, SIGS[op][1],
                  what=f"cols={cols} scale={scale_shape} b={b_shape}")


@pytest.mark.parametrize("op", list(SIGS))
def test_cuda_large_mean_offset(ort_ep, op):
    """Mean of 100 against a spread of 1: a one-pass E[x^2] - E[x]^2 variance fails this."""
    rng = np.random.default_rng(6000 + len(op))
    inputs, outputs = SIGS[op]
    sess = session(ort_ep, cpu.build_model(op, "float32", dynamic_shapes(op, inputs), list(outputs),
                                           {"epsilon": 1e-6}))
    for rows, cols in [(4, 768), (2, 4096), (2, 20000), (3, 1001)]:
        feeds = cpu.make_case(rng, op, "float32", (rows, cols), x_scale=1.0, x_offset=100.0)
        check(ort_ep, sess, op, "float32", feeds, outputs, {"epsilon": 1e-6}, what=f"rows={rows} cols={cols}",
              tol_scale=2.0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", list(SIGS))
def test_cuda_graph_replays(ort_ep, op, dtype):
    """enable_cuda_graph=1: inputs and outputs bound to device OrtValues; each run
    copies new values into the bound inputs and re-poisons the outputs, so a
    replay that ignored them would be caught. ORT captures after its warm-up
    runs; 8 runs cover warm-up, capture and several replays."""
    inputs, outputs = SIGS[op]
    rows, cols = 16, 1024 if dtype != "float32" else 768
    rng = np.random.default_rng(7000 + len(op) + DTYPES.index(dtype))
    feeds = cpu.make_case(rng, op, dtype, (rows, cols))
    model = cpu.build_model(op, dtype, {k: list(v.shape) for k, v in feeds.items()}, list(outputs))
    sess = session(ort_ep, model, cuda_graph=True)
    ref = cpu.reference(op, feeds, {}, outputs)
    specs = out_specs(op, dtype, outputs, ref)

    keep = []
    in_vals = {cpu.feed_name(k, dtype): device_value(ort_ep, v, keep) for k, v in feeds.items()}
    out_vals = {n: device_value(ort_ep, np.full(shape, np.nan, npdt), keep) for n, (shape, npdt) in specs.items()}
    io = sess.io_binding()
    for n, v in in_vals.items():
        io.bind_ortvalue_input(n, v)
    for n, v in out_vals.items():
        io.bind_ortvalue_output(n, v)
    for it in range(8):
        if it > 0:
            feeds = cpu.make_case(rng, op, dtype, (rows, cols))
            for k, v in feeds.items():
                in_vals[cpu.feed_name(k, dtype)].update_inplace(np.ascontiguousarray(v))
            for n, (shape, npdt) in specs.items():
                out_vals[n].update_inplace(np.full(shape, np.nan, npdt))
        sess.run_with_iobinding(io)
        io.synchronize_outputs()
        got = dict(zip(out_vals, (np.array(v.numpy(), copy=True) for v in io.get_outputs())))
        compare(op, dtype, got, cpu.reference(op, feeds, {}, outputs), outputs, what=f"run {it}")


def test_cuda_errors_are_ours_and_survivable(ort_ep):
    rng = np.random.default_rng(8000)
    # Session creation: dtype mismatch on the CUDA EP.
    model = cpu.build_model("SkipLayerNorm", "float16", {"X": [2, 8], "Skip": [2, 8], "Scale": [8]}, ["Y"],
                            in_dtypes={"Skip": "float32"})
    with pytest.raises(Exception) as e:
        session(ort_ep, model)
    assert "SkipLayerNorm: input 'Skip' (index 1) is float32, expected float16 (the dtype of X)" in str(e.value)
    # Run time: Scale that does not match the fed X.
    sess = session(ort_ep, cpu.build_model("LayerNorm", "float16", {"X": ["n", "c"], "Scale": ["k"]}, ["Y"]))
    with pytest.raises(Exception) as e:
        sess.run(None, {"X": cpu.rand(rng, (4, 768), "float16"), "Scale": cpu.rand(rng, (767,), "float16")})
    assert ("LayerNorm: input 'Scale' (index 1) has shape [767], expected the normalized shape [768] of X "
            "(dims [1, 2)) or a single element") in str(e.value)
    # The same session still works afterwards.
    feeds = {"X": cpu.rand(rng, (4, 768), "float16"), "Scale": cpu.rand(rng, (768,), "float16")}
    check(ort_ep, sess, "LayerNorm", "float16", feeds, ["Y"])


def test_cuda_many_sessions_and_threads(ort_ep):
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(9000)
    op, dtype = "SkipLayerNorm", "float16"
    inputs, outputs = SIGS[op]
    model = cpu.build_model(op, dtype, dynamic_shapes(op, inputs), list(outputs))
    sessions = [session(ort_ep, model) for _ in range(4)]
    cases = [cpu.make_case(rng, op, dtype, (r, c)) for r, c in itertools.product((1, 33), (768, 5120))]

    def work(i):
        check(ort_ep, sessions[i % len(sessions)], op, dtype, cases[i % len(cases)], outputs, what=f"job {i}")

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(work, range(32)))
