#!/usr/bin/env python3
"""Benchmark Dense with activation "gelu" (Y = GELU(X @ W + bias), exact erf GELU) per path.

    python3 scripts/bench_dense.py                           # BERT-base MLP shapes, float16 / bfloat16
    python3 scripts/bench_dense.py --shapes 16384x768x3072 --dtypes float16 --reps 50

Shapes are MxKxN. Per case, in the same run (trt_fastops._C.dense_forward on preallocated torch
buffers, the path forced with _C.dense_set_gelu_path):
  gemm_bias       activation "none": cuBLASLt with the BIAS epilogue (the GEMM alone)
  fallback        cuBLASLt BIAS epilogue + our GELU kernel over Y
  auto            what the launcher picks (on an H100 with an sm_90a build: CUTLASS, tile by M)
  cutlass_small   CUTLASS 64x128x64 ping-pong, bias + GELU in the epilogue
  cutlass_large   CUTLASS 128x256x64 cooperative
  torch           torch.addmm + torch.nn.functional.gelu (two kernels: what MatMul + BiasGelu cost)
Timing: CUDA events around every call, median of --reps, the GPU first kept busy so host overhead
is not counted; host_us is the host time per call (Python + launcher), measured separately. Each
path's Y is compared with torch's float32 GELU(X @ W + b) (max error / max |Y|, printed). Prints
a table; exits non-zero only on errors.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.append(str(REPO))  # after site-packages: the installed trt_fastops wins
from scripts._bench_common import gpu_setup  # noqa: E402

SHAPES = ["128x768x3072", "128x3072x768", "4096x768x3072", "4096x3072x768", "16384x768x3072", "16384x3072x768"]
PATHS = ["gemm_bias", "fallback", "auto", "cutlass_small", "cutlass_large", "torch"]


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
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()
    setup = gpu_setup("bench_dense", want_ort=False)
    if isinstance(setup, int):
        return setup
    torch, _C, _, _, stream = setup
    if not hasattr(_C, "dense_set_gelu_path"):
        print("bench_dense: trt_fastops._C has no dense_set_gelu_path (rebuild)", file=sys.stderr)
        return 2
    print(f"device: {torch.cuda.get_device_name()}, build archs {_C.build_info()['cuda_archs']}")
    ws = torch.empty(_C.dense_workspace_bytes(), dtype=torch.uint8, device="cuda")
    rows = []
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
            for path in PATHS:
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
                    us, host_us = median_us(torch, fn, args.reps, args.warmup)
                    out = fn() if path == "torch" else (fn(), y)[1]
                    torch.cuda.synchronize()
                    want = ref if path != "gemm_bias" else x.float() @ w.float() + b.float()
                    err = ((out.float() - want).abs().max() / max(scale, 1e-30)).item()
                finally:
                    _C.dense_set_gelu_path("auto")
                tflops = 2 * m * n * k / us / 1e6
                rows.append((dtype, shape, path, name, us, tflops, host_us, err))
                print(f"{dtype:9} {shape:15} {path:14} {us:9.1f} us {tflops:7.1f} TFLOP/s host {host_us:6.1f} us "
                      f"err {err:.1e}  {name}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
