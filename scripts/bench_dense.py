#!/usr/bin/env python3
"""Benchmark Dense with activation "gelu" (Y = GELU(X @ W + bias), exact erf GELU) per path.

    python3 scripts/bench_dense.py                           # MLP-up shapes (BERT, ViT, GPT-2), fp16 / bf16
    python3 scripts/bench_dense.py --shapes 16384x768x3072 --dtypes float16 --reps 50
    python3 scripts/bench_dense.py --tiles pp_64x128         # only these sm_90a tiles (default: all built)

Shapes are MxKxN. Per case, in the same run (trt_fastops._C.dense_forward on preallocated torch
buffers, the path forced with _C.dense_set_gelu_path):
  gemm_bias       activation "none": cuBLASLt with the BIAS epilogue (the GEMM alone)
  fallback        cuBLASLt BIAS epilogue + our GELU kernel over Y
  auto            what the launcher picks (on an H100 with an sm_90a build: a CUTLASS tile by M, N)
  <tile>          each sm_90a CUTLASS tile the build has (_C.dense_sm90_tiles(); a tuning build,
                  TRT_FASTOPS_DENSE_SM90_TILES=all, has every one), bias + GELU in the epilogue
  torch           torch.addmm + torch.nn.functional.gelu (two kernels: what MatMul + BiasGelu cost)
Timing: CUDA events around every call, median of --reps, the GPU first kept busy so host overhead
is not counted; host_us is the host time per call (Python + launcher), measured separately. Each
path's Y is compared with torch's float32 GELU(X @ W + b) (max error / max |Y|, printed). Writes
bench/results/dense.json (--out) and prints a table (auto and the best tile against torch and
the GEMM alone); exits non-zero only on errors.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.append(str(REPO))  # after site-packages: the installed trt_fastops wins
from scripts._bench_common import driver_version, gpu_setup, write_results  # noqa: E402

SHAPES = ["128x768x3072", "512x768x3072", "1024x768x3072", "4096x768x3072", "6304x768x3072",
          "16384x768x3072"]


def median_us(torch, fn, reps, warmup):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    host_us = (time.perf_counter() - t0) * 1e6 / reps
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    # Busy the GPU for ~2 ms + twice the host time of all calls (~2 GHz cycles), so the host queues
    # every call before the first runs: the events then time the kernels, not the host.
    torch.cuda._sleep(int(min((2000 + 2 * host_us * reps) * 2000, 1e9)))
    for s, e in zip(starts, ends):
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)), host_us


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", nargs="*", default=SHAPES, help="MxKxN")
    ap.add_argument("--dtypes", nargs="*", default=["float16", "bfloat16"])
    ap.add_argument("--tiles", nargs="*", default=None, help="sm_90a tiles to time (default: all built)")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "dense.json")
    args = ap.parse_args()
    setup = gpu_setup("bench_dense", want_ort=False)
    if isinstance(setup, int):
        return setup
    torch, _C, _, device_index, stream = setup
    if not hasattr(_C, "dense_sm90_tiles"):
        print("bench_dense: trt_fastops._C has no dense_sm90_tiles (rebuild)", file=sys.stderr)
        return 2
    built = list(_C.dense_sm90_tiles())
    tiles = built if args.tiles is None else [t for t in args.tiles if t in built]
    paths = ["gemm_bias", "fallback", "auto", *tiles, "torch"]
    print(f"device: {torch.cuda.get_device_name()}, build archs {_C.build_info()['cuda_archs']}, tiles {built}")
    ws = torch.empty(_C.dense_workspace_bytes(), dtype=torch.uint8, device="cuda")
    rows, errors, t_start = [], [], time.perf_counter()
    for dtype in args.dtypes:
        tdt = {"float16": torch.float16, "bfloat16": torch.bfloat16}[dtype]
        for shape in args.shapes:
            m, k, n = map(int, shape.split("x"))
            g = torch.Generator(device="cuda").manual_seed(0)
            x = torch.randn(m, k, device="cuda", dtype=tdt, generator=g)
            w = (torch.randn(k, n, device="cuda", generator=g) / k**0.5).to(tdt)
            b = (0.5 * torch.randn(n, device="cuda", generator=g)).to(tdt)
            y = torch.empty(m, n, device="cuda", dtype=tdt)
            ref = torch.nn.functional.gelu(x.float() @ w.float() + b.float())
            scale = ref.abs().max().item()
            call = (dtype, x.data_ptr(), w.data_ptr(), y.data_ptr(), m, n, k)
            for path in paths:
                if path == "torch":
                    fn = lambda: torch.nn.functional.gelu(torch.addmm(b, x, w))  # noqa: E731
                    name = "torch addmm+gelu"
                else:
                    act = "none" if path == "gemm_bias" else "gelu"
                    _C.dense_set_gelu_path("auto" if path == "gemm_bias" else path)
                    name = _C.dense_kernel_name(*call, bias=b.data_ptr(), activation=act)
                    fn = lambda act=act: _C.dense_forward(  # noqa: E731
                        *call, bias=b.data_ptr(), activation=act, workspace=ws.data_ptr(),
                        workspace_bytes=ws.numel(), stream=stream.cuda_stream)
                try:
                    y.fill_(float("nan"))
                    us, host_us = median_us(torch, fn, args.reps, args.warmup)
                    out = fn() if path == "torch" else (fn(), y)[1]
                    torch.cuda.synchronize()
                    want = ref if path != "gemm_bias" else x.float() @ w.float() + b.float()
                    err = ((out.float() - want).abs().max() / max(scale, 1e-30)).item()
                except RuntimeError as e:
                    errors.append(f"{dtype} {shape} {path}: {e}")
                    print(f"{dtype:9} {shape:15} {path:16} ERROR {e}", flush=True)
                    continue
                finally:
                    _C.dense_set_gelu_path("auto")
                tflops = 2 * m * n * k / us / 1e6
                rows.append({"dtype": dtype, "m": m, "k": k, "n": n, "path": path, "kernel": name,
                             "us": round(us, 2), "tflops": round(tflops, 1), "host_us": round(host_us, 1),
                             "max_rel_err": err})
                print(f"{dtype:9} {shape:15} {path:16} {us:9.1f} us {tflops:7.1f} TFLOP/s host {host_us:6.1f} us "
                      f"err {err:.1e}  {name}", flush=True)
    doc = {"benchmark": "dense", "gpu": torch.cuda.get_device_name(device_index),
           "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
           "versions": {"torch": torch.__version__, "cuda": torch.version.cuda, "driver": driver_version(),
                        "trt_fastops_archs": _C.build_info()["cuda_archs"]},
           "tiles_built": built,
           "method": "CUDA events per call, median of reps; queue prefilled with torch.cuda._sleep so host "
                     "overhead is not counted; one set of buffers per case (weights L2-resident where they fit)",
           "seconds": round(time.perf_counter() - t_start, 1), "errors": errors, "rows": rows,
           "summary": summarize(rows)}
    return write_results(args.out, doc, errors, table(doc["summary"]))


def summarize(rows):
    """Per (dtype, shape): torch, the GEMM alone, fallback, auto and the fastest tile."""
    out = []
    for key in dict.fromkeys((r["dtype"], r["m"], r["k"], r["n"]) for r in rows):
        case = {r["path"]: r for r in rows if (r["dtype"], r["m"], r["k"], r["n"]) == key}
        tiles = [r for p, r in case.items() if p not in ("gemm_bias", "fallback", "auto", "torch")]
        best = min(tiles, key=lambda r: r["us"]) if tiles else None
        us = {p: case[p]["us"] for p in ("gemm_bias", "fallback", "auto", "torch") if p in case}
        auto_us, torch_us = us.get("auto"), us.get("torch")
        out.append({"dtype": key[0], "m": key[1], "k": key[2], "n": key[3], **{f"{p}_us": v for p, v in us.items()},
                    "auto_kernel": case["auto"]["kernel"] if "auto" in case else None,
                    "auto_tflops": case["auto"]["tflops"] if "auto" in case else None,
                    "best_tile": best["path"] if best else None, "best_tile_us": best["us"] if best else None,
                    "x_torch": round(torch_us / auto_us, 2) if auto_us and torch_us else None,
                    "auto_over_best": round(auto_us / best["us"], 2) if best and auto_us else None})
    return out


def table(summary):
    lines = ["| dtype | M x K x N | torch addmm+gelu us | GEMM+bias alone us | fallback us | ours (auto) us | "
             "TFLOP/s | x torch | auto kernel | best tile (us) |", "|---|---|---:|---:|---:|---:|---:|---:|---|---|"]
    for s in summary:
        lines.append(f"| {s['dtype']} | {s['m']}x{s['k']}x{s['n']} | {s.get('torch_us', '-')} | "
                     f"{s.get('gemm_bias_us', '-')} | {s.get('fallback_us', '-')} | {s.get('auto_us', '-')} | "
                     f"{s['auto_tflops']} | {s['x_torch']} | {s['auto_kernel']} | "
                     f"{s['best_tile']} ({s['best_tile_us']}) |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
