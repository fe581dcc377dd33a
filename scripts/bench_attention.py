#!/usr/bin/env python3
"""Attention forward benchmark: our flash kernel against the baselines of the same run.

Cases (FlashAttention-3 paper's setting): batch * seqlen = 16k tokens, hidden 2048
(16 heads of 128 or 32 heads of 64), self-attention Sq = Skv = seqlen in
512 ... 16k, causal or not, float16 and bfloat16. TFLOP/s = 4 * B * H * Sq * Skv * D,
halved for causal.

Baselines, each timed in this run on the same inputs:
  flash / cudnn / efficient  torch.nn.functional.scaled_dot_product_attention with that
                             backend selected explicitly (torch.nn.attention.sdpa_kernel)
  ort_mha                    ONNX Runtime's com.microsoft MultiHeadAttention on the CUDA EP
                             (IO binding on torch buffers), where onnxruntime-gpu runs
  fa3                        with --fa3 LIB: FlashAttention-3's Hopper forward itself, built
                             from its sources by scripts/build_fa3.sh (unmasked cases)
Also recorded: the dense-GEMM rate of the device (torch.matmul 8192^3 bf16), the ceiling
for any attention kernel.

Timing: after warm-up, the average of `reps` back-to-back calls between two CUDA events
(kernels here take 0.1-10 ms, so launch overhead is noise); median of `trials` such runs.
Ours and the baselines are timed interleaved: each trial times every one of them once, in an
order rotated from trial to trial, so a drift of the machine (clocks, temperature) lands on all
of them alike. Each timed block comes after `settle_ms` of untimed back-to-back calls of the same
callable: the H100 and H200 run these kernels power-bound, and their clocks take 100-150 ms to settle
after a change of kernel (a kernel after a lighter one runs up to 10 % fast for ~50 ms, then
overshoots), so without it a block's time depends on what ran before it
(bench/NOTES-attention-log.md item 50). 250 ms was not enough where hot kernels (cuDNN, ORT's
cuDNN-based MultiHeadAttention, FlashAttention-3) ran before ours: with the ORT column in the
rotation ours read 2.2 % slower (geomean, up to 6 % a case) than without it on the same machine,
torch flash level; at 1000 ms the two read alike (0.4 %; item 109), so that is the default. Every
backend's output is checked against ours before it is timed. The sm80 kernel and the tile sweep are
timed on their own, after.

A full run with ORT and FA3 then takes ~16 minutes; to stay within a 10-minute job, run it in parts
and merge them (disjoint cases; the same GPU, timing method and software versions; each row keeps
the GEMM rate its own part measured):

    python scripts/bench_attention.py                      # full table -> bench/results/attention.json
    python scripts/bench_attention.py --dtypes float16 --out /tmp/fp16.json
    python scripts/bench_attention.py --dtypes bfloat16 --out /tmp/bf16.json
    python scripts/bench_attention.py --merge /tmp/fp16.json /tmp/bf16.json   # -> bench/results/attention.json
    python scripts/bench_attention.py --seqlens 1024 4096 --dims 128 --dtypes float16
    # issue 7's bars of saved runs (no GPU): each run's, and with several files their per-case
    # medians and the cases below a bar in every run that timed them
    python scripts/bench_attention.py --bars bench/results/attention.json OLDER.json
    # BERT-base with a key-padding mask ([B, 1, 1, S]; sequence 0 padded from S/2, the rest all
    # live), also timed without the mask; the baselines get the same mask (ORT: key lengths):
    python scripts/bench_attention.py --seqlens 512 --dims 64 --dtypes float16 --causal no \
        --batch 32 --heads 12 --key-padding additive --out bench/results/attention_bert_mask.json
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import re
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # the installed trt_fastops wins

from scripts._bench_common import attention_kernel_name, driver_version, gpu_setup, write_results  # noqa: E402

TOKENS = 16384
HIDDEN = 2048
BACKENDS = ("flash", "cudnn", "efficient")

# Issue 7's bars (Hopper attention at FlashAttention-3 speed), on the unmasked d64 / d128 cases:
# ratios to torch's backends timed in the same run, rates at seqlen >= 4k. The cuDNN bar holds from
# seqlen 1k; the flash bar is counted over every case and from 1k, as the issue can be read either way.
FLASH_BAR = 1.6
CUDNN_BAR = 1.0
RATIO_FROM = 1024
RATE_BARS = ((128, False, 550.0), (128, True, 450.0), (64, False, 400.0))  # (d, causal, TFLOP/s)
RATE_FROM = 4096


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seqlens", type=int, nargs="+", default=[512, 1024, 2048, 4096, 8192, 16384])
    ap.add_argument("--dims", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--dtypes", nargs="+", default=["float16", "bfloat16"])
    ap.add_argument("--causal", choices=("both", "yes", "no"), default="both")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--settle-ms", type=float, default=1000.0, metavar="MS",
                    help="untimed back-to-back calls of each callable for this long right before each of its "
                         "timed blocks, so each is timed at its own steady clocks (250: results from 2026-11-27 "
                         "14:30 to 2026-11-29; 0: each block right after the previous callable's, the burst "
                         "timing of results before that)")
    ap.add_argument("--no-ort", action="store_true", help="skip ONNX Runtime")
    ap.add_argument("--fa3", type=Path, default=None, metavar="LIB",
                    help="also time FlashAttention-3 (libfa3_bench.so from scripts/build_fa3.sh)")
    ap.add_argument("--batch", type=int, default=0, help="batch size (default: 16k tokens / seqlen)")
    ap.add_argument("--heads", type=int, default=0, help="heads (default: hidden 2048 / head dim)")
    ap.add_argument("--key-padding", choices=("none", "additive", "bool"), default="none",
                    help="a [B, 1, 1, S] key-padding mask: sequence 0 padded from S/2 (-10000 or False), the "
                         "others all live; TFLOP/s stay those of the unmasked problem")
    ap.add_argument("--tile-sweep", type=int, default=0, metavar="N",
                    help="also time our tile variants 1..N-1 (_C.attention_set_tile_variant) per case")
    ap.add_argument("--out", type=Path, default=Path("bench/results/attention.json"))
    ap.add_argument("--bars", type=Path, nargs="+", default=None, metavar="JSON",
                    help="no timing: print issue 7's bars for these saved results (with several, also per-case "
                         "medians over them and the cases below a bar in every run that timed them)")
    ap.add_argument("--merge", type=Path, nargs="+", default=None, metavar="JSON",
                    help="no timing: combine saved runs of disjoint cases (same GPU, timing method and versions) into "
                         "--out, e.g. a full run made in parts by --dtypes / --dims")
    return ap


def method(args) -> str:
    """How the results were timed, for the results file."""
    settle = (f", each block after {args.settle_ms:g} ms of untimed back-to-back calls of the same callable"
              if args.settle_ms > 0 else "")
    return (f"mean of {args.reps} back-to-back calls between CUDA events, median of {args.trials} trials, ours and "
            f"the baselines interleaved (each trial times each once, the order rotated{settle}); "
            "flops = 4*B*H*S*S*D (halved for causal)")


def plan(args) -> list[dict]:
    cases = []
    causal_opts = {"both": (False, True), "yes": (True,), "no": (False,)}[args.causal]
    for dtype in args.dtypes:
        for d in args.dims:
            for causal in causal_opts:
                for s in args.seqlens:
                    b, h = args.batch or max(1, TOKENS // s), args.heads or HIDDEN // d
                    flops = 4 * b * h * s * s * d // (2 if causal else 1)
                    cases.append(dict(dtype=dtype, d=d, causal=causal, seqlen=s, batch=b, heads=h, flops=flops,
                                      key_padding=args.key_padding))
    return cases


def time_fn(torch, fn, reps: int, trials: int, settle_ms: float = 0.0) -> float:
    """Median over trials of the mean time (us) of `reps` back-to-back calls."""
    return time_interleaved(torch, {"fn": fn}, reps, trials, settle_ms)["fn"]


SETTLE_CHUNK = 4  # calls queued between the host's looks at the clock while settling


def settle(torch, fn, ms: float, host_clock=time.perf_counter) -> None:
    """Back-to-back untimed calls of fn until `ms` have passed (at least one chunk), then synchronise."""
    t0 = host_clock()
    while True:
        for _ in range(SETTLE_CHUNK):
            fn()
        torch.cuda.synchronize()
        if (host_clock() - t0) * 1e3 >= ms:
            return


def time_interleaved(torch, fns: dict, reps: int, trials: int, settle_ms: float = 0.0,
                     host_clock=time.perf_counter) -> dict:
    """{name: median over trials of the mean time (us) of `reps` back-to-back calls}, after 3
    warm-up calls each. Trial t times each callable once, the order rotated by t, so no callable
    always opens a trial. settle_ms > 0: that long of untimed calls of the callable itself right
    before each timed block, so each is timed at the clocks its own power draw settles to, not
    on the heels of its predecessor (rotation keeps a fixed cyclic order, so each callable's
    predecessor is always the same one; item 50 of bench/NOTES-attention-log.md)."""
    for fn in fns.values():
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    names = list(fns)
    results = {n: [] for n in names}
    last = None
    for trial in range(trials):
        k = trial % len(names)
        for n in names[k:] + names[:k]:
            if settle_ms > 0 and n != last:  # a callable right after its own block is settled already
                settle(torch, fns[n], settle_ms, host_clock)
            last = n
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(reps):
                fns[n]()
            e.record()
            torch.cuda.synchronize()
            results[n].append(s.elapsed_time(e) * 1e3 / reps)
    return {n: statistics.median(v) for n, v in results.items()}


def max_diff(torch, a, b) -> float:
    return (a.float() - b.float()).abs().max().item()


def run_checked(torch, fn, got, want, tol: float = 0.05) -> None:
    """Runs fn once; raises unless its output `got` matches ours (`want`) within tol."""
    fn()
    torch.cuda.synchronize()
    diff = max_diff(torch, got, want)
    if not diff <= tol:
        raise RuntimeError(f"differs from ours by {diff:.3g}")


def gemm_tflops(torch, reps: int, trials: int, settle_ms: float = 0.0) -> float:
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    us = time_fn(torch, lambda: torch.matmul(a, b, out=c), reps, trials, settle_ms)
    return 2 * n ** 3 / us / 1e6


# ---------------------------------------------------------------------------------------
# ONNX Runtime com.microsoft.MultiHeadAttention (3-D BSNH inputs, unidirectional = causal)


def ort_mha(ort, torch, case, q3, k3, v3, out3, stream_ptr, device_index, key_lengths=None):
    """Returns (callable, note) or (None, why). key_lengths: int32 [B] live keys per sequence
    (MultiHeadAttention's key_padding_mask in its lengths form), for the key-padding cases."""
    import onnx
    from onnx import TensorProto, helper

    et = {"float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16}[case["dtype"]]
    shape = list(q3.shape)
    inputs = ["Q", "K", "V"] + (["", "M"] if key_lengths is not None else [])
    node = helper.make_node("MultiHeadAttention", inputs, ["Y"], domain="com.microsoft",
                            num_heads=case["heads"], unidirectional=1 if case["causal"] else 0)
    graph_inputs = [helper.make_tensor_value_info(n, et, shape) for n in "QKV"]
    if key_lengths is not None:
        graph_inputs.append(helper.make_tensor_value_info("M", TensorProto.INT32, [shape[0]]))
    graph = helper.make_graph([node], "mha", graph_inputs, [helper.make_tensor_value_info("Y", et, shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 10
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    prov = {"device_id": str(device_index), "user_compute_stream": str(stream_ptr)}
    try:
        sess = ort.InferenceSession(model.SerializeToString(), so, providers=[("CUDAExecutionProvider", prov)])
    except Exception as e:  # noqa: BLE001 - reported as the reason
        return None, f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
    io = sess.io_binding()
    ort_et = {"float16": 10, "bfloat16": 16}[case["dtype"]]
    for name, t in zip("QKV", (q3, k3, v3)):
        io.bind_input(name, "cuda", device_index, ort_et, shape, t.data_ptr())
    if key_lengths is not None:
        io.bind_input("M", "cuda", device_index, 6, [shape[0]], key_lengths.data_ptr())  # 6: int32
    io.bind_output("Y", "cuda", device_index, ort_et, shape, out3.data_ptr())
    ro = ort.RunOptions()
    ro.add_run_config_entry("disable_synchronize_execution_providers", "1")
    del onnx
    return (lambda: sess.run_with_iobinding(io, ro)), "com.microsoft.MultiHeadAttention, IO binding"


# ---------------------------------------------------------------------------------------


def fa3_commit(path: Path | None) -> str | None:
    """The FlashAttention-3 commit build_fa3.sh built LIB from (FA3_COMMIT beside it)."""
    if path is None:
        return None
    stamp = Path(path).parent / "FA3_COMMIT"
    return stamp.read_text().strip() if stamp.exists() else "unknown"


def load_fa3(path: Path):
    """FlashAttention-3's forward behind bench/fa3/fa3_harness.cu's C entry point."""
    import ctypes

    lib = ctypes.CDLL(str(path))
    lib.fa3_fwd.restype = ctypes.c_int
    lib.fa3_fwd.argtypes = [ctypes.c_void_p] * 6 + [ctypes.c_int] * 9 + [ctypes.c_void_p]
    return lib


def fa3_fn(torch, lib, case, q3, k3, v3, out3, device_index):
    """A callable running FlashAttention-3 on the [B, S, H * D] inputs into out3."""
    b, h, s, d = case["batch"], case["heads"], case["seqlen"], case["d"]
    lse = torch.empty(b, h, s, device="cuda", dtype=torch.float32)
    semaphore = torch.zeros(1, device="cuda", dtype=torch.int32)
    sms = torch.cuda.get_device_properties(device_index).multi_processor_count
    bf16 = int(q3.dtype == torch.bfloat16)

    def fn():
        err = lib.fa3_fwd(q3.data_ptr(), k3.data_ptr(), v3.data_ptr(), out3.data_ptr(), lse.data_ptr(),
                          semaphore.data_ptr(), b, s, s, h, h, d, bf16, int(case["causal"]), sms,
                          torch.cuda.current_stream().cuda_stream)
        if err != 0:
            raise RuntimeError(f"fa3_fwd: CUDA error {err}")

    return fn


def run_case(torch, _C, ort, case, args, stream_ptr, device_index, fa3=None) -> dict:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from trt_fastops import ops

    dt = getattr(torch, case["dtype"])
    b, h, s, d = case["batch"], case["heads"], case["seqlen"], case["d"]
    g = torch.Generator(device="cuda").manual_seed(0)
    # [B, S, H, D] storage (what a fused QKV projection produces), viewed as [B, H, S, D].
    q3, k3, v3 = (torch.randn(b, s, h * d, device="cuda", generator=g).to(dt) for _ in range(3))
    q, k, v = (t.view(b, s, h, d).transpose(1, 2) for t in (q3, k3, v3))
    out3 = torch.empty_like(q3)
    out = out3.view(b, s, h, d).transpose(1, 2)
    causal = case["causal"]
    padding = case.get("key_padding", "none")
    mask, mask_kw, key_lengths = None, {}, None
    if padding != "none":
        # BERT-style: sequence 0 padded from s / 2, the others all live.
        dead = torch.zeros(b, 1, 1, s, dtype=torch.bool, device="cuda")
        dead[0, ..., s // 2:] = True
        mask = ~dead if padding == "bool" else torch.zeros(b, 1, 1, s, dtype=dt, device="cuda").masked_fill(
            dead, -10000.0)
        mask_kw = dict(mask_kind="bool" if padding == "bool" else "additive", mask_dtype=case["dtype"],
                       mask=mask.data_ptr(), mask_strides=(s, 0, 0, 1), mask_kv_len=s)
        key_lengths = torch.full((b,), s, dtype=torch.int32, device="cuda")
        key_lengths[0] = s // 2

    def ours():
        ops.attention(q, k, v, causal=causal, out=out, mask=mask)

    ours()
    torch.cuda.synchronize()
    mine = out.clone()
    mine3 = mine.transpose(1, 2).reshape(b, s, h * d)  # ours in ORT's and FA3's [B, S, H * D] layout
    row = dict(case)

    def kernel_name():
        """The kernel ours() launches under the current path / tile variant (launches nothing)."""
        return attention_kernel_name(_C, case["dtype"], q, k, v, out, scale=d ** -0.5, causal=causal, **mask_kw)

    row["ours_kernel"] = kernel_name()
    # What is timed interleaved (time_interleaved): ours, the unmasked problem, the baselines.
    timed = {"ours": ours}
    if mask is not None:
        # The same problem without the mask (what the masked kernel should approach; `mine` keeps
        # the masked output for the comparisons below).
        timed["ours_unmasked"] = lambda: ops.attention(q, k, v, causal=causal, out=out)

    backend_enum = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
                    "efficient": SDPBackend.EFFICIENT_ATTENTION}
    for name in BACKENDS:
        def fn(backend=backend_enum[name]):
            with sdpa_kernel([backend]):
                return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)

        try:
            ref = fn()
            torch.cuda.synchronize()
            diff = max_diff(torch, ref, mine)
            del ref
            if not diff <= 0.05:
                raise RuntimeError(f"differs from ours by {diff:.3g}")
            timed[name] = fn
        except Exception as e:  # noqa: BLE001 - a backend that cannot run this case is reported
            row[f"{name}_us"] = None
            row[f"{name}_note"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"

    row["ort_us"] = None
    if ort is None:
        row["ort_note"] = "onnxruntime-gpu not importable"
    else:
        ort_out = torch.empty_like(q3)
        ort_fn, note = ort_mha(ort, torch, case, q3, k3, v3, ort_out, stream_ptr, device_index, key_lengths)
        row["ort_note"] = note
        if ort_fn is not None:
            try:
                run_checked(torch, ort_fn, ort_out, mine3)
                timed["ort"] = ort_fn
            except Exception as e:  # noqa: BLE001
                row["ort_note"] = f"{note}; {type(e).__name__}: {str(e).splitlines()[0][:160]}"

    if fa3 is not None:
        if mask is not None:
            row["fa3_us"], row["fa3_note"] = None, "masked case: not run"
        else:
            fa3_out = torch.empty_like(q3)
            try:
                fn = fa3_fn(torch, fa3, case, q3, k3, v3, fa3_out, device_index)
                run_checked(torch, fn, fa3_out, mine3)
                timed["fa3"] = fn
            except Exception as e:  # noqa: BLE001
                row["fa3_us"], row["fa3_note"] = None, f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"

    times = time_interleaved(torch, timed, args.reps, args.trials, args.settle_ms)
    us = times.pop("ours")
    row["ours_us"] = round(us, 1)
    row["ours_tflops"] = round(case["flops"] / us / 1e6, 1)
    if "ours_unmasked" in times:
        row["ours_unmasked_us"] = round(times.pop("ours_unmasked"), 1)
    for name, t in times.items():
        row[f"{name}_us"] = round(t, 1)
        row[f"{name}_tflops"] = round(case["flops"] / t / 1e6, 1)
        row[f"x_{name}"] = round(t / us, 3)
    del timed
    torch.cuda.empty_cache()

    # The mma.sync kernel (the path for GPUs other than sm_90) on the same inputs.
    previous = _C.attention_set_path("sm80")
    try:
        ours()
        torch.cuda.synchronize()
        diff = max_diff(torch, out, mine)
        t80 = time_fn(torch, ours, args.reps, args.trials, args.settle_ms)
        row["sm80_tflops"] = round(case["flops"] / t80 / 1e6, 1) if diff <= 0.02 else f"wrong ({diff:.3g})"
    finally:
        _C.attention_set_path(previous)
    if args.tile_sweep:
        sweep = {}  # variants of the kernel this GPU runs (wgmma on sm_90a)
        for variant in range(0, args.tile_sweep):
            _C.attention_set_tile_variant(variant)
            try:
                ours()
                torch.cuda.synchronize()
                diff = max_diff(torch, out, mine)
                name = kernel_name()
                t = time_fn(torch, ours, args.reps, args.trials, args.settle_ms)
                sweep[name] = round(case["flops"] / t / 1e6, 1) if diff <= 0.02 else f"wrong ({diff:.3g})"
            finally:
                _C.attention_set_tile_variant(0)
        row["tile_sweep_tflops"] = sweep
        print(f"  tile sweep: {sweep}", flush=True)
    return row


def table(rows: list[dict], gemm: float | None) -> str:
    def cell(r, key, width=7):
        v = r.get(key)
        return f"{v:{width}.1f}" if isinstance(v, (int, float)) else f"{'-':>{width}s}"

    def ratio(r, key):
        v = r.get(key)
        return f"{v:6.2f}{'!' if key == 'x_flash' and v < 1.0 else ' '}" if isinstance(v, (int, float)) else "     - "

    with_fa3 = any("fa3_us" in r for r in rows)
    def ceiling(r):  # a merged run's rows carry the GEMM rate measured beside them, in their part
        return r.get("gemm_bf16_tflops") or gemm

    ceilings = sorted({ceiling(r) for r in rows if ceiling(r)})
    head = "TFLOP/s"
    if len(ceilings) == 1:
        head += f" (bf16 dense GEMM ceiling: {ceilings[0]:.0f})"
    elif ceilings:
        head += f" (bf16 dense GEMM ceiling: {ceilings[0]:.0f}-{ceilings[-1]:.0f}, each row's from its part of the run)"
    lines = [head,
             f"{'dtype':8s} {'d':>3s} {'causal':6s} {'seqlen':>6s} {'BxH':>7s} {'ours':>7s} {'sm80':>7s} {'flash':>7s} "
             f"{'cudnn':>7s} {'effic':>7s} {'ortMHA':>7s} " + (f"{'fa3':>7s} " if with_fa3 else "") +
             f"{'xflash':>7s} {'xcudnn':>7s} {'xort':>7s} " + (f"{'xfa3':>7s} " if with_fa3 else "") + f"{'%gemm':>6s}"]
    for r in rows:
        pct = f"{100 * r['ours_tflops'] / ceiling(r):6.1f}" if ceiling(r) else f"{'-':>6s}"
        lines.append(
            f"{r['dtype']:8s} {r['d']:3d} {str(r['causal']):6s} {r['seqlen']:6d} {str(r['batch']) + 'x' + str(r['heads']):>7s} "
            f"{cell(r, 'ours_tflops')} {cell(r, 'sm80_tflops')} {cell(r, 'flash_tflops')} {cell(r, 'cudnn_tflops')} "
            f"{cell(r, 'efficient_tflops')} {cell(r, 'ort_tflops')} " + (f"{cell(r, 'fa3_tflops')} " if with_fa3 else "") +
            f"{ratio(r, 'x_flash')} {ratio(r, 'x_cudnn')} {ratio(r, 'x_ort')} " +
            (f"{ratio(r, 'x_fa3')} " if with_fa3 else "") + pct)
    lines.append("ours = the kernel chosen for this GPU (wgmma on sm_90a), sm80 = our mma.sync kernel forced; "
                 "x<backend> = backend time / our time (> 1: we are faster); '!' = slower than torch's flash backend")
    return "\n".join(lines)


def _case(r: dict) -> str:
    return f"{r['dtype']} d{r['d']} {'causal' if r['causal'] else 'non-causal'} {r['seqlen']}"


def _key(r: dict) -> tuple:
    return (r["dtype"], r["d"], r["causal"], r["seqlen"], r["batch"], r["heads"])


def _below(rows: list[dict], key: str, bar: float) -> list[dict]:
    """Rows under the bar, or without the ratio (a baseline that failed or was not timed)."""
    return [r for r in rows if not (isinstance(r.get(key), (int, float)) and r[key] >= bar)]


def bar_rows(rows: list[dict]) -> list[dict]:
    """The rows issue 7's bars speak of: unmasked d64 and d128."""
    return [r for r in rows if r.get("d") in (64, 128) and r.get("key_padding", "none") == "none"]


def bars(rows: list[dict]) -> str:
    """Issue 7's bars over one run's rows (or per-case medians): counts, then each case below a bar."""
    rows = bar_rows(rows)
    if not rows:
        return ""
    long = [r for r in rows if r["seqlen"] >= RATIO_FROM]
    flash, flash_long, cudnn = (_below(rows, "x_flash", FLASH_BAR), _below(long, "x_flash", FLASH_BAR),
                                _below(long, "x_cudnn", CUDNN_BAR))
    lines = [f"issue 7's bars: >= {FLASH_BAR:g}x torch flash on {len(rows) - len(flash)} of {len(rows)} cases "
             f"({len(long) - len(flash_long)} of {len(long)} from seqlen {RATIO_FROM}); >= {CUDNN_BAR:g}x torch cuDNN "
             f"on {len(long) - len(cudnn)} of {len(long)} from seqlen {RATIO_FROM}"]
    for name, key, below in (("flash", "x_flash", flash), ("cuDNN", "x_cudnn", cudnn)):
        if below:
            lines.append(f"  below {name}: " + ", ".join(
                f"{_case(r)} {r[key]:.3f}" if isinstance(r.get(key), (int, float)) else f"{_case(r)} (not timed)"
                for r in below))
    for d, causal, floor in RATE_BARS:
        rates = [r.get("ours_tflops") for r in rows
                 if r["d"] == d and r["causal"] == causal and r["seqlen"] >= RATE_FROM]
        rates = [x for x in rates if isinstance(x, (int, float))]
        if rates:
            low = min(rates)
            lines.append(f"  d{d} {'causal' if causal else 'non-causal'}, seqlen >= {RATE_FROM}: >= {floor:.0f} "
                         f"TFLOP/s {'met' if low >= floor else 'MISSED'} (lowest {low:.1f})")
    return "\n".join(lines)


def pooled(runs: list[list[dict]]) -> list[dict]:
    """Per case (in the first run's order), the median over the runs of our rate and each ratio."""
    by_case: dict[tuple, list[dict]] = {}
    for rows in runs:
        for r in bar_rows(rows):
            by_case.setdefault(_key(r), []).append(r)
    out = []
    for same in by_case.values():
        row = {k: same[0][k] for k in ("dtype", "d", "causal", "seqlen", "batch", "heads")}
        for k in ("ours_tflops", "x_flash", "x_cudnn"):
            values = [r[k] for r in same if isinstance(r.get(k), (int, float))]
            row[k] = statistics.median(values) if values else None
        row["runs"] = len(same)
        out.append(row)
    return out


def load_runs(paths: list[Path]) -> list[dict]:
    """Saved results documents, in the given order."""
    return [json.loads(Path(p).read_text()) for p in paths]


def settle_of(doc: dict) -> str:
    """A saved run's settle time as its method states it ('250 ms'), or 'none' (burst timing)."""
    found = re.search(r"after ([0-9.]+) ms of untimed", doc.get("method", ""))
    return f"{found.group(1)} ms" if found else "none"


def bars_report(paths: list[Path]) -> str:
    """Issue 7's bars of saved results: each run's; with several, their per-case medians and the
    cases below a bar in every run that timed them (with how many runs that was)."""
    docs = load_runs(paths)
    parts = []
    for path, doc in zip(paths, docs):
        parts.append(f"{path}: {doc.get('gpu')}, {doc.get('date')}, dense GEMM {doc.get('gemm_bf16_tflops')} "
                     f"TFLOP/s, settle {settle_of(doc)}")
        parts.append(bars(doc["rows"]) or "  no unmasked d64 / d128 rows")
    if len(docs) > 1:
        runs = [doc["rows"] for doc in docs]
        medians = pooled(runs)
        parts.append(f"per-case medians over the {len(docs)} runs")
        settles = sorted({settle_of(doc) for doc in docs})
        if len(settles) > 1:
            parts.append(f"  (these runs were timed differently: settle {', '.join(settles)})")
        parts.append(bars(medians) or "  no unmasked d64 / d128 rows")
        for name, key, bar, scope in (("flash", "x_flash", FLASH_BAR, 0),
                                      ("cuDNN", "x_cudnn", CUDNN_BAR, RATIO_FROM)):
            # Runs of a few cases pool with full ones: a case counts as always below when every
            # run that timed it has it below.
            timed, below = Counter(), Counter()
            for rows in runs:
                scoped = [r for r in bar_rows(rows) if r["seqlen"] >= scope]
                timed.update(_key(r) for r in scoped)
                below.update(_key(r) for r in _below(scoped, key, bar))
            names = [f"{_case(r)} ({below[_key(r)]} of {below[_key(r)]})" for r in medians
                     if 0 < below[_key(r)] == timed[_key(r)]]
            parts.append(f"  below {name} in every run that timed it: {', '.join(names) if names else 'none'}")
    return "\n".join(parts)


def merge(paths: list[Path]) -> dict:
    """One results document from saved runs of disjoint cases on one GPU with one timing method and
    the same software (so the same baselines): the rows in the given order, each with its part's GEMM
    rate, the first run's header, and each part's date, time and GEMM rate. Raises ValueError naming
    the mismatch or the case that repeats."""
    docs = load_runs(paths)
    first = docs[0]
    seen: dict[tuple, Path] = {}
    for path, doc in zip(paths, docs):
        for key in ("gpu", "method", "versions"):
            if doc.get(key) != first.get(key):
                raise ValueError(f"{path}: {key} {doc.get(key)!r} differs from {paths[0]}'s {first.get(key)!r}")
        for r in doc["rows"]:
            k = _key(r) + (r.get("key_padding", "none"),)
            if k in seen:
                raise ValueError(f"{path}: case {_case(r)} is also in {seen[k]}")
            seen[k] = path
    doc = {k: v for k, v in first.items() if k not in ("rows", "errors", "seconds")}
    doc["seconds"] = round(sum(d.get("seconds") or 0 for d in docs), 1)
    doc["errors"] = [e for d in docs for e in d.get("errors", [])]
    doc["parts"] = [{"file": str(p), "date": d.get("date"), "seconds": d.get("seconds"),
                     "gemm_bf16_tflops": d.get("gemm_bf16_tflops")} for p, d in zip(paths, docs)]
    doc["rows"] = [{**r, "gemm_bf16_tflops": r.get("gemm_bf16_tflops", d.get("gemm_bf16_tflops"))}
                   for d in docs for r in d["rows"]]
    return doc


def save(path: Path, doc: dict) -> int:
    """Writes a results document and prints its errors, table and issue 7's bars (write_results)."""
    summary = bars(doc["rows"])
    text = table(doc["rows"], doc.get("gemm_bf16_tflops")) + (f"\n{summary}" if summary else "")
    return write_results(path, doc, doc["errors"], text)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.merge:
        try:
            doc = merge(args.merge)
        except (OSError, ValueError, KeyError) as e:
            print(f"bench_attention --merge: {type(e).__name__}: {e}", file=sys.stderr)
            return 2
        return save(args.out, doc)
    if args.bars:
        try:
            print(bars_report(args.bars))
        except (OSError, ValueError, KeyError) as e:
            print(f"bench_attention --bars: {type(e).__name__}: {e}", file=sys.stderr)
            return 2
        return 0
    setup = gpu_setup("bench_attention", want_ort=not args.no_ort)
    if setup == 2:
        return 2
    torch, _C, ort, device_index, stream = setup
    fa3 = load_fa3(args.fa3) if args.fa3 else None
    t0 = time.perf_counter()
    gemm = gemm_tflops(torch, args.reps, args.trials, args.settle_ms)
    print(f"dense bf16 GEMM 8192^3: {gemm:.0f} TFLOP/s", flush=True)
    rows, errors = [], []
    for case in plan(args):
        label = f"{case['dtype']} d{case['d']} {'causal' if case['causal'] else 'full'} s{case['seqlen']}"
        if case["key_padding"] != "none":
            label += f" b{case['batch']} h{case['heads']} {case['key_padding']} key padding"
        try:
            row = run_case(torch, _C, ort, case, args, stream.cuda_stream, device_index, fa3)
            rows.append(row)
            print(f"{label}: ours {row['ours_tflops']} TFLOP/s, flash {row.get('flash_tflops')}, "
                  f"cudnn {row.get('cudnn_tflops')}, ort {row.get('ort_tflops')}"
                  + (f", fa3 {row.get('fa3_tflops')}" if fa3 is not None else "") + f" [{row['ours_kernel']}]", flush=True)
            if "ours_unmasked_us" in row:
                print(f"  us: ours {row['ours_us']} (unmasked {row['ours_unmasked_us']}), cudnn {row.get('cudnn_us')}, "
                      f"efficient {row.get('efficient_us')}, ort {row.get('ort_us')}", flush=True)
        except Exception as e:  # noqa: BLE001 - report every failing case
            errors.append(f"{label}: {type(e).__name__}: {e}")
            print(f"{label}: ERROR {type(e).__name__}: {e}", flush=True)
        torch.cuda.empty_cache()
    import trt_fastops

    doc = {"benchmark": "attention", "gpu": torch.cuda.get_device_name(device_index),
           "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
           "versions": {"torch": torch.__version__, "cuda": torch.version.cuda,
                        "onnxruntime": getattr(ort, "__version__", None) if ort else None,
                        "trt_fastops": trt_fastops.__version__, "driver": driver_version(),
                        "flashattention3": fa3_commit(args.fa3)},
           "gemm_bf16_tflops": round(gemm, 1),
           "method": method(args),
           "seconds": round(time.perf_counter() - t0, 1), "errors": errors, "rows": rows}
    return save(args.out, doc)


if __name__ == "__main__":
    sys.exit(main())
