#!/usr/bin/env python3
"""Benchmark the trt_fastops norm kernels against PyTorch, ONNX Runtime and a copy.

    python3 scripts/bench_norms.py                     # full run (H100: ~1 minute)
    python3 scripts/bench_norms.py --dry-run           # the plan: bytes and floor time per case
    python3 scripts/bench_norms.py --shapes 16384x1024 --dtypes float16 --ops layer
    python3 scripts/bench_norms.py --bert              # BERT-base SkipLayerNorm, every kernel path

Cases: rows x hidden in {16384x1024, 16384x4096, 8192x8192, 32768x768}, float16 and
bfloat16; LayerNorm (gamma, beta), RMSNorm (gamma), SkipLayerNorm (gamma, beta, with
the sum output a residual stream needs). Per case, in the same run:
  ours          trt_fastops._C.norm_forward on preallocated outputs
  torch         torch.nn.functional.layer_norm; for RMSNorm the eager version HF Llama
                writes (plus torch.nn.functional.rms_norm as torch_fused when present);
                for SkipLayerNorm torch add + layer_norm
  copy          torch copy_ moving the same byte count: the bandwidth ceiling
  ort           ONNX Runtime's own LayerNormalization / RMSNormalization (or
                SimplifiedLayerNormalization) / com.microsoft.SkipLayerNormalization on
                the CUDA EP, torch tensors IO-bound, when onnxruntime-gpu is importable
bytes = inputs read once + outputs written once. Timing: CUDA events around every
call, median of --reps; the GPU is first kept busy (torch.cuda._sleep) long enough
for the host to queue all calls, so host overhead (Python, ORT's Run) is not
counted, and calls rotate over enough buffer sets (> 200 MB) that inputs do not
sit in the 50 MB L2. Writes bench/results/norms.json and prints a table last.
Exits non-zero only on errors (including a wrong result), not on missed targets;
missed targets are marked '!' in the table and listed per row in the JSON.

--bert (a separate mode; the default run above is unchanged): BERT-base SkipLayerNorm as
the model runs it, hidden 768, skip + per-column bias + gamma + beta + the sum output,
float16, rows 128 / 512 / 4096 / 16384 (batch x tokens; --bert-rows). Every path of
_C.norm_set_path ('auto', 'warp', 'warp_fit', 'row', 'block', 'generic') is timed in the
same run, and ORT's com.microsoft.SkipLayerNormalization (with its bias input) when
onnxruntime-gpu is importable. The main number is the kernel's own device time from
torch.profiler (CUPTI), median over --reps calls, as a per-kernel model profile reports
it; the event-timed median is printed beside it. Inputs stay hot in L2 (one buffer set,
as after the GEMM that writes them in the model) unless --bert-cold rotates > 200 MB of
buffer sets. Writes bench/results/norms_bert.json (or --out) and prints a table
(rows, path, kernel, us).
"""
from __future__ import annotations

import argparse
import datetime as _dt
import math
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.append(str(REPO))  # after site-packages: the installed trt_fastops wins
from scripts._bench_common import driver_version, gpu_setup, write_results  # noqa: E402

SHAPES = [(16384, 1024), (16384, 4096), (8192, 8192), (32768, 768)]
DTYPES = ["float16", "bfloat16"]
OPS = ["layer", "rms", "skip"]
OP_NAMES = {"layer": "LayerNorm", "rms": "RMSNorm", "skip": "SkipLayerNorm"}
FLOOR_TBPS = 3.0  # H100 SXM device-to-device copy, bytes read + written
ROTATE_BYTES = 200 << 20  # > 4x the 50 MB L2
TARGET_FRAC = 0.85  # of copy bandwidth, for hidden >= 1024
TARGET_SPEEDUP = {"layer": 1.2, "rms": 1.2, "skip": 1.5}
ONNX_TYPES = {"float32": 1, "float16": 10, "bfloat16": 16}  # onnx.TensorProto
ORT_EP, ORT_DEVICE = "CUDAExecutionProvider", "cuda"  # (a CPU test of the plumbing swaps these)
BERT_HIDDEN = 768
BERT_ROWS = [128, 512, 4096, 16384]  # batch 1 x 128, 1 x 512, 8 x 512, 32 x 512 tokens
BERT_PATHS = ["auto", "warp", "warp_fit", "row", "block", "generic"]  # _C.norm_set_path
DEFAULT_OUT = REPO / "bench" / "results" / "norms.json"
BERT_OUT = REPO / "bench" / "results" / "norms_bert.json"


def case_bytes(op: str, rows: int, hidden: int, elem: int = 2) -> int:
    """Inputs read once + outputs written once."""
    act = rows * hidden * elem
    if op == "layer":
        return 2 * act + 2 * hidden * elem  # x, y; gamma, beta
    if op == "rms":
        return 2 * act + hidden * elem  # x, y; gamma
    return 4 * act + 2 * hidden * elem  # x, skip, y, sum; gamma, beta


def floor_us(nbytes: int, tbps: float = FLOOR_TBPS) -> float:
    return nbytes / (tbps * 1e12) * 1e6


def parse_shape(text: str) -> tuple[int, int]:
    try:
        r, h = text.lower().split("x")
        shape = int(r), int(h)
    except ValueError:
        raise argparse.ArgumentTypeError(f"shape must look like 16384x1024, got {text!r}") from None
    if shape[0] <= 0 or shape[1] <= 0:
        raise argparse.ArgumentTypeError(f"shape must be positive, got {text!r}")
    return shape


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", nargs="+", type=parse_shape, default=SHAPES, metavar="ROWSxHIDDEN")
    ap.add_argument("--dtypes", nargs="+", choices=DTYPES + ["float32"], default=None,
                    help=f"default: {' '.join(DTYPES)} (--bert: float16)")
    ap.add_argument("--ops", nargs="+", choices=OPS, default=OPS)
    ap.add_argument("--reps", type=int, default=100, help="timed calls per measurement (median)")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--no-ort", action="store_true", help="skip ONNX Runtime")
    ap.add_argument("--out", type=Path, default=None,
                    help=f"JSON results (default {DEFAULT_OUT.relative_to(REPO)}; --bert: {BERT_OUT.relative_to(REPO)})")
    ap.add_argument("--dry-run", action="store_true",
                    help="print the cases with bytes and floor time at 3 TB/s; needs no GPU")
    ap.add_argument("--bert", action="store_true",
                    help="BERT-base SkipLayerNorm (hidden 768, skip + bias, sum output) with every kernel path "
                         "forced in turn, plus ORT; see the description")
    ap.add_argument("--bert-rows", nargs="+", type=int, default=BERT_ROWS, metavar="ROWS")
    ap.add_argument("--bert-paths", nargs="+", choices=BERT_PATHS, default=BERT_PATHS, metavar="PATH")
    ap.add_argument("--bert-cold", action="store_true",
                    help="--bert: rotate buffer sets (> 200 MB) so inputs are not L2-resident")
    return ap


def finish_args(args):
    """Mode-dependent defaults (None in the parser so the default run keeps its own)."""
    if args.dtypes is None:
        args.dtypes = ["float16"] if args.bert else list(DTYPES)
    if args.out is None:
        args.out = BERT_OUT if args.bert else DEFAULT_OUT
    return args


def plan(args) -> list[dict]:
    cases = []
    for rows, hidden in args.shapes:
        for dtype in args.dtypes:
            for op in args.ops:
                elem = 4 if dtype == "float32" else 2
                nbytes = case_bytes(op, rows, hidden, elem)
                cases.append(dict(op=op, dtype=dtype, rows=rows, hidden=hidden, bytes=nbytes,
                                  floor_us=floor_us(nbytes)))
    return cases


# ---------------------------------------------------------------------------------------
# Timing


class Timer:
    """Median GPU time of fn(i) (i = rep index) with events around each call."""

    def __init__(self, torch, reps: int, warmup: int):
        self.torch = torch
        self.reps = reps
        self.warmup = warmup
        self.cycles_per_ms = self._calibrate()

    def _calibrate(self) -> float:
        torch = self.torch
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(1000)
        cycles = 20_000_000
        s.record()
        torch.cuda._sleep(cycles)
        e.record()
        torch.cuda.synchronize()
        return cycles / max(s.elapsed_time(e), 1e-3)

    def __call__(self, fn) -> tuple[float, str]:
        torch = self.torch
        t0 = time.perf_counter()
        for i in range(self.warmup):
            fn(i)
        host_ms = (time.perf_counter() - t0) * 1e3 / max(self.warmup, 1)
        torch.cuda.synchronize()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(self.reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(self.reps)]
        # Keep the GPU busy while the host queues every call (host overhead not counted).
        sleep_ms = min(2.0 + 2.0 * host_ms * self.reps, 500.0)
        torch.cuda._sleep(int(sleep_ms * self.cycles_per_ms))
        t0 = time.perf_counter()
        for i in range(self.reps):
            starts[i].record()
            fn(i)
            ends[i].record()
        enqueue_ms = (time.perf_counter() - t0) * 1e3
        torch.cuda.synchronize()
        times = [s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)]
        note = "events, queue prefilled"
        if enqueue_ms > sleep_ms:
            note = f"events; host-bound (queueing took {enqueue_ms:.1f} ms > {sleep_ms:.1f} ms prefill)"
        return statistics.median(times), note


# ---------------------------------------------------------------------------------------
# ONNX Runtime


def _ort_model(op: str, dtype: str, hidden: int, variant: str, skip_bias: bool = False):
    import onnx
    from onnx import helper

    et = ONNX_TYPES[dtype]
    x = helper.make_tensor_value_info("X", et, ["rows", hidden])
    y = helper.make_tensor_value_info("Y", et, ["rows", hidden])
    w = helper.make_tensor_value_info("W", et, [hidden])
    b = helper.make_tensor_value_info("B", et, [hidden])
    opsets = [helper.make_opsetid("", 17)]
    if op == "layer":
        node = helper.make_node("LayerNormalization", ["X", "W", "B"], ["Y"], axis=-1, epsilon=1e-5)
        inputs, outputs = [x, w, b], [y]
    elif op == "rms" and variant == "RMSNormalization":
        node = helper.make_node("RMSNormalization", ["X", "W"], ["Y"], axis=-1, epsilon=1e-5)
        inputs, outputs = [x, w], [y]
        opsets = [helper.make_opsetid("", 23)]
    elif op == "rms":  # ORT's contrib op, registered in the ONNX domain
        node = helper.make_node("SimplifiedLayerNormalization", ["X", "W"], ["Y"], axis=-1, epsilon=1e-5)
        inputs, outputs = [x, w], [y]
    else:
        sk = helper.make_tensor_value_info("S", et, ["rows", hidden])
        s = helper.make_tensor_value_info("SUM", et, ["rows", hidden])
        node = helper.make_node("SkipLayerNormalization", ["X", "S", "W", "B"] + (["BIAS"] if skip_bias else []),
                                ["Y", "", "", "SUM"], domain="com.microsoft", epsilon=1e-5)
        inputs, outputs = [x, sk, w, b], [y, s]
        if skip_bias:
            inputs.append(helper.make_tensor_value_info("BIAS", et, [hidden]))
        opsets.append(helper.make_opsetid("com.microsoft", 1))
    graph = helper.make_graph([node], f"ort_{op}", inputs, outputs)
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = min(model.ir_version, 10)
    if op != "rms" or variant == "RMSNormalization":  # the checker knows no ORT contrib op in ai.onnx
        onnx.checker.check_model(model)
    return model.SerializeToString()


def ort_variants(op: str) -> list[str]:
    return {"layer": ["LayerNormalization"], "rms": ["RMSNormalization", "SimplifiedLayerNormalization"],
            "skip": ["com.microsoft.SkipLayerNormalization"]}[op]


def bind_set(sess, inputs: dict, outputs: dict, device_index: int, et):
    """An IO binding of one buffer set: each of the session's inputs / outputs bound by name to
    its torch tensor on the device."""
    io = sess.io_binding()
    for inp in sess.get_inputs():
        t = inputs[inp.name]
        io.bind_input(inp.name, ORT_DEVICE, device_index, et, list(t.shape), t.data_ptr())
    for out in sess.get_outputs():
        t = outputs[out.name]
        io.bind_output(out.name, ORT_DEVICE, device_index, et, list(t.shape), t.data_ptr())
    return io


def time_ort(ort, torch, timer: Timer, op, dtype, rows, hidden, sets, stream_ptr, device_index):
    """Returns (us, ort_op, note) or (None, None, why)."""
    et = ONNX_TYPES[dtype]
    why = []
    fallback = None  # a host-bound plain result, kept while the CUDA-graph way is tried
    for variant in ort_variants(op):
        for graph_mode in (False, True):
            try:
                so = ort.SessionOptions()
                so.log_severity_level = 3
                # a node the CUDA EP lacks must fail the session, not run silently on the CPU
                so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
                prov = {"device_id": str(device_index), "user_compute_stream": str(stream_ptr),
                        "enable_cuda_graph": "1" if graph_mode else "0"}
                sess = ort.InferenceSession(_ort_model(op, dtype, hidden, variant), so,
                                            providers=[(ORT_EP, prov)])
                if ORT_EP not in sess.get_providers():
                    raise RuntimeError("session did not take the CUDA EP")
                bindings = []
                use_sets = sets[:1] if graph_mode else sets  # a graph replays fixed addresses
                for st in use_sets:
                    bindings.append(bind_set(sess, {"X": st["x"], "W": st["w"], "B": st.get("b"), "S": st.get("skip")},
                                             {"Y": st["y_ort"], "SUM": st.get("sum_ort")}, device_index, et))
                ro = ort.RunOptions()
                ro.add_run_config_entry("disable_synchronize_execution_providers", "1")
                # first run (captures the graph in graph mode), then check the result
                sess.run_with_iobinding(bindings[0], ro)
                torch.cuda.synchronize()
                ref = sets[0]["y_ref"]
                diff = scaled_diff(sets[0]["y_ort"], ref)
                if not diff <= 0.05:
                    raise RuntimeError(f"result differs from torch by {diff:.3g}")
                us, note = timer(lambda i: sess.run_with_iobinding(bindings[i % len(bindings)], ro))
                mode = "ORT CUDA graph replay, fixed buffers (inputs may sit in L2)" if graph_mode else \
                    f"IO binding over {len(bindings)} buffer sets"
                name = variant if "." in variant else f"ai.onnx.{variant}"
                result = (us, name, f"{mode}; {note}")
                if "host-bound" not in note:
                    return result
                fallback = fallback or result
            except Exception as e:  # noqa: BLE001 - report and try the next way
                why.append(f"{variant}{' (cuda graph)' if graph_mode else ''}: {type(e).__name__}: "
                           f"{str(e).splitlines()[0][:160] if str(e) else ''}")
        if fallback is not None:
            return fallback
    return None, None, "; ".join(why)


# ---------------------------------------------------------------------------------------


def versions(torch, ort) -> dict:
    import trt_fastops

    return {"torch": torch.__version__, "cuda": torch.version.cuda,
            "onnxruntime": getattr(ort, "__version__", None) if ort else None,
            "trt_fastops": trt_fastops.__version__, "driver": driver_version()}


def scaled_diff(a, b) -> float:
    """max |a - b| / (1 + |b|) in float32."""
    a, b = a.float(), b.float()
    return ((a - b).abs() / (b.abs() + 1.0)).max().item()


def llama_rms_norm(torch, x, w, eps):
    """RMSNorm as Hugging Face's LlamaRMSNorm.forward writes it (eager)."""
    dtype = x.dtype
    h = x.to(torch.float32)
    variance = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(variance + eps)
    return w * h.to(dtype)


def run_case(torch, _C, ort, timer, case, stream_ptr, device_index) -> dict:
    op, dtype, rows, hidden = case["op"], case["dtype"], case["rows"], case["hidden"]
    F = torch.nn.functional
    dt = getattr(torch, dtype)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(rows * 7 + hidden)
    act = rows * hidden * dt.itemsize
    inputs_per_set = act * (2 if op == "skip" else 1)
    nsets = max(2, min(8, math.ceil(ROTATE_BYTES / inputs_per_set)))
    w = (torch.randn(hidden, generator=gen, device="cuda") * 0.5 + 1.0).to(dt)
    b = (torch.randn(hidden, generator=gen, device="cuda") * 0.2).to(dt)
    sets = []
    for _ in range(nsets):
        st = {"x": (torch.randn((rows, hidden), generator=gen, device="cuda") * 1.5 + 0.5).to(dt),
              "w": w, "b": b if op != "rms" else None}
        st["y"] = torch.empty_like(st["x"])
        st["y_ort"] = torch.empty_like(st["x"])
        if op == "skip":
            st["skip"] = torch.randn((rows, hidden), generator=gen, device="cuda").to(dt)
            st["sum"] = torch.empty_like(st["x"])
            st["sum_ort"] = torch.empty_like(st["x"])
        sets.append(st)

    kind = "rms" if op == "rms" else "layer"

    def ours(i):
        st = sets[i % nsets]
        _C.norm_forward(kind, dtype, st["x"].data_ptr(), w.data_ptr(), st["y"].data_ptr(), rows, hidden,
                        skip=st["skip"].data_ptr() if op == "skip" else 0, skip_rows=rows if op == "skip" else 0,
                        beta=b.data_ptr() if op != "rms" else 0,
                        sum_out=st["sum"].data_ptr() if op == "skip" else 0, epsilon=1e-5, stream=stream_ptr)

    if op == "layer":
        def torch_fn(i):
            st = sets[i % nsets]
            return F.layer_norm(st["x"], (hidden,), w, b, 1e-5)
    elif op == "rms":
        def torch_fn(i):
            return llama_rms_norm(torch, sets[i % nsets]["x"], w, 1e-5)
    else:
        def torch_fn(i):
            st = sets[i % nsets]
            s = st["x"] + st["skip"]
            return F.layer_norm(s, (hidden,), w, b, 1e-5), s

    # correctness: ours against torch on set 0 (also gives ORT its reference)
    ours(0)
    ref = torch_fn(0)
    torch.cuda.synchronize()
    y_ref = ref[0] if op == "skip" else ref
    sets[0]["y_ref"] = y_ref
    diff = scaled_diff(sets[0]["y"], y_ref)
    if op == "skip":
        diff = max(diff, scaled_diff(sets[0]["sum"], ref[1]))
    tol = {"bfloat16": 0.03, "float16": 0.005}.get(dtype, 1e-4)  # a few output ulps: torch rounds differently
    if not diff <= tol:
        raise RuntimeError(f"{OP_NAMES[op]} {dtype} {rows}x{hidden}: ours differs from torch by {diff:.3g} "
                           f"(max |a - b| / (1 + |b|))")

    ours_us, ours_note = timer(ours)
    torch_us, _ = timer(torch_fn)
    torch_fused_us = None
    if op == "rms" and hasattr(F, "rms_norm"):
        torch_fused_us, _ = timer(lambda i: F.rms_norm(sets[i % nsets]["x"], (hidden,), w, 1e-5))

    copy_elems = case["bytes"] // 2 // dt.itemsize
    srcs = [torch.empty(copy_elems, dtype=dt, device="cuda").fill_(1) for _ in range(nsets)]
    dsts = [torch.empty(copy_elems, dtype=dt, device="cuda") for _ in range(nsets)]
    copy_us, _ = timer(lambda i: dsts[i % nsets].copy_(srcs[i % nsets]))
    srcs = dsts = None  # free before ORT runs

    ort_us = ort_op = None
    ort_note = "onnxruntime-gpu not importable (no CUDAExecutionProvider)" if ort is None else ""
    if ort is not None:
        ort_us, ort_op, ort_note = time_ort(ort, torch, timer, op, dtype, rows, hidden, sets, stream_ptr,
                                            device_index)

    nbytes = case["bytes"]
    row = dict(op=OP_NAMES[op], dtype=dtype, rows=rows, hidden=hidden, bytes=nbytes,
               floor_us=round(case["floor_us"], 2), kernel=_C.norm_kernel_name(
                   kind, dtype, sets[0]["x"].data_ptr(), w.data_ptr(), sets[0]["y"].data_ptr(), rows, hidden,
                   skip=sets[0]["skip"].data_ptr() if op == "skip" else 0, skip_rows=rows if op == "skip" else 0,
                   beta=b.data_ptr() if op != "rms" else 0,
                   sum_out=sets[0]["sum"].data_ptr() if op == "skip" else 0),
               ours_us=round(ours_us, 2), torch_us=round(torch_us, 2),
               torch_fused_us=None if torch_fused_us is None else round(torch_fused_us, 2),
               copy_us=round(copy_us, 2), ort_us=None if ort_us is None else round(ort_us, 2), ort_op=ort_op,
               ort_note=ort_note, ours_gbps=round(nbytes / ours_us / 1e3, 1),
               copy_gbps=round(nbytes / copy_us / 1e3, 1), frac_of_copy=round(copy_us / ours_us, 3),
               speedup_vs_torch=round(torch_us / ours_us, 3),
               speedup_vs_torch_fused=None if torch_fused_us is None else round(torch_fused_us / ours_us, 3),
               speedup_vs_ort=None if ort_us is None else round(ort_us / ours_us, 3),
               max_scaled_diff_vs_torch=diff, timing=f"median of {timer.reps}, {ours_note}", buffer_sets=nsets)
    missed = []
    if hidden >= 1024 and row["frac_of_copy"] < TARGET_FRAC:
        missed.append(f"frac_of_copy < {TARGET_FRAC}")
    if row["speedup_vs_torch"] < TARGET_SPEEDUP[op]:
        missed.append(f"speedup_vs_torch < {TARGET_SPEEDUP[op]}")
    row["missed"] = missed
    return row


# ---------------------------------------------------------------------------------------
# --bert: BERT-base SkipLayerNorm, every kernel path


def kernel_us(torch, fn, reps: int, warmup: int, match) -> tuple[float | None, int]:
    """(median device time in us, count) of the kernels whose name satisfies `match` over
    `reps` calls of fn(i), from torch.profiler (CUPTI activity records: the kernel alone, as a
    per-kernel model profile reports it); (None, 0) when no such kernel ran."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    for i in range(warmup):
        fn(i)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i in range(reps):
            fn(i)
        torch.cuda.synchronize()
    times = [e.time_range.elapsed_us() for e in prof.events()
             if e.device_type == DeviceType.CUDA and match(e.name)]
    return (statistics.median(times), len(times)) if times else (None, 0)


def is_ours(name: str) -> bool:
    return "trt_fastops::norm::norm_" in name


def is_ort_skip_ln(name: str) -> bool:
    return "skiplayernorm" in name.lower()


def bert_plan(args) -> list[dict]:
    cases = []
    for dtype in args.dtypes:
        elem = 4 if dtype == "float32" else 2
        for rows in args.bert_rows:
            nbytes = case_bytes("skip", rows, BERT_HIDDEN, elem) + BERT_HIDDEN * elem  # + bias
            cases.append(dict(op="skip", dtype=dtype, rows=rows, hidden=BERT_HIDDEN, bytes=nbytes,
                              floor_us=floor_us(nbytes)))
    return cases


def ort_bert_runner(ort, dtype, hidden, sets, stream_ptr, device_index):
    """fn(i) running ORT's com.microsoft.SkipLayerNormalization (with bias) on sets[i % n]."""
    et = ONNX_TYPES[dtype]
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    prov = {"device_id": str(device_index), "user_compute_stream": str(stream_ptr)}
    sess = ort.InferenceSession(_ort_model("skip", dtype, hidden, "com.microsoft.SkipLayerNormalization",
                                           skip_bias=True), so, providers=[(ORT_EP, prov)])
    if ORT_EP not in sess.get_providers():
        raise RuntimeError("session did not take the CUDA EP")
    bindings = []
    for st in sets:
        bindings.append(bind_set(sess, {"X": st["x"], "S": st["skip"], "W": st["w"], "B": st["b"], "BIAS": st["bias"]},
                                 {"Y": st["y_ort"], "SUM": st["sum_ort"]}, device_index, et))
    ro = ort.RunOptions()
    ro.add_run_config_entry("disable_synchronize_execution_providers", "1")
    return lambda i: sess.run_with_iobinding(bindings[i % len(bindings)], ro)


def run_bert_case(torch, _C, ort, timer, args, case, stream_ptr, device_index) -> tuple[list[dict], list[str]]:
    """One rows count: every forced path (and ORT). Returns (result rows, errors)."""
    dtype, rows, hidden = case["dtype"], case["rows"], case["hidden"]
    F = torch.nn.functional
    dt = getattr(torch, dtype)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(rows * 7 + hidden)
    act = rows * hidden * dt.itemsize
    nsets = max(2, min(64, math.ceil(ROTATE_BYTES / (2 * act)))) if args.bert_cold else 1
    w = (torch.randn(hidden, generator=gen, device="cuda") * 0.5 + 1.0).to(dt)
    b = (torch.randn(hidden, generator=gen, device="cuda") * 0.2).to(dt)
    bias = (torch.randn(hidden, generator=gen, device="cuda") * 0.2).to(dt)
    sets = []
    for _ in range(nsets):
        st = {"x": (torch.randn((rows, hidden), generator=gen, device="cuda") * 1.5 + 0.5).to(dt),
              "skip": torch.randn((rows, hidden), generator=gen, device="cuda").to(dt), "w": w, "b": b,
              "bias": bias}
        for k in ("y", "sum", "y_ort", "sum_ort"):
            st[k] = torch.empty_like(st["x"])
        sets.append(st)
    s_ref = sets[0]["x"].float() + sets[0]["skip"].float() + bias.float()
    y_ref = F.layer_norm(s_ref, (hidden,), w.float(), b.float(), 1e-5)
    tol = {"bfloat16": 0.03, "float16": 0.005}.get(dtype, 1e-4)

    def call_args(st):
        return (("layer", dtype, st["x"].data_ptr(), w.data_ptr(), st["y"].data_ptr(), rows, hidden),
                dict(skip=st["skip"].data_ptr(), skip_rows=rows, bias=bias.data_ptr(), beta=b.data_ptr(),
                     sum_out=st["sum"].data_ptr(), epsilon=1e-5, stream=stream_ptr))

    calls = [call_args(st) for st in sets]

    def ours(i):
        a, kw = calls[i % nsets]
        _C.norm_forward(*a, **kw)

    base = dict(op="SkipLayerNorm+bias", dtype=dtype, rows=rows, hidden=hidden, bytes=case["bytes"],
                floor_us=round(case["floor_us"], 2), buffer_sets=nsets, l2="cold" if args.bert_cold else "hot")
    results, errors = [], []
    for path in args.bert_paths:
        prev = _C.norm_set_path(path)
        try:
            kernel = _C.norm_kernel_name(*calls[0][0], **calls[0][1])
            for st in sets:
                st["y"].fill_(float("nan"))
            ours(0)
            torch.cuda.synchronize()
            diff = max(scaled_diff(sets[0]["y"], y_ref), scaled_diff(sets[0]["sum"], s_ref))
            if not diff <= tol:
                raise RuntimeError(f"{kernel}: differs from torch by {diff:.3g} (max |a - b| / (1 + |b|))")
            k_us, count = kernel_us(torch, ours, args.reps, args.warmup, is_ours)
            ev_us, note = timer(ours)
            results.append(dict(base, path=path, kernel=kernel,
                                kernel_us=None if k_us is None else round(k_us, 2), kernels_seen=count,
                                event_us=round(ev_us, 2), timing=note, max_scaled_diff_vs_torch=diff))
        except Exception as e:  # noqa: BLE001 - report and go on with the next path
            errors.append(f"SkipLayerNorm {dtype} {rows}x{hidden} path {path}: {type(e).__name__}: {e}")
        finally:
            _C.norm_set_path(prev)
    if ort is not None and not args.no_ort:
        try:
            run = ort_bert_runner(ort, dtype, hidden, sets, stream_ptr, device_index)
            run(0)
            torch.cuda.synchronize()
            diff = max(scaled_diff(sets[0]["y_ort"], y_ref), scaled_diff(sets[0]["sum_ort"], s_ref))
            if not diff <= 0.05:
                raise RuntimeError(f"result differs from torch by {diff:.3g}")
            k_us, count = kernel_us(torch, run, args.reps, args.warmup, is_ort_skip_ln)
            ev_us, note = timer(run)
            results.append(dict(base, path="ort", kernel="com.microsoft.SkipLayerNormalization",
                                kernel_us=None if k_us is None else round(k_us, 2), kernels_seen=count,
                                event_us=round(ev_us, 2), timing=note, max_scaled_diff_vs_torch=diff))
        except Exception as e:  # noqa: BLE001
            errors.append(f"SkipLayerNorm {dtype} {rows}x{hidden} ORT: {type(e).__name__}: "
                          f"{str(e).splitlines()[0][:200] if str(e) else ''}")
    return results, errors


def bert_table(rows: list[dict]) -> str:
    head = f"{'dtype':8s} {'rows':>6s} {'path':9s} {'kernel':44s} {'kernel us':>9s} {'event us':>9s} {'x best':>7s}"
    lines = [head, "-" * len(head)]
    for key in dict.fromkeys((r["dtype"], r["rows"]) for r in rows):
        group = [r for r in rows if (r["dtype"], r["rows"]) == key]
        best = min((r["kernel_us"] for r in group if r["kernel_us"] is not None), default=None)
        for r in group:
            k = f"{r['kernel_us']:9.2f}" if r["kernel_us"] is not None else f"{'-':>9s}"
            rel = f"{r['kernel_us'] / best:7.2f}" if best and r["kernel_us"] is not None else f"{'-':>7s}"
            lines.append(f"{r['dtype']:8s} {r['rows']:6d} {r['path']:9s} {r['kernel'][:44]:44s} {k} "
                         f"{r['event_us']:9.2f} {rel}")
    lines.append("kernel us: torch.profiler device time of the kernel alone (median); event us: CUDA events "
                 "around each call (median, queue prefilled); x best: kernel us / the row count's fastest")
    return "\n".join(lines)


def print_plan(cases, op_name, width: int, extra: tuple[str, str] | None = None) -> None:
    """--dry-run: one line per case (op, dtype, shape, bytes moved, the 3 TB/s floor[, extra column])."""
    head, cell = extra if extra else ("", "")
    print(f"{'op':{width}s} {'dtype':8s} {'rows x hidden':>13s} {'bytes (MB)':>11s} {'floor us @3TB/s':>16s} {head}".rstrip())
    for c in cases:
        print(f"{op_name(c):{width}s} {c['dtype']:8s} {str(c['rows']) + 'x' + str(c['hidden']):>13s} "
              f"{c['bytes'] / 1e6:11.1f} {c['floor_us']:16.1f} {cell}".rstrip())


def main_bert(args) -> int:
    cases = bert_plan(args)
    if args.dry_run:
        paths = " ".join(args.bert_paths) + ("" if args.no_ort else " ort")
        print_plan(cases, lambda c: "SkipLayerNorm+bias", 18, ("paths", paths))
        return 0
    setup = gpu_setup("bench_norms --bert", want_ort=not args.no_ort)
    if setup == 2:
        return 2
    torch, _C, ort, device_index, stream = setup
    if not hasattr(_C, "norm_set_path"):
        print("bench_norms --bert: this trt_fastops._C has no norm_set_path (rebuild)", file=sys.stderr)
        return 2
    timer = Timer(torch, args.reps, args.warmup)
    results, errors = [], []
    t_start = time.perf_counter()
    for c in cases:
        rows, errs = run_bert_case(torch, _C, ort, timer, args, c, stream.cuda_stream, device_index)
        torch.cuda.empty_cache()
        results += rows
        errors += errs
        for r in rows:
            print(f"SkipLayerNorm {c['dtype']} {c['rows']}x{c['hidden']} {r['path']:9s} {r['kernel']}: "
                  f"kernel {r['kernel_us']} us, events {r['event_us']} us", flush=True)
        for e in errs:
            print(f"ERROR {e}", flush=True)
    if ort is None and not args.no_ort:
        print("note: onnxruntime-gpu not importable (no CUDAExecutionProvider): no ORT rows")
    doc = {"benchmark": "norms_bert", "gpu": torch.cuda.get_device_name(device_index),
           "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
           "versions": versions(torch, ort),
           "method": "per path (_C.norm_set_path): torch.profiler kernel device time, median of --reps calls; "
                     "CUDA events per call, median, queue prefilled; inputs "
                     + ("rotating over >= 200 MB of buffer sets" if args.bert_cold else "one buffer set (hot in L2)"),
           "seconds": round(time.perf_counter() - t_start, 1), "errors": errors, "rows": results}
    return write_results(args.out, doc, errors, bert_table(results))


def table(rows: list[dict]) -> str:
    head = (f"{'op':13s} {'dtype':8s} {'rows x hidden':>13s} {'kernel':9s} {'ours us':>8s} {'torch':>8s} "
            f"{'copy':>8s} {'ort':>8s} {'GB/s':>6s} {'%copy':>6s} {'xtorch':>7s} {'xort':>6s}")
    lines = [head, "-" * len(head)]
    for r in rows:
        miss_frac = any(m.startswith("frac") for m in r["missed"])
        miss_spd = any(m.startswith("speedup") for m in r["missed"])
        kern = r["kernel"].split("<")[0].replace("norm_", "")
        ort = f"{r['ort_us']:8.1f}" if r["ort_us"] is not None else f"{'-':>8s}"
        xort = f"{r['speedup_vs_ort']:6.2f}" if r["speedup_vs_ort"] is not None else f"{'-':>6s}"
        lines.append(
            f"{r['op']:13s} {r['dtype']:8s} {str(r['rows']) + 'x' + str(r['hidden']):>13s} {kern[:9]:9s} "
            f"{r['ours_us']:8.1f} {r['torch_us']:8.1f} {r['copy_us']:8.1f} {ort} {r['ours_gbps']:6.0f} "
            f"{100 * r['frac_of_copy']:5.1f}{'!' if miss_frac else ' '} {r['speedup_vs_torch']:6.2f}"
            f"{'!' if miss_spd else ' '} {xort}")
    lines.append(f"targets: %copy >= {100 * TARGET_FRAC:.0f} for hidden >= 1024; x torch >= 1.2 "
                 f"(LayerNorm, RMSNorm vs HF eager), >= 1.5 (SkipLayerNorm vs add + layer_norm); '!' = missed")
    return "\n".join(lines)


def main(argv=None) -> int:
    args = finish_args(build_parser().parse_args(argv))
    if args.bert:
        return main_bert(args)
    cases = plan(args)
    if args.dry_run:
        print_plan(cases, lambda c: OP_NAMES[c["op"]], 13)
        return 0

    setup = gpu_setup("bench_norms", want_ort=not args.no_ort)
    if setup == 2:
        return 2
    torch, _C, ort, device_index, stream = setup
    timer = Timer(torch, args.reps, args.warmup)
    results, errors = [], []
    t_start = time.perf_counter()
    for c in cases:
        label = f"{OP_NAMES[c['op']]} {c['dtype']} {c['rows']}x{c['hidden']}"
        try:
            row = run_case(torch, _C, ort, timer, c, stream.cuda_stream, device_index)
            torch.cuda.empty_cache()
            results.append(row)
            print(f"{label}: ours {row['ours_us']:.1f} us ({100 * row['frac_of_copy']:.1f}% of copy), "
                  f"torch {row['torch_us']:.1f} us, ort {row['ort_us']} us [{row['ort_note']}]", flush=True)
        except Exception as e:  # noqa: BLE001 - report every failing case, then exit non-zero
            errors.append(f"{label}: {type(e).__name__}: {e}")
            print(f"{label}: ERROR {type(e).__name__}: {e}", flush=True)
    doc = {"benchmark": "norms", "gpu": torch.cuda.get_device_name(device_index),
           "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
           "versions": versions(torch, ort), "floor_tbps": FLOOR_TBPS,
           "method": "CUDA events per call, median; queue prefilled with torch.cuda._sleep so host overhead "
                     "is not counted; inputs rotate over >= 200 MB of buffer sets",
           "seconds": round(time.perf_counter() - t_start, 1), "errors": errors, "rows": results}
    return write_results(args.out, doc, errors, table(results))


if __name__ == "__main__":
    sys.exit(main())
