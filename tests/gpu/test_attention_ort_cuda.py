"""trt_fastops Attention on ONNX Runtime's CUDA execution provider (our CUDA
kernel via launch_attention, present K/V via launch_attention_copy), against
the float64 reference of tests/test_attention_ort_cpu.py.

Every session has session.disable_cpu_ep_fallback = 1 and only the CUDA EP,
so a node cannot silently run on CPU (the bfloat16 Casts run on CUDA too).
Outputs are bound to NaN-filled device buffers. Two tests run under the CUDA
EP's CUDA graphs (enable_cuda_graph=1, IO binding with device OrtValues,
replays with new inputs copied in place and outputs re-poisoned).

The CUDA kernel takes float16 / bfloat16, and the CUDA EP registers Attention
for those Q types only: a float32 node is placed on the CPU EP by ONNX Runtime's
partitioner (test_cuda_float32_runs_on_cpu_ep, test_cuda_float32_needs_cpu_fallback).

Needs onnxruntime-gpu (fixture ort_cuda). TRT_FASTOPS_ORT_TEST_EP=CPUExecutionProvider
runs the same tests on the CPU EP (device buffers become host buffers, no CUDA
graph, the float32 refusal test skips), to check the test itself without a GPU:
    TRT_FASTOPS_ORT_TEST_EP=CPUExecutionProvider python -m pytest --noconftest tests/gpu/test_attention_ort_cuda.py
"""
from __future__ import annotations

import importlib.util
import itertools
import json
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
    "trt_fastops_test_attention_ort_cpu", Path(__file__).resolve().parents[1] / "test_attention_ort_cpu.py")
cpu = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cpu)

from trt_fastops.ort import make_session  # noqa: E402

DTYPES = ["float16", "bfloat16"]
# float32 math on the GPU with 16-bit inputs and (typically) 16-bit softmax
# probabilities in the P @ V product: looser than the CPU op's few ulps.
TOL = {"float16": 4e-3, "bfloat16": 2.5e-2}
ALL_OUTS = ("Y", "present_key", "present_value")
seed_of = cpu.seed_of


@pytest.fixture(scope="module")
def ort_ep(request):
    """onnxruntime with the EP under test (CUDA unless overridden)."""
    if ON_CUDA:
        return request.getfixturevalue("ort_cuda")
    return pytest.importorskip("onnxruntime")


session = common.session


device_value = common.device_value


run_device = common.run_device


def check(ort, dtype, feeds, attrs, outputs=("Y",), *, sess=None, graph_shapes=None, what="", tol_scale=1.0):
    if sess is None:
        sess = session(ort, cpu.model_for(dtype, feeds, attrs, outputs, graph_shapes))
    ref = cpu.reference(feeds, attrs, outputs)
    got = run_device(ort, sess, cpu.graph_feeds(feeds, dtype), cpu.out_specs(dtype, outputs, ref))
    cpu.compare(dtype, got, ref, outputs, what, TOL[dtype] * tol_scale)
    return sess


# ---------------------------------------------------------------------------

# (batch, q_heads, kv_heads, q_len, kv_len, head_dim, v_head_dim): the CPU test's
# configurations plus sizes that cross the kernel's tiles and head-dim buckets.
CONFIGS = cpu.CONFIGS + [
    (2, 8, 8, 128, 128, 64, 64),
    (1, 16, 4, 257, 300, 128, 128),
    (2, 4, 1, 1, 4097, 128, 128),     # decode over a long cache
    (1, 2, 2, 64, 64, 96, 96),
    (1, 4, 2, 70, 33, 80, 48),        # head dims not powers of two
    (1, 2, 1, 100, 100, 256, 256),
    (1, 3, 3, 17, 19, 40, 24),
    (1, 2, 2, 9, 9, 7, 5),            # head dims not multiples of 8 (unaligned rows)
]
CONFIG_IDS = cpu.CONFIG_IDS + ["s128", "gqa257x300", "decode4097", "d96", "d80v48", "d256s100", "d40v24", "d7v5"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rank", [4, 3])
@pytest.mark.parametrize("cfg", CONFIGS, ids=CONFIG_IDS)
def test_cuda_shapes(ort_ep, cfg, rank, dtype):
    b, hq, hkv, sq, skv, d, dv = cfg
    rng = np.random.default_rng(seed_of((cfg, rank, dtype)))
    feeds, attrs = cpu.make_case(rng, dtype, batch=b, q_heads=hq, kv_heads=hkv, q_len=sq, kv_len=skv, head_dim=d,
                                 v_head_dim=dv, rank=rank)
    check(ort_ep, dtype, feeds, attrs)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rank", [4, 3])
@pytest.mark.parametrize("sq,skv,past", [(6, 6, None), (4, 9, None), (9, 4, None), (1, 1, None), (3, 3, 5),
                                         (1, 1, 12), (5, 2, 3), (4, 4, 0), (200, 200, None), (130, 70, None),
                                         (64, 64, 200), (1, 1, 1000)])
def test_cuda_causal(ort_ep, sq, skv, past, rank, dtype):
    rng = np.random.default_rng(sq * 100 + skv * 10 + (past or 0) + rank)
    feeds, attrs = cpu.make_case(rng, dtype, q_len=sq, kv_len=skv, past_len=past, rank=rank, head_dim=64,
                                 attrs={"is_causal": 1})
    outs = ALL_OUTS if past is not None else ("Y",)
    check(ort_ep, dtype, feeds, attrs, outs, what=f"sq={sq} skv={skv} past={past}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["bool", "additive"])
@pytest.mark.parametrize("mask_shape", cpu.MASK_SHAPES, ids=["x".join(map(str, s)) for s in cpu.MASK_SHAPES])
def test_cuda_masks(ort_ep, mask_shape, kind, dtype):
    rng = np.random.default_rng(seed_of((mask_shape, kind, dtype)))
    feeds, attrs = cpu.make_case(rng, dtype, batch=2, q_heads=4, kv_heads=2, q_len=5, kv_len=4, past_len=3,
                                 mask=kind, mask_shape=mask_shape)
    check(ort_ep, dtype, feeds, attrs, ALL_OUTS)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["bool", "additive"])
def test_cuda_masks_long(ort_ep, kind, dtype):
    """Masks over many key tiles, broadcast and short, with and without causal."""
    rng = np.random.default_rng(len(kind) + DTYPES.index(dtype))
    for sq, skv, mask_shape, causal in [(100, 300, (2, 1, 100, 300), 0), (100, 300, (100, 250), 1),
                                        (1, 2000, (2, 8, 1, 2000), 0), (77, 77, (1, 8, 1, 77), 1)]:
        feeds, attrs = cpu.make_case(rng, dtype, batch=2, q_heads=8, kv_heads=2, q_len=sq, kv_len=skv, head_dim=64,
                                     mask=kind, mask_shape=mask_shape, attrs={"is_causal": causal})
        check(ort_ep, dtype, feeds, attrs, what=f"sq={sq} skv={skv} mask={mask_shape} causal={causal}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("softcap,scale", [(2.0, None), (0.5, None), (30.0, 0.3), (None, 0.01), (None, 2.5),
                                           (None, 0.0)])
def test_cuda_softcap_and_scale(ort_ep, softcap, scale, dtype):
    rng = np.random.default_rng(17)
    attrs = {}
    if softcap is not None:
        attrs["softcap"] = softcap
    if scale is not None:
        attrs["scale"] = scale
    for rank, sq, skv in [(4, 5, 7), (3, 5, 7), (4, 100, 150)]:
        feeds, attrs_r = cpu.make_case(rng, dtype, rank=rank, q_len=sq, kv_len=skv, head_dim=64, attrs=attrs,
                                       q_scale=3.0, mask="additive", mask_shape=(sq, skv))
        check(ort_ep, dtype, feeds, attrs_r, what=f"rank {rank} sq={sq} skv={skv}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rank", [4, 3])
@pytest.mark.parametrize("outs", [ALL_OUTS, ("Y",), ("Y", "present_key"), ("Y", "present_value")],
                         ids=["both", "none", "key", "value"])
@pytest.mark.parametrize("heads", [(4, 4), (8, 2), (6, 1)], ids=["mha", "gqa", "mqa"])
def test_cuda_past_and_present(ort_ep, heads, outs, rank, dtype):
    """present = concat(past, new); without the present outputs the concatenation
    goes to scratch from ORT's allocator."""
    hq, hkv = heads
    rng = np.random.default_rng(seed_of((heads, outs, rank, dtype)))
    for sq, skv, past, d, dv in [(1, 1, 9, 64, 64), (4, 4, 6, 64, 32), (3, 5, 0, 128, 128), (2, 3, 1, 8, 8),
                                 (1, 1, 511, 128, 128), (16, 16, 100, 64, 64)]:
        feeds, attrs = cpu.make_case(rng, dtype, q_heads=hq, kv_heads=hkv, q_len=sq, kv_len=skv, past_len=past,
                                     head_dim=d, v_head_dim=dv, rank=rank, mask="bool", mask_shape=(sq, skv + past),
                                     attrs={"is_causal": 1})
        check(ort_ep, dtype, feeds, attrs, outs, what=f"sq={sq} skv={skv} past={past} d={d} dv={dv}")


@pytest.mark.parametrize("rank", [4, 3])
def test_cuda_present_without_past(ort_ep, rank):
    rng = np.random.default_rng(40 + rank)
    feeds, attrs = cpu.make_case(rng, "float16", rank=rank, kv_heads=2, q_heads=4, v_head_dim=6)
    check(ort_ep, "float16", feeds, attrs, ALL_OUTS)


@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_fully_masked_rows_are_zero(ort_ep, dtype):
    rng = np.random.default_rng(5)
    feeds, attrs = cpu.make_case(rng, dtype, mask="bool", mask_shape=(5, 7))
    feeds["attn_mask"][1] = False
    feeds["attn_mask"][3] = False
    check(ort_ep, dtype, feeds, attrs)
    feeds, attrs = cpu.make_case(rng, dtype, mask="additive", mask_shape=(1, 1, 5, 7))
    feeds["attn_mask"][..., 2, :] = -np.inf
    check(ort_ep, dtype, feeds, attrs)
    feeds, attrs = cpu.make_case(rng, dtype, mask="bool", mask_shape=(5, 0))
    check(ort_ep, dtype, feeds, attrs)
    feeds, attrs = cpu.make_case(rng, dtype, q_len=70, kv_len=300, head_dim=64, mask="bool",
                                 mask_shape=(2, 1, 70, 300))
    feeds["attn_mask"][:, :, ::3] = False  # every third query row of every batch sees nothing
    check(ort_ep, dtype, feeds, attrs)


@pytest.mark.parametrize("rank", [4, 3])
@pytest.mark.parametrize("sizes", [dict(batch=0), dict(q_len=0), dict(kv_len=0), dict(kv_len=0, past_len=0),
                                   dict(kv_len=0, past_len=3)], ids=["b0", "sq0", "skv0", "total0", "skv0past3"])
def test_cuda_empty(ort_ep, sizes, rank):
    rng = np.random.default_rng(6)
    feeds, attrs = cpu.make_case(rng, "float16", rank=rank, **sizes)
    outs = ALL_OUTS if "past_len" in sizes else ("Y",)
    check(ort_ep, "float16", feeds, attrs, outs)


@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_dynamic_shapes_one_session(ort_ep, dtype):
    rng = np.random.default_rng(7)
    shapes = {"Q": ["b", 8, "sq", 64], "K": ["b", 2, "skv", 64], "V": ["b", 2, "skv", 64],
              "attn_mask": ["sq", "t"], "past_key": ["b", 2, "p", 64], "past_value": ["b", 2, "p", 64]}
    probe, attrs = cpu.make_case(rng, dtype, q_heads=8, head_dim=64, past_len=2, mask="bool", mask_shape=(5, 9),
                                 attrs={"is_causal": 1})
    sess = session(ort_ep, cpu.model_for(dtype, probe, attrs, ALL_OUTS, graph_shapes=shapes))
    for b, sq, skv, p in [(1, 1, 1, 8), (2, 5, 5, 0), (3, 2, 7, 4), (1, 16, 16, 16), (2, 128, 128, 0),
                          (1, 1, 1, 2047), (4, 33, 33, 95)]:
        feeds, _ = cpu.make_case(rng, dtype, batch=b, q_heads=8, head_dim=64, q_len=sq, kv_len=skv, past_len=p,
                                 mask="bool", mask_shape=(sq, skv + p), attrs={"is_causal": 1})
        check(ort_ep, dtype, feeds, attrs, ALL_OUTS, sess=sess, what=f"b={b} sq={sq} skv={skv} p={p}")


def _graph_replays(ort_ep, dtype, outs, rng, *, batch=2, q_heads=8, kv_heads=2, past=63, head_dim=64, case=None):
    """One decode step (q_len = kv_len = 1 over a fixed past; or make_case's `case`) captured
    as a CUDA graph and replayed: inputs copied into the bound device values in place, outputs
    re-poisoned each run, so a replay that ignored either would be caught. ORT
    captures after its warm-up runs; 8 runs cover warm-up, capture and replays."""
    kw = case or dict(batch=batch, q_heads=q_heads, kv_heads=kv_heads, q_len=1, kv_len=1, past_len=past,
                      head_dim=head_dim, mask="bool", mask_shape=(batch, 1, 1, past + 1), attrs={"is_causal": 1})
    feeds, attrs = cpu.make_case(rng, dtype, **kw)
    sess = session(ort_ep, cpu.model_for(dtype, feeds, attrs, outs), cuda_graph=True)
    ref = cpu.reference(feeds, attrs, outs)
    specs = cpu.out_specs(dtype, outs, ref)
    keep = []
    gfeeds = cpu.graph_feeds(feeds, dtype)
    in_vals = {n: device_value(ort_ep, v, keep) for n, v in gfeeds.items()}
    out_vals = {n: device_value(ort_ep, np.full(shape, np.nan, npdt), keep) for n, (shape, npdt) in specs.items()}
    io = sess.io_binding()
    for n, v in in_vals.items():
        io.bind_ortvalue_input(n, v)
    for n, v in out_vals.items():
        io.bind_ortvalue_output(n, v)
    for it in range(8):
        if it > 0:
            feeds, _ = cpu.make_case(rng, dtype, **kw)
            for n, v in cpu.graph_feeds(feeds, dtype).items():
                in_vals[n].update_inplace(np.ascontiguousarray(v))
            for n, (shape, npdt) in specs.items():
                out_vals[n].update_inplace(np.full(shape, np.nan, npdt))
        sess.run_with_iobinding(io)
        io.synchronize_outputs()
        got = dict(zip(out_vals, (np.array(v.numpy(), copy=True) for v in io.get_outputs())))
        cpu.compare(dtype, got, cpu.reference(feeds, attrs, outs), outs, f"run {it}", TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_graph_replays(ort_ep, dtype):
    """enable_cuda_graph=1 with present_key / present_value outputs (the usual decode step)."""
    _graph_replays(ort_ep, dtype, ALL_OUTS, np.random.default_rng(70 + DTYPES.index(dtype)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_graph_replays_scratch(ort_ep, dtype):
    """enable_cuda_graph=1 with past but no present outputs: the concatenated K/V lives
    in scratch from ORT's allocator, allocated inside the captured run."""
    _graph_replays(ort_ep, dtype, ("Y",), np.random.default_rng(80 + DTYPES.index(dtype)), past=200)


# Causal with more than 32 query blocks a head (34 here): the kernel draws its tiles from a
# counter in the launcher's workspace, which the op takes from ORT's allocator on every run.
LONG_CAUSAL = dict(batch=1, q_heads=2, kv_heads=1, q_len=4300, kv_len=4300, head_dim=128, attrs={"is_causal": 1})


@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_causal_long_draws_tiles(ort_ep, dtype):
    rng = np.random.default_rng(90 + DTYPES.index(dtype))
    feeds, attrs = cpu.make_case(rng, dtype, **LONG_CAUSAL)
    check(ort_ep, dtype, feeds, attrs)


def test_cuda_graph_replays_draw_tiles(ort_ep):
    """enable_cuda_graph=1 with drawn tiles: every replay zeroes the counter (a captured memset)."""
    _graph_replays(ort_ep, "float16", ("Y",), np.random.default_rng(95), case=dict(LONG_CAUSAL, q_heads=1))


def run_profiled(ort, dtype, feeds, attrs, outs, providers, prefix):
    """Runs the model of a case once with ORT's profiler on (outputs bound to NaN-filled
    DEVICE buffers, as run_device does) and checks it against the reference. Returns
    the execution providers its Attention node ran on, from the profile's node events."""
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.enable_profiling = True
    so.profile_file_prefix = prefix
    sess = make_session(cpu.model_for(dtype, feeds, attrs, outs), providers, session_options=so)
    ref = cpu.reference(feeds, attrs, outs)
    got = run_device(ort, sess, cpu.graph_feeds(feeds, dtype), cpu.out_specs(dtype, outs, ref))
    path = Path(sess.end_profiling())
    events = json.loads(path.read_text())
    path.unlink()
    tol = cpu.TOL["float32"] if dtype == "float32" else TOL[dtype]
    cpu.compare(dtype, got, ref, outs, f"on {providers}", tol)
    return {e["args"]["provider"] for e in events
            if e.get("cat") == "Node" and e.get("args", {}).get("op_name") == "Attention" and "provider" in e["args"]}


@pytest.mark.parametrize("outs", [("Y",), ALL_OUTS], ids=["y", "present"])
def test_cuda_float32_runs_on_cpu_ep(ort_ep, outs, tmp_path):
    """The CUDA EP registers Attention for float16 / bfloat16 Q only, so with
    providers [CUDA, CPU] ONNX Runtime places a float32 node on the CPU EP (our CPU
    op) instead of failing at session creation; float16 / bfloat16 stay on CUDA."""
    rng = np.random.default_rng(90)
    kw = dict(past_len=3, mask="bool", mask_shape=(5, 10)) if outs == ALL_OUTS else {}
    providers = (EP, "CPUExecutionProvider") if ON_CUDA else (EP,)
    for dtype, where in [("float32", "CPUExecutionProvider"), ("float16", EP), ("bfloat16", EP)]:
        feeds, attrs = cpu.make_case(rng, dtype, **kw)
        used = run_profiled(ort_ep, dtype, feeds, attrs, outs, providers, str(tmp_path / dtype))
        assert used == {where}, (dtype, used)


def test_cuda_float32_needs_cpu_fallback(ort_ep):
    """With session.disable_cpu_ep_fallback = 1 (CUDA EP only) a float32 Attention
    model is refused by ONNX Runtime (its node can only run on the CPU EP); float16
    and bfloat16 models are accepted (every other test here runs that way)."""
    if not ON_CUDA:
        pytest.skip("CPU fallback is specific to the CUDA EP")
    rng = np.random.default_rng(93)
    feeds, attrs = cpu.make_case(rng, "float32")
    with pytest.raises(Exception) as e:
        session(ort_ep, cpu.model_for("float32", feeds, attrs))
    assert "fallback to CPU EP has been explicitly disabled" in str(e.value), str(e.value)
    for dtype in DTYPES:
        feeds, attrs = cpu.make_case(rng, dtype)
        check(ort_ep, dtype, feeds, attrs, what=f"{dtype} without CPU fallback")


def test_cuda_errors_are_ours_and_survivable(ort_ep):
    rng = np.random.default_rng(91)
    # Session creation: dtype mismatch on the CUDA EP.
    model = cpu.build_model("float16", {"Q": [2, 4, 5, 8], "K": [2, 2, 7, 8], "V": [2, 2, 7, 8]}, ("Y",),
                            in_dtypes={"K": "float32"})
    with pytest.raises(Exception) as e:
        session(ort_ep, model)
    assert "Attention: input 'K' (index 1) is float32, expected float16 (the dtype of Q)" in str(e.value)
    # Run time: V's sequence length does not match K's.
    shapes = {"Q": ["b", 4, "sq", 8], "K": ["b", 2, "skv", 8], "V": ["b", 2, "skv2", 8]}
    feeds, attrs = cpu.make_case(rng, "float16")
    sess = session(ort_ep, cpu.model_for("float16", feeds, attrs, graph_shapes=shapes))
    bad = dict(feeds)
    bad["V"] = cpu.rand(rng, (2, 2, 6, 8), "float16")
    with pytest.raises(Exception) as e:
        sess.run(None, bad)
    assert "Attention: input 'V' (index 2) has shape [2, 2, 6, 8]: its dim 2 (kv_seq) is 6, expected 7" in str(e.value)
    # The same session still works afterwards.
    check(ort_ep, "float16", feeds, attrs, sess=sess)


def test_cuda_many_sessions_and_threads(ort_ep):
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(92)
    dtype = "float16"
    shapes = {"Q": ["b", 8, "sq", 64], "K": ["b", 2, "skv", 64], "V": ["b", 2, "skv", 64],
              "past_key": ["b", 2, "p", 64], "past_value": ["b", 2, "p", 64]}
    probe, attrs = cpu.make_case(rng, dtype, q_heads=8, head_dim=64, past_len=3, attrs={"is_causal": 1})
    model = cpu.model_for(dtype, probe, attrs, ALL_OUTS, graph_shapes=shapes)
    sessions = [session(ort_ep, model) for _ in range(4)]
    cases = [cpu.make_case(rng, dtype, batch=b, q_heads=8, head_dim=64, q_len=s, kv_len=s, past_len=p,
                           attrs={"is_causal": 1})[0]
             for b, s, p in itertools.product((1, 3), (1, 40), (0, 100))]

    def work(i):
        check(ort_ep, dtype, cases[i % len(cases)], attrs, ALL_OUTS, sess=sessions[i % len(sessions)], what=f"job {i}")

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(work, range(32)))


# ---------------------------------------------------------------------------
# packed_qkv = 1: Q [B, S, (Hq + 2 * Hkv) * D] holds Q, K and V (one MatMul with
# the three weights concatenated along N), K and V omitted; the kernels read K
# and V through Q's row stride, with no split copies.

# (batch, q_heads, kv_heads, seq, head_dim, mask, causal)
PACKED_CONFIGS = [
    (2, 12, 12, 128, 64, "padding", 0),  # BERT-base, key-padding mask
    (2, 12, 12, 128, 64, None, 0),       # BERT-base, no mask
    (2, 8, 2, 100, 128, None, 1),        # GQA, causal, d128
    (1, 4, 1, 257, 64, "padding", 1),    # MQA, several key tiles
    (2, 4, 4, 33, 256, "padding", 0),    # d256 key padding (the ws tile's key-row build)
    (1, 4, 2, 17, 40, "padding", 0),     # head dim not a power of two
    (2, 2, 2, 9, 7, None, 1),            # head dim 7: unaligned rows (element loads)
]
PACKED_IDS = ["bert_padding", "bert", "gqa_causal_d128", "mqa_causal_s257", "d256", "d40", "d7"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cfg", PACKED_CONFIGS, ids=PACKED_IDS)
def test_cuda_packed_qkv(ort_ep, cfg, dtype):
    """Packed Q against the float64 reference, and against the equivalent
    unpacked 3-D node (separate K / V buffers) on the same EP."""
    b, hq, hkv, s, d, mask, causal = cfg
    rng = np.random.default_rng(seed_of((cfg, dtype, "packed")))
    (feeds, attrs), (pfeeds, pattrs) = cpu.packed_case(rng, dtype, q_heads=hq, kv_heads=hkv, seq=s, head_dim=d,
                                                       batch=b, mask=mask, causal=bool(causal))
    assert pfeeds["Q"].shape == (b, s, (hq + 2 * hkv) * d)
    ref = cpu.reference(feeds, attrs)
    specs = cpu.out_specs(dtype, ("Y",), ref)
    got = run_device(ort_ep, session(ort_ep, cpu.model_for(dtype, pfeeds, pattrs)), cpu.graph_feeds(pfeeds, dtype),
                     specs)
    cpu.compare(dtype, got, ref, ("Y",), f"packed {cfg}", TOL[dtype])
    want = run_device(ort_ep, session(ort_ep, cpu.model_for(dtype, feeds, attrs)), cpu.graph_feeds(feeds, dtype), specs)
    y = cpu.out_name("Y", dtype)
    np.testing.assert_allclose(got[y], want[y], rtol=TOL[dtype], atol=TOL[dtype], err_msg="packed vs unpacked")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("outs", [ALL_OUTS, ("Y",)], ids=["present", "scratch"])
def test_cuda_packed_qkv_past_and_present(ort_ep, outs, dtype):
    """Decode / chunked-prefill steps with packed Q: present = concat(past, the
    packed K / V parts), copied by launch_attention_copy from their strided views."""
    rng = np.random.default_rng(seed_of((outs, dtype, "packed past")))
    for seq, past in [(1, 63), (16, 100), (5, 0)]:
        (feeds, attrs), (pfeeds, pattrs) = cpu.packed_case(rng, dtype, q_heads=8, kv_heads=2, seq=seq, head_dim=64,
                                                           past_len=past, mask="padding", causal=True)
        ref = cpu.reference(feeds, attrs, outs)
        got = run_device(ort_ep, session(ort_ep, cpu.model_for(dtype, pfeeds, pattrs, outs)),
                         cpu.graph_feeds(pfeeds, dtype), cpu.out_specs(dtype, outs, ref))
        cpu.compare(dtype, got, ref, outs, f"packed seq={seq} past={past}", TOL[dtype])


def test_cuda_packed_qkv_keeps_the_kernel(ort_ep):
    """Packing changes only the views: for BERT-base (B=2, S=128, 12 heads, D=64,
    float16) the dry-run kernel choice on Q / K / V views into one packed buffer
    is the one for separate buffers (tensor maps encode the packed row stride),
    never the unaligned variant, and the warp-specialised TMA kernel on an H100
    with an sm_90a build."""
    if not ON_CUDA:
        pytest.skip("kernel choice is a CUDA question")
    from trt_fastops import _C

    b, s, h, d = 2, 128, 12, 64
    width = 3 * h * d
    keep = [ort_ep.OrtValue.ortvalue_from_shape_and_type([n], np.float16, "cuda", 0)
            for n in (b * s * width, b * s * h * d, b * s * h * d, b * s * h * d, b * s * h * d)]
    packed, q, k, v, out = (x.data_ptr() for x in keep)
    mask = ort_ep.OrtValue.ortvalue_from_shape_and_type([b * s], np.float16, "cuda", 0)
    hd_bytes = h * d * 2
    packed_view, plain_view = (s * width, d, width), (s * h * d, d, h * d)
    hopper = (any(dev["capability"] == "9.0" for dev in _C.devices()[:1])
              and "90a" in _C.build_info()["cuda_archs"])
    for masked in (False, True):
        kw = dict(mask_kind="additive", mask_dtype="float16", mask=mask.data_ptr(), mask_strides=(s, 0, 0, 1),
                  mask_kv_len=s) if masked else {}

        def name(ptrs, view):
            return _C.attention_forward("float16", *ptrs, out, b, h, h, s, s, d, d, q_strides=view, k_strides=view,
                                        v_strides=view, out_strides=plain_view, scale=0.125, dry_run=True, **kw)

        got = name((packed, packed + hd_bytes, packed + 2 * hd_bytes), packed_view)
        want = name((q, k, v), plain_view)
        assert got == want and "unaligned" not in got and got != "unsupported", (masked, got, want)
        if hopper and not masked:
            assert got.startswith("flash_fwd_ws"), got
