#!/usr/bin/env python3
"""Benchmark trt_fastops' convolution (cuDNN path and own kernels) against PyTorch.

    python3 scripts/bench_conv.py                       # full run (H100: a few minutes)
    python3 scripts/bench_conv.py --dry-run             # the cases with shapes and GFLOP; needs no GPU
    python3 scripts/bench_conv.py --groups resnet50 --dtypes float16 --reps 50

Cases (NCHW / NCDHW, float16 and bfloat16): the conv layers of ResNet-50 (torchvision v1.5,
stride on the 3x3) at batch 32, plus grouped (RegNet / ResNeXt), depthwise (MobileNetV2 3x3,
ConvNeXt 7x7), dilated (DeepLab), 3-D (R3D-style, one dilated) and ConvTranspose (DCGAN-style)
cases. Every case has a bias and no activation (what torch.nn.functional.conv* computes).
Per case, in the same run:
  torch     torch.nn.functional.conv{1,2,3}d / conv_transpose2d, torch.backends.cudnn.benchmark on
  cudnn     trt_fastops._C.conv_forward, backend 'cudnn' (cuDNN through cudnn-frontend, autotuned plans)
  auto      trt_fastops._C.conv_forward, backend 'auto' (the planner's choice: cuDNN's autotuned best
            plan, or our kernel where planning timed it faster; auto_plan says which and both times)
  fallback  trt_fastops._C.conv_forward, backend 'fallback' (trt_fastops' own kernels)
plus host costs of a plan-cache hit on the automatic path: conv_prepare alone and conv_prepare +
conv_run (enqueue). The cuDNN hit path replays a cached CUDA graph of the execution when the
pointers were seen before (conv_cudnn.h): the host rows count how many of the measured calls did
(host_graph_launches of host_calls; TRT_FASTOPS_CONV_GRAPH_REPLAY=0 measures the direct
cudnnBackendExecute instead).
Timing: CUDA events around `reps` back-to-back calls after the GPU was kept busy
(torch.cuda._sleep) long enough for the host to queue them all, so host overhead is not in the
GPU time; the median of --trials such batches. Every implementation's output is checked against
a float64 reference first. Writes bench/results/conv.json and prints a table last. Exits
non-zero only on errors (including a wrong result), not on missed targets ('!' in the table).

Targets (issue 3): cudnn and auto >= 0.95x torch on every case; host overhead of a cache hit < 10 us;
fallback >= 0.5x cudnn's throughput on the ResNet-50 layers, and faster than torch wherever
torch falls back to a slow path (reported as fallback/torch for the non-ResNet cases).
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.append(str(REPO))  # after site-packages: the installed trt_fastops wins

from scripts._bench_common import driver_version  # noqa: E402
from scripts._conv_torch import ConvCase as C  # noqa: E402

TARGET_CUDNN_VS_TORCH = 0.95
TARGET_AUTO_VS_TORCH = 0.95
TARGET_FALLBACK_VS_CUDNN = 0.5
TARGET_HOST_US = 10.0


def _resnet50(batch: int = 32) -> list:
    def conv(name, cin, cout, hw, k, s=1):
        p = k // 2
        return C(name, batch, cin, cout, (hw, hw), (k, k), stride=(s, s), pads_begin=(p, p), pads_end=(p, p))

    return [
        conv("conv1_7x7s2", 3, 64, 224, 7, 2),
        conv("l1_1x1_64_64", 64, 64, 56, 1),
        conv("l1_3x3_64", 64, 64, 56, 3),
        conv("l1_1x1_64_256", 64, 256, 56, 1),
        conv("l1_1x1_256_64", 256, 64, 56, 1),
        conv("l2_1x1_256_128", 256, 128, 56, 1),
        conv("l2_3x3s2_128", 128, 128, 56, 3, 2),
        conv("l2_1x1_128_512", 128, 512, 28, 1),
        conv("l2_down_1x1s2_256_512", 256, 512, 56, 1, 2),
        conv("l2_1x1_512_128", 512, 128, 28, 1),
        conv("l2_3x3_128", 128, 128, 28, 3),
        conv("l3_1x1_512_256", 512, 256, 28, 1),
        conv("l3_3x3s2_256", 256, 256, 28, 3, 2),
        conv("l3_1x1_256_1024", 256, 1024, 14, 1),
        conv("l3_down_1x1s2_512_1024", 512, 1024, 28, 1, 2),
        conv("l3_1x1_1024_256", 1024, 256, 14, 1),
        conv("l3_3x3_256", 256, 256, 14, 3),
        conv("l4_1x1_1024_512", 1024, 512, 14, 1),
        conv("l4_3x3s2_512", 512, 512, 14, 3, 2),
        conv("l4_1x1_512_2048", 512, 2048, 7, 1),
        conv("l4_down_1x1s2_1024_2048", 1024, 2048, 14, 1, 2),
        conv("l4_1x1_2048_512", 2048, 512, 7, 1),
        conv("l4_3x3_512", 512, 512, 7, 3),
    ]


GROUPS = {
    "resnet50": _resnet50(),
    "grouped": [
        C("regnety_3x3_g4", 32, 224, 224, (28, 28), (3, 3), group=4, pads_begin=(1, 1), pads_end=(1, 1)),
        C("regnetx_3x3_g18", 32, 432, 432, (14, 14), (3, 3), group=18, pads_begin=(1, 1), pads_end=(1, 1)),
        C("resnext_3x3_g32", 32, 256, 256, (28, 28), (3, 3), group=32, pads_begin=(1, 1), pads_end=(1, 1)),
    ],
    "depthwise": [
        C("mbv2_dw3x3_144", 32, 144, 144, (56, 56), (3, 3), group=144, pads_begin=(1, 1), pads_end=(1, 1)),
        C("mbv2_dw3x3s2_192", 32, 192, 192, (28, 28), (3, 3), group=192, stride=(2, 2), pads_begin=(1, 1),
          pads_end=(1, 1)),
        C("convnext_dw7x7_96", 32, 96, 96, (56, 56), (7, 7), group=96, pads_begin=(3, 3), pads_end=(3, 3)),
        C("convnext_dw7x7_384", 32, 384, 384, (14, 14), (7, 7), group=384, pads_begin=(3, 3), pads_end=(3, 3)),
    ],
    "dilated": [
        C("deeplab_3x3_d2", 32, 256, 256, (33, 33), (3, 3), dilation=(2, 2), pads_begin=(2, 2), pads_end=(2, 2)),
        C("deeplab_3x3_d6", 32, 256, 256, (33, 33), (3, 3), dilation=(6, 6), pads_begin=(6, 6), pads_end=(6, 6)),
        C("dilated_3x3_d2_512", 32, 512, 512, (28, 28), (3, 3), dilation=(2, 2), pads_begin=(2, 2), pads_end=(2, 2)),
    ],
    "conv3d": [
        C("r3d_3x3x3_64", 4, 64, 64, (8, 56, 56), (3, 3, 3), pads_begin=(1, 1, 1), pads_end=(1, 1, 1)),
        C("r3d_3x3x3s2_128", 4, 64, 128, (8, 56, 56), (3, 3, 3), stride=(2, 2, 2), pads_begin=(1, 1, 1),
          pads_end=(1, 1, 1)),
        C("conv3d_3x3x3_d2_64", 4, 64, 64, (8, 28, 28), (3, 3, 3), dilation=(2, 2, 2), pads_begin=(2, 2, 2),
          pads_end=(2, 2, 2)),
    ],
    "convT": [
        C("dcgan_convT_4x4s2_256", 32, 256, 128, (16, 16), (4, 4), stride=(2, 2), pads_begin=(1, 1),
          pads_end=(1, 1), transpose=True),
        C("unet_convT_2x2s2_256", 32, 256, 128, (28, 28), (2, 2), stride=(2, 2), transpose=True),
    ],
}
DTYPES = ["float16", "bfloat16"]


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", nargs="+", choices=list(GROUPS), default=list(GROUPS))
    ap.add_argument("--cases", nargs="+", default=None, help="only these case names")
    ap.add_argument("--dtypes", nargs="+", choices=DTYPES + ["float32"], default=DTYPES)
    ap.add_argument("--reps", type=int, default=20, help="calls per timed batch")
    ap.add_argument("--trials", type=int, default=5, help="timed batches per measurement (median)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--no-fallback", action="store_true", help="skip the fallback kernels")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "conv.json")
    ap.add_argument("--dry-run", action="store_true", help="print the cases (shapes, GFLOP) and exit; no GPU")
    return ap


def plan(args) -> list:
    out = []
    for group in args.groups:
        for case in GROUPS[group]:
            if args.cases and case.name not in args.cases:
                continue
            for dtype in args.dtypes:
                out.append((group, case, dtype))
    return out


# ---------------------------------------------------------------------------------------


class Timer:
    """GPU microseconds per call: events around `reps` calls queued behind a busy GPU; median of trials."""

    def __init__(self, torch, reps: int, trials: int, warmup: int):
        self.torch, self.reps, self.trials, self.warmup = torch, reps, trials, warmup
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(1000)
        s.record()
        torch.cuda._sleep(10_000_000)
        e.record()
        torch.cuda.synchronize()
        self.cycles_per_us = 10_000_000 / max(s.elapsed_time(e) * 1e3, 1.0)

    def __call__(self, fn) -> tuple:
        torch = self.torch
        for _ in range(self.warmup):
            fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        once_us = (time.perf_counter() - t0) * 1e6
        times, host_bound = [], False
        for _ in range(self.trials):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            # generous prefill: the host must finish queueing before the GPU drains
            prefill_us = min(2000.0 + 3.0 * once_us * self.reps, 400_000.0)
            torch.cuda._sleep(int(prefill_us * self.cycles_per_us))
            start.record()
            q0 = time.perf_counter()
            for _ in range(self.reps):
                fn()
            queued_us = (time.perf_counter() - q0) * 1e6
            end.record()
            torch.cuda.synchronize()
            host_bound |= queued_us > prefill_us
            times.append(start.elapsed_time(end) * 1e3 / self.reps)
        return statistics.median(times), host_bound


def versions(torch, _C) -> dict:
    import trt_fastops

    stats = _C.conv_cache_stats()
    return {"torch": torch.__version__, "cuda": torch.version.cuda,
            "torch_cudnn": torch.backends.cudnn.version(), "trt_fastops": trt_fastops.__version__,
            "trt_fastops_cudnn": stats["cudnn_version"], "trt_fastops_cudnn_status": stats["cudnn_status"],
            "driver": driver_version()}


def torch_fn(torch, case, x, w, b):
    F = torch.nn.functional
    if case.transpose:
        f = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[case.spatial - 1]
        assert case.pb == case.pe, "torch needs symmetric pads"
        return lambda: f(x, w, b, stride=case.strides, padding=case.pb, output_padding=case.op, groups=case.group,
                         dilation=case.dilations)
    f = (F.conv1d, F.conv2d, F.conv3d)[case.spatial - 1]
    assert case.pb == case.pe, "torch needs symmetric pads"
    return lambda: f(x, w, b, stride=case.strides, padding=case.pb, dilation=case.dilations, groups=case.group)


# Host cost of conv_prepare (hit) + conv_run (enqueue): HOST_ITERS calls queued behind a GPU kept
# busy for HOST_PREFILL_US, median of HOST_BATCHES batches. HOST_ITERS stays far below the launch
# queue depth: the first H100 run queued 200 calls behind one 50 ms sleep, and its 250-300 us rows
# fit "the queue filled after ~170 calls (~90 for the grouped ones), then the host waited for the
# sleep and the GPU" (50 ms + the remaining calls' GPU time, / 200) -- not host work.
HOST_ITERS = 32
HOST_BATCHES = 5
HOST_PREFILL_US = 20_000


def host_forward_us(torch, _C, timer, call) -> tuple:
    """(median host us per call, CUDA-graph launches (cuDNN's or the fallback's) during the measured calls)."""
    def graph_launches():
        s = _C.conv_cache_stats()
        return s["graph_launches"] + s["fallback_graph_launches"]

    samples = []
    launches = graph_launches()
    for _ in range(HOST_BATCHES):
        torch.cuda._sleep(int(HOST_PREFILL_US * timer.cycles_per_us))
        samples.append(_C.conv_forward_overhead_us(**call, iters=HOST_ITERS))
        torch.cuda.synchronize()
    # conv_forward_overhead_us runs one prepare (no execution) before its timed loop
    return statistics.median(samples), graph_launches() - launches


def run_case(torch, _C, timer, group, case, dtype, stream_ptr, with_fallback) -> dict:
    from scripts._conv_torch import Workspaces, conv_kwargs, make_inputs, max_error_ratio, reference, run

    dt = getattr(torch, dtype)
    x, w, b = make_inputs(torch, case, dtype, seed=len(case.name) * 31 + case.c_out)
    ref = reference(torch, case, x, w, b)
    ref_abs = reference(torch, case, x, w, b, absolute=True)
    row = dict(group=group, case=case.name, dtype=dtype, shape=case.describe(),
               gflop=round(2 * case.macs() / 1e9, 3))
    ws = Workspaces(torch)

    tf = torch_fn(torch, case, x, w, b)
    y_t = tf()
    torch.cuda.synchronize()
    row["torch_err_ratio"] = round(max_error_ratio(torch, y_t, ref, ref_abs, dtype), 3)
    row["torch_us"], hb = timer(tf)
    row["torch_host_bound"] = hb

    for label in ("cudnn", "auto", "fallback"):
        if label == "fallback" and not with_fallback:
            continue
        y = torch.full(case.y_shape(), float("nan"), dtype=dt, device="cuda")
        try:
            info = run(torch, _C, case, dtype, x, w, b, y, backend=label, stream=stream_ptr, workspaces=ws)
        except RuntimeError as e:
            if label != "cudnn" or "cuDNN cannot run" not in str(e):
                raise
            row["cudnn_used"], row["cudnn_refusal"] = False, str(e)  # no cudnn column for this case
            continue
        torch.cuda.synchronize()
        ratio = max_error_ratio(torch, y, ref, ref_abs, dtype)
        if not ratio <= 1.0:
            raise RuntimeError(f"{label} ({info['description']}) differs from float64: {ratio:.3g} x the bound")
        kw = conv_kwargs(case, dtype, x, w, b, y, stream=stream_ptr, backend=label)
        buf = ws.get(info["workspace_bytes"], stream_ptr)
        call = dict(kw, workspace=buf.data_ptr(), workspace_bytes=buf.numel())
        us, hb = timer(lambda: _C.conv_forward(**call))
        row[f"{label}_us"] = us
        row[f"{label}_host_bound"] = hb
        row[f"{label}_plan"] = info["description"]
        row[f"{label}_workspace_bytes"] = info["workspace_bytes"]
        row[f"{label}_err_ratio"] = round(ratio, 3)
        if label == "cudnn":
            row["cudnn_used"] = info["cudnn"]
            row["cudnn_refusal"] = info["cudnn_refusal"]
            row["cudnn_separate_epilogue"] = info["separate_epilogue"]
            row["cudnn_graph_replay"] = info["graph_replay"]
        elif label == "auto":
            # The planner's choice and the planning-time medians it was made from (0: not timed).
            row["auto_cudnn"] = info["cudnn"]
            row["auto_planned_cudnn_us"] = round(info["cudnn_us"], 2)
            row["auto_planned_fallback_us"] = round(info["fallback_us"], 2)
            row["auto_graph_replay"] = info["graph_replay"]
            # Host cost of a hit on the path users get.
            row["host_prepare_us"] = round(_C.conv_prepare_overhead_us(**kw, iters=5000), 3)
            host_us, launches = host_forward_us(torch, _C, timer, call)
            row["host_prepare_run_us"] = round(host_us, 3)
            row["host_calls"] = HOST_BATCHES * HOST_ITERS
            row["host_graph_launches"] = launches
        else:
            # The same hit path with our kernel instead of cuDNN's execute: the difference to
            # host_prepare_run_us is what cuDNN's enqueue costs beyond a kernel launch.
            row["host_fallback_prepare_run_us"] = round(host_forward_us(torch, _C, timer, call)[0], 3)

    tflops = lambda us: round(2 * case.macs() / (us * 1e-6) / 1e12, 2)  # noqa: E731
    speedup = lambda num, den: round(row[num] / row[den], 3) if num in row and den in row else None  # noqa: E731
    for k in ("torch", "cudnn", "auto", "fallback"):
        if f"{k}_us" in row:
            row[f"{k}_tflops"] = tflops(row[f"{k}_us"])
            row[f"{k}_us"] = round(row[f"{k}_us"], 2)
    row["cudnn_vs_torch"] = speedup("torch_us", "cudnn_us")
    row["auto_vs_torch"] = speedup("torch_us", "auto_us")
    if "fallback_us" in row:
        row["fallback_vs_cudnn"] = speedup("cudnn_us", "fallback_us")
        row["fallback_vs_torch"] = speedup("torch_us", "fallback_us")
    missed = []
    if row["cudnn_vs_torch"] is not None and row["cudnn_vs_torch"] < TARGET_CUDNN_VS_TORCH:
        missed.append(f"cudnn_vs_torch < {TARGET_CUDNN_VS_TORCH}")
    if row["auto_vs_torch"] < TARGET_AUTO_VS_TORCH:
        missed.append(f"auto_vs_torch < {TARGET_AUTO_VS_TORCH}")
    if row["host_prepare_run_us"] >= TARGET_HOST_US:
        missed.append(f"host_prepare_run_us >= {TARGET_HOST_US}")
    if group == "resnet50" and row.get("fallback_vs_cudnn") is not None and \
            row["fallback_vs_cudnn"] < TARGET_FALLBACK_VS_CUDNN:
        missed.append(f"fallback_vs_cudnn < {TARGET_FALLBACK_VS_CUDNN}")
    row["missed"] = missed
    return row


def table(rows: list) -> str:
    head = (f"{'case':26s} {'dtype':8s} {'GFLOP':>7s} {'torch us':>9s} {'cudnn us':>9s} {'auto us':>9s} "
            f"{'fallbk us':>9s} {'TF/s cud':>8s} {'TF/s fb':>7s} {'cud/tor':>8s} {'auto/tor':>8s} {'fb/cud':>7s} "
            f"{'fb/tor':>7s} {'host us':>8s}  auto plan")
    lines = [head, "-" * len(head)]
    for r in rows:
        m = " ".join(r["missed"])
        fb = lambda k, f: f"{r[k]:{f}}" if r.get(k) is not None else "-"  # noqa: E731
        flag = lambda key: "!" if key in m else " "  # noqa: E731
        lines.append(
            f"{r['case'][:26]:26s} {r['dtype']:8s} {r['gflop']:7.1f} {r['torch_us']:9.1f} "
            f"{fb('cudnn_us', '9.1f'):>9s} {r['auto_us']:9.1f} {fb('fallback_us', '9.1f'):>9s} "
            f"{fb('cudnn_tflops', '8.1f'):>8s} {fb('fallback_tflops', '7.1f'):>7s} "
            f"{fb('cudnn_vs_torch', '7.2f'):>7s}{flag('cudnn_vs_torch')} "
            f"{r['auto_vs_torch']:7.2f}{flag('auto_vs_torch')} "
            f"{fb('fallback_vs_cudnn', '6.2f'):>6s}{flag('fallback_vs_cudnn')} "
            f"{fb('fallback_vs_torch', '7.2f'):>7s} {r['host_prepare_run_us']:7.2f}{flag('host')} "
            f" {r['auto_plan'][:110]}")
    lines.append(f"targets: cud/tor and auto/tor >= {TARGET_CUDNN_VS_TORCH} / {TARGET_AUTO_VS_TORCH}; fb/cud >= "
                 f"{TARGET_FALLBACK_VS_CUDNN} on resnet50; host (automatic path: conv_prepare hit + conv_run "
                 f"enqueue) < {TARGET_HOST_US} us; '!' = missed. fb/tor > 1: the fallback beats torch. auto: the "
                 f"planner's choice (cuDNN's best or our kernel, by timing at planning).")
    return "\n".join(lines)


def host_summary(rows: list) -> str:
    """The plan-cache hit's host cost over the rows (cuDNN path = the automatic one)."""
    def stats(key):
        v = sorted(r[key] for r in rows if r.get(key) is not None)
        return (f"median {statistics.median(v):.2f} us, range {v[0]:.2f}-{v[-1]:.2f}" if v else "not measured"), v
    prep, _ = stats("host_prepare_us")
    run, v = stats("host_prepare_run_us")
    fb, _ = stats("host_fallback_prepare_run_us")
    met = sum(1 for x in v if x < TARGET_HOST_US)
    cudnn_rows = [r for r in rows if r.get("auto_cudnn")]  # the automatic path ran cuDNN
    replayed = sum(1 for r in cudnn_rows if r.get("host_graph_launches", 0) >= r.get("host_calls", 1))
    ours = [r for r in rows if r.get("auto_cudnn") is False]
    ours_replayed = sum(1 for r in ours if r.get("host_graph_launches", 0) >= r.get("host_calls", 1))
    picked_fallback = sum(1 for r in rows if r.get("auto_cudnn") is False)
    return (f"host cost of a plan-cache hit (target < {TARGET_HOST_US} us per call for conv_prepare + conv_run):\n"
            f"  conv_prepare alone (key + LRU lookup):           {prep}\n"
            f"  conv_prepare + conv_run (automatic path):        {run}; {met} of {len(v)} rows under target\n"
            f"  conv_prepare + conv_run (our kernels, no cuDNN): {fb}\n"
            f"  rows whose measured calls were all CUDA-graph launches: cuDNN {replayed} of {len(cudnn_rows)}, "
            f"our kernels {ours_replayed} of {len(ours)}\n"
            f"  rows where the automatic path runs our kernel (timed faster than cuDNN's best, or cuDNN "
            f"refused): {picked_fallback} of {len(rows)}")


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    cases = plan(args)
    if args.dry_run:
        print(f"{'group':9s} {'case':26s} {'dtype':8s} {'GFLOP':>8s}  shape")
        for group, case, dtype in cases:
            print(f"{group:9s} {case.name:26s} {dtype:8s} {2 * case.macs() / 1e9:8.2f}  {case.describe()} "
                  f"-> y{list(case.y_shape())}")
        return 0
    try:
        import torch
        from trt_fastops import _C
    except ImportError as e:
        print(f"bench_conv: cannot run: {e}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available() or not hasattr(_C, "conv_forward"):
        print("bench_conv: cannot run: needs a CUDA device and the conv bindings in trt_fastops._C", file=sys.stderr)
        return 2
    from scripts._conv_torch import point_at_cudnn

    point_at_cudnn()
    torch.backends.cudnn.benchmark = True
    device_index = torch.cuda.current_device()
    stream = torch.cuda.Stream(device=device_index)
    torch.cuda.set_stream(stream)
    timer = Timer(torch, args.reps, args.trials, args.warmup)
    results, errors = [], []
    t_start = time.perf_counter()
    for group, case, dtype in cases:
        label = f"{case.name} {dtype}"
        try:
            row = run_case(torch, _C, timer, group, case, dtype, stream.cuda_stream, not args.no_fallback)
            results.append(row)
            print(f"{label}: torch {row['torch_us']:.1f} us, cudnn {row.get('cudnn_us')} us, auto "
                  f"{row['auto_us']:.1f} us [{row['auto_plan']}], fallback {row.get('fallback_us')} us, host "
                  f"{row['host_prepare_run_us']} us", flush=True)
        except Exception as e:  # noqa: BLE001 - report every failing case, then exit non-zero
            errors.append(f"{label}: {type(e).__name__}: {e}")
            print(f"{label}: ERROR {type(e).__name__}: {e}", flush=True)
        torch.cuda.empty_cache()
    doc = {"benchmark": "conv", "gpu": torch.cuda.get_device_name(device_index),
           "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
           "versions": versions(torch, _C),
           "method": f"CUDA events around {args.reps} queued calls behind torch.cuda._sleep (host overhead not "
                     f"counted), median of {args.trials} batches; torch with cudnn.benchmark=True; every output "
                     "checked against a float64 reference",
           "targets": {"cudnn_vs_torch": TARGET_CUDNN_VS_TORCH, "auto_vs_torch": TARGET_AUTO_VS_TORCH,
                       "fallback_vs_cudnn_resnet50": TARGET_FALLBACK_VS_CUDNN, "host_us": TARGET_HOST_US},
           "host_summary": host_summary(results).splitlines() if results else [],
           "cache": _C.conv_cache_stats(), "seconds": round(time.perf_counter() - t_start, 1), "errors": errors,
           "rows": results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {args.out}")
    for e in errors:
        print(f"ERROR {e}")
    if results:
        print(table(results))
        print(host_summary(results))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
