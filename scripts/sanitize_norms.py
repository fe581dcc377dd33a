#!/usr/bin/env python3
"""Small, fast run of every norm kernel variant with result checks, for compute-sanitizer.

    compute-sanitizer --tool memcheck  python3 scripts/sanitize_norms.py
    compute-sanitizer --tool racecheck python3 scripts/sanitize_norms.py
    compute-sanitizer --tool synccheck python3 scripts/sanitize_norms.py
    compute-sanitizer --tool initcheck python3 scripts/sanitize_norms.py

Covers the row, warp (power-of-two and exactly fitting items), block,
generic-smem and generic-multipass kernels, each dtype, with skip (full and
broadcast), bias, beta, scalar gamma/beta, sum/mean/rstd outputs and misaligned
pointers; a case's "path" option forces that path (_C.norm_set_path) for its run. Exit status 0 when every case matches a float64
reference, 1 on a mismatch or a wrong kernel choice, 2 when torch/CUDA/_C are
missing. Prints one line per case; --list prints the cases without running.
"""
from __future__ import annotations

import argparse
import math
import sys
import zlib
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))  # the installed trt_fastops wins

# (name, kind, dtype, rows, cols, options, expected kernel prefix)
CASES = [
    ("row-768", "layer", "float16", 37, 768, dict(skip="bcast", bias=True, sum=True, stats=True), "norm_row<float16,vec8,block96>"),
    ("row-rms", "rms", "bfloat16", 9, 1000, dict(skip="full", sum=True, stats=True), "norm_row<bfloat16,vec8,block128>"),
    ("row-partial", "layer", "float16", 6, 520, dict(path="row", bias=True, stats=True), "norm_row<float16,vec8,block96>"),
    ("row-f32", "layer", "float32", 5, 768, dict(path="row", gamma_scalar=True, beta_scalar=True, stats=True), "norm_row<float32,vec4,block192>"),
    ("row-one-warp", "layer", "float16", 5, 128, dict(path="row", skip="full", stats=True), "norm_row<float16,vec8,block32>"),
    # more rows than the 65536-CTA grid: a CTA runs two rows, alternating its shared arrays
    ("row-grid-stride", "layer", "float16", 65536 + 35, 264, dict(path="row", skip="bcast", bias=True, stats=True), "norm_row<float16,vec8,block64>"),
    ("row-grid-stride-3w", "rms", "float16", 65536 + 35, 768, dict(path="row", bias=True, stats=True), "norm_row<float16,vec8,block96>"),
    ("warp", "layer", "float16", 9, 1024, dict(path="warp"), "norm_warp<float16,vec8,items4"),
    ("warp-skip-stats", "layer", "bfloat16", 9, 512, dict(path="warp", skip="full", sum=True, stats=True), "norm_warp<bfloat16,vec8,items2"),
    ("warp-rms-bias", "rms", "float32", 9, 128, dict(bias=True), "norm_warp<float32,vec4,items1"),
    ("warp-fit-768", "layer", "float16", 9, 768, dict(path="warp_fit", skip="bcast", bias=True, sum=True, stats=True), "norm_warp<float16,vec8,items3"),
    ("block-forced-768", "rms", "float16", 9, 768, dict(path="block", skip="full", sum=True), "norm_block<float16,vec8,items4,block64>"),
    ("generic-forced-768", "layer", "bfloat16", 9, 768, dict(path="generic", skip="bcast", bias=True, stats=True), "norm_generic_smem<bfloat16,block128>"),
    ("block", "layer", "float16", 5, 4096, dict(stats=True), "norm_block<float16,vec8,items4,block128>"),
    ("block-bcast-skip", "layer", "bfloat16", 6, 8192, dict(skip="bcast", bias=True, sum=True), "norm_block<bfloat16,vec8,items4,block256>"),
    ("block-rms", "rms", "float32", 3, 16384, dict(skip="full", sum=True, stats=True), "norm_block<float32,vec4,items4,block1024>"),
    ("block-scalar", "layer", "float16", 4, 2048, dict(gamma_scalar=True, beta_scalar=True), "norm_block<float16,vec8,items4,block64>"),
    ("block-partial", "layer", "float32", 4, 1000, dict(stats=True), "norm_block<float32,vec4,items4,block64>"),
    ("smem-small", "layer", "float16", 7, 7, dict(stats=True), "norm_generic_smem<float16,block128>"),
    ("smem-misaligned", "layer", "bfloat16", 6, 4096, dict(skip="full", bias=True, sum=True, stats=True,
                                                           misalign=("x", "skip", "bias", "gamma", "beta", "y", "sum")),
     "norm_generic_smem<bfloat16,block128>"),
    ("smem-odd-rms", "rms", "float32", 5, 16385, dict(skip="bcast", stats=True), "norm_generic_smem<float32,block512>"),
    ("smem-large", "layer", "float16", 2, 50001, dict(stats=True), "norm_generic_smem<float16,block512>"),
    ("multipass", "layer", "float16", 2, 65536, dict(skip="full", sum=True, stats=True), "norm_generic_multipass<float16,block512>"),
    ("multipass-rms", "rms", "bfloat16", 2, 70001, dict(bias=True, misalign=("x",)), "norm_generic_multipass<bfloat16,block512>"),
    ("multipass-f32", "layer", "float32", 2, 100003, dict(gamma_scalar=True), "norm_generic_multipass<float32,block512>"),
]

TOL = {"float32": 1e-4, "float16": 2e-3, "bfloat16": 1.6e-2}


def run_case(torch, _C, name, kind, dtype, rows, cols, opt, expect) -> list[str]:
    dt = getattr(torch, dtype)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(zlib.crc32(name.encode()))
    mis = set(opt.get("misalign", ()))

    def make(shape, mean, scale, key):
        n = math.prod(shape)
        off = 1 if key in mis else 0
        t = torch.empty(n + 8, dtype=dt, device="cuda")[off:off + n].view(shape)
        t.copy_(torch.randn(shape, generator=gen, device="cuda") * scale + mean)
        return t

    def nan(shape, key, dtype_=None):
        n = math.prod(shape)
        off = 1 if key in mis else 0
        t = torch.empty(n + 8, dtype=dtype_ or dt, device="cuda")[off:off + n].view(shape)
        return t.fill_(float("nan"))

    x = make((rows, cols), 1.5, 2.0, "x")
    skip_rows = {"full": rows, "bcast": 1, None: 0}[opt.get("skip")]
    sk = make((skip_rows, cols), -0.5, 1.0, "skip") if skip_rows else None
    bi = make((cols,), 0.2, 0.3, "bias") if opt.get("bias") else None
    g = make((1,) if opt.get("gamma_scalar") else (cols,), 1.0, 0.4, "gamma")
    b = make((1,) if opt.get("beta_scalar") else (cols,), 0.0, 0.4, "beta") if kind == "layer" else None
    y = nan((rows, cols), "y")
    s_out = nan((rows, cols), "sum") if opt.get("sum") else None
    mean_out = nan((rows,), "-", torch.float32) if opt.get("stats") and kind == "layer" else None
    rstd_out = nan((rows,), "-", torch.float32) if opt.get("stats") else None

    def p(t):
        return 0 if t is None else t.data_ptr()

    args = (kind, dtype, p(x), p(g), p(y), rows, cols)
    kw = dict(skip=p(sk), skip_rows=skip_rows, bias=p(bi), beta=p(b), gamma_scalar=bool(opt.get("gamma_scalar")),
              beta_scalar=bool(opt.get("beta_scalar")), sum_out=p(s_out), mean_out=p(mean_out),
              rstd_out=p(rstd_out), epsilon=1e-5, stream=torch.cuda.current_stream().cuda_stream)
    errors = []
    prev = _C.norm_set_path(opt.get("path", "auto"))
    try:
        kernel = _C.norm_kernel_name(*args, **kw)
        if not kernel.startswith(expect):
            errors.append(f"kernel {kernel}, expected {expect}")
        _C.norm_forward(*args, **kw)
        torch.cuda.synchronize()
    finally:
        _C.norm_set_path(prev)

    s = x.double()
    if sk is not None:
        s = s + sk.double().repeat(rows // skip_rows, 1)
    if bi is not None:
        s = s + bi.double()
    mean = s.mean(1, keepdim=True) if kind == "layer" else torch.zeros_like(s[:, :1])
    rstd = torch.rsqrt(((s - mean) ** 2).mean(1, keepdim=True) + 1e-5)
    ref = (s - mean) * rstd * g.double() + (b.double() if b is not None else 0.0)

    def check(label, got, want, tol):
        err = ((got.double() - want).abs() / (1.0 + want.abs())).max().item()
        if not err <= tol:  # NaN-safe
            errors.append(f"{label}: max scaled error {err:.3g} > {tol:g}")

    check("y", y, ref, TOL[dtype])
    if s_out is not None:
        check("sum", s_out, s, TOL[dtype])
    if mean_out is not None:
        check("mean", mean_out, mean[:, 0], 1e-4)
    if rstd_out is not None:
        check("rstd", rstd_out, rstd[:, 0], 1e-4)
    return [f"{name} ({kernel}): {e}" for e in errors]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--list", action="store_true", help="print the cases and exit")
    ap.add_argument("-k", default="", help="run only cases whose name contains this")
    args = ap.parse_args(argv)
    cases = [c for c in CASES if args.k in c[0]]
    if args.list:
        for name, kind, dtype, rows, cols, opt, expect in cases:
            print(f"{name:18s} {kind:5s} {dtype:8s} {rows:5d} x {cols:<7d} {opt} -> {expect}")
        return 0
    try:
        import torch
        from trt_fastops import _C
    except ImportError as e:
        print(f"sanitize_norms: cannot run: {e}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("sanitize_norms: cannot run: no CUDA device", file=sys.stderr)
        return 2
    failures: list[str] = []
    failed = 0
    for case in cases:
        errs = run_case(torch, _C, *case)
        print(f"{'FAIL' if errs else 'ok  '} {case[0]}", flush=True)
        failures += errs
        failed += bool(errs)
    for f in failures:
        print("  " + f)
    print(f"sanitize_norms: {len(cases) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
