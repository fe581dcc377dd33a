#!/usr/bin/env python3
"""Small, fast run of every trt_fastops conv fallback kernel variant with result checks,
for compute-sanitizer (the cuDNN path is not run: its kernels are not ours).

    compute-sanitizer --tool memcheck  python3 scripts/sanitize_conv.py
    compute-sanitizer --tool racecheck python3 scripts/sanitize_conv.py
    compute-sanitizer --tool synccheck python3 scripts/sanitize_conv.py
    compute-sanitizer --tool initcheck python3 scripts/sanitize_conv.py

Covers, for float16, bfloat16 and float32, Conv and ConvTranspose: the direct kernel, the
tensor-core implicit GEMMs with BN 64 and 128 (16-bit types; gathering from NCHW, pipelined on a
channels-last copy of x or straight from x for 1x1 convs, with and without split-K) and the
float32 FFMA GEMM, each with weight packing; the depthwise kernel (each unrolled variant and the
generic one, column tiles, row bands, several planes per tile; whole planes through the staged
cp.async path, and through the register path where x is too misaligned for it); bias / no bias; every
activation; 1-D, 2-D, 3-D; groups, depthwise, dilation, stride, asymmetric pads, output_padding; K not a multiple of the tile depth;
partial M / N tiles; misaligned x / w / bias / y; no input channels; plus the in-place
bias+activation kernel that follows cuDNN when it cannot fuse (exercised through a forced
GEMM / direct run being compared, and directly with backend 'auto' only when --with-cudnn).
--autotune plans with TRT_FASTOPS_CONV_AUTOTUNE=1: the cases on backend 'fallback' then time (so
run) every variant of their kernel (the pipelined GEMM's tile widths and split-K factors, the staged
depthwise tile sizes and its register path) before keeping one; only the kernel family is checked.
Exit status 0 when every case matches a float64 reference, 1 on a mismatch or an unexpected
kernel choice, 2 when torch / CUDA / the conv bindings are missing. --list prints the cases.
"""
from __future__ import annotations

import argparse
import os
import sys
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.append(str(REPO))  # after site-packages: the installed trt_fastops wins

from scripts._conv_torch import ConvCase as C  # noqa: E402

# (case, backend, dtypes, expected kernel prefix per dtype group: (16-bit, float32))
CASES = [
    (C("gemm_bn64", 2, 24, 40, (9, 10), (3, 3), pads_begin=(1, 0), pads_end=(0, 1), activation="relu"), "gather",
     ("gemm_mma<{t},bn64>", "gemm_simt<{t}>")),
    (C("gemm_bn128", 1, 40, 150, (7, 9), (3, 3), stride=(2, 1), pads_begin=(1, 1), pads_end=(1, 1),
       activation="silu"), "gather", ("gemm_mma<{t},bn128>", "gemm_simt<{t}>")),
    # channels-last GEMM (16-bit types, input channels per group a multiple of 8), its x copy included
    (C("nhwc_bn64", 2, 24, 40, (9, 10), (3, 3), pads_begin=(1, 0), pads_end=(0, 1), activation="relu"), "gemm",
     ("gemm_nhwc<{t},bn64>", "gemm_simt<{t}>")),
    (C("nhwc_bn128", 3, 40, 150, (7, 9), (3, 3), stride=(2, 1), pads_begin=(1, 1), pads_end=(1, 1),
       activation="silu"), "gemm", ("gemm_nhwc<{t},bn128>", "gemm_simt<{t}>")),
    (C("nhwc_grouped_dilated", 2, 32, 48, (11, 8), (3, 2), group=2, dilation=(2, 3), pads_begin=(2, 1),
       pads_end=(1, 2), activation="gelu", bias=False), "gemm", ("gemm_nhwc<{t},bn64>", "gemm_simt<{t}>")),
    (C("nhwc_1d_one_k_tile", 3, 16, 17, (40,), (1,), stride=(3,)), "gemm", ("gemm_nhwc<{t},bn64>", "gemm_simt<{t}>")),
    (C("nhwc_3d", 1, 8, 20, (5, 6, 7), (3, 2, 3), stride=(1, 2, 1), dilation=(2, 1, 1), pads_begin=(2, 0, 1),
       pads_end=(1, 1, 1)), "gemm", ("gemm_nhwc<{t},bn64>", "gemm_simt<{t}>")),
    (C("nhwc_misaligned", 2, 16, 70, (6, 6), (3, 3), pads_begin=(1, 1), pads_end=(1, 1), activation="relu"),
     "gemm", ("gemm_nhwc<{t},bn128>", "gemm_simt<{t}>")),
    (C("pointwise_bn128", 2, 20, 130, (4, 6), (1, 1), activation="gelu"), "gemm",
     ("gemm_pointwise<{t},bn128>", "gemm_simt<{t}>")),
    (C("pointwise_grouped_1d", 3, 36, 48, (16,), (1,), group=2, bias=False), "gemm",
     ("gemm_pointwise<{t},bn64>", "gemm_simt<{t}>")),
    (C("split_nhwc", 1, 256, 72, (6, 5), (3, 3), pads_begin=(1, 1), pads_end=(1, 1), activation="relu"), "gemm",
     ("gemm_nhwc<{t},bn128,split4>", "gemm_simt<{t}>")),
    (C("split_pointwise", 1, 512, 40, (4, 4), (1, 1), activation="silu"), "gemm",
     ("gemm_pointwise<{t},bn64,split2>", "gemm_simt<{t}>")),
    # 1x1 Conv weights read in place (no packing: output channels per group a multiple of the tile
    # width, input channels per group a multiple of 32, w aligned)
    (C("pointwise_w_in_place", 2, 64, 128, (4, 6), (1, 1), activation="relu"), "gemm",
     ("gemm_pointwise<{t},bn128>", "gemm_simt<{t}>")),
    (C("nhwc_1x1s2_w_in_place", 2, 32, 64, (9, 9), (1, 1), stride=(2, 2), bias=False), "gemm",
     ("gemm_nhwc<{t},bn64>", "gemm_simt<{t}>")),
    # backend 'fallback': with --autotune every tile width / split-K variant runs while being timed
    (C("tuned_nhwc", 1, 256, 72, (6, 5), (3, 3), pads_begin=(1, 1), pads_end=(1, 1)), "fallback",
     ("gemm_nhwc<{t},bn128,split4>", "gemm_simt<{t}>")),
    (C("nhwcT_s2_op", 2, 16, 36, (5, 6), (3, 3), group=2, stride=(2, 2), pads_begin=(1, 1), pads_end=(0, 1),
       output_padding=(1, 0), transpose=True, activation="relu"), "gemm",
     ("gemm_nhwc<{t},bn64,transpose>", "gemm_simt<{t},transpose>")),
    (C("gemm_grouped_dilated", 2, 36, 48, (11, 8), (3, 2), group=3, dilation=(2, 3), pads_begin=(2, 1),
       pads_end=(1, 2), activation="gelu", bias=False), "gemm", ("gemm_mma<{t},bn64>", "gemm_simt<{t}>")),
    (C("gemm_1d", 3, 5, 17, (40,), (7,), stride=(3,), pads_begin=(3,), pads_end=(0,)), "gemm",
     ("gemm_mma<{t},bn64>", "gemm_simt<{t}>")),
    (C("gemm_3d", 1, 6, 20, (5, 6, 7), (3, 2, 3), stride=(1, 2, 1), dilation=(2, 1, 1), pads_begin=(2, 0, 1),
       pads_end=(1, 1, 1)), "gemm", ("gemm_mma<{t},bn64>", "gemm_simt<{t}>")),
    (C("gemm_misaligned", 2, 9, 70, (6, 6), (3, 3), pads_begin=(1, 1), pads_end=(1, 1), activation="relu"),
     "gemm", ("gemm_mma<{t},bn128>", "gemm_simt<{t}>")),
    (C("gemm_c_in0", 2, 0, 8, (4, 4), (3, 3), pads_begin=(1, 1), pads_end=(1, 1), activation="silu"), "gemm",
     ("gemm_mma<{t},bn64>", "gemm_simt<{t}>")),
    (C("gemmT_s2_op", 2, 12, 36, (5, 6), (3, 3), stride=(2, 2), pads_begin=(1, 1), pads_end=(0, 1),
       output_padding=(1, 0), transpose=True, activation="relu"), "gemm",
     ("gemm_mma<{t},bn64,transpose>", "gemm_simt<{t},transpose>")),
    (C("gemmT_grouped_dilated_3d", 1, 8, 12, (3, 4, 3), (2, 3, 2), group=2, stride=(2, 1, 3), dilation=(1, 2, 1),
       pads_begin=(0, 1, 1), pads_end=(1, 0, 0), output_padding=(1, 0, 2), transpose=True), "gemm",
     ("gemm_mma<{t},bn64,transpose>", "gemm_simt<{t},transpose>")),
    (C("gemmT_wide", 1, 33, 130, (4, 5), (2, 2), stride=(2, 2), transpose=True, activation="gelu"), "gemm",
     ("gemm_mma<{t},bn128,transpose>", "gemm_simt<{t},transpose>")),
    (C("direct_depthwise", 2, 16, 16, (9, 11), (5, 5), group=16, stride=(2, 1), pads_begin=(2, 2), pads_end=(1, 2),
       activation="relu"), "direct", ("direct<{t}>", "direct<{t}>")),
    (C("direct_multiplier_1d", 2, 4, 12, (30,), (3,), group=4, dilation=(4,), pads_begin=(4,), pads_end=(4,)),
     "direct", ("direct<{t}>", "direct<{t}>")),
    (C("direct_forced_3d", 1, 5, 24, (4, 5, 6), (3, 3, 3), pads_begin=(1, 1, 1), pads_end=(1, 1, 1),
       activation="gelu"), "direct", ("direct<{t}>", "direct<{t}>")),
    (C("directT_depthwise", 1, 8, 8, (6, 7), (3, 3), group=8, stride=(2, 3), pads_begin=(1, 0), pads_end=(0, 1),
       output_padding=(1, 2), transpose=True, activation="silu"), "fallback",
     ("direct<{t},transpose>", "direct<{t},transpose>")),
    (C("direct_c_in0", 2, 0, 3, (3, 3), (2, 2), activation="relu"), "fallback", ("direct<{t}>", "direct<{t}>")),
    # The depthwise kernel: every unrolled variant, the generic one, a channel multiplier, negative
    # pads, column tiles + row bands (slots recomputed per tile), several planes per tile across
    # image boundaries, misaligned x / w / bias / y (scalar stores).
    (C("dw_k3s1_mult2", 2, 6, 12, (9, 14), (3, 3), group=6, pads_begin=(1, 1), pads_end=(1, 1), activation="relu"),
     "fallback", ("depthwise<{t},k3s1,staged>", "depthwise<{t},k3s1,staged>")),
    (C("dw_k3s2", 2, 8, 8, (11, 13), (3, 3), group=8, stride=(2, 2), pads_begin=(1, 1), pads_end=(1, 1),
       activation="silu"), "fallback", ("depthwise<{t},k3s2>", "depthwise<{t},k3s2,staged>")),
    (C("dw_k5s1_crop", 1, 4, 4, (12, 11), (5, 5), group=4, pads_begin=(-1, 2), pads_end=(3, -2), activation="gelu"),
     "fallback", ("depthwise<{t},k5s1,staged>", "depthwise<{t},k5s1,staged>")),
    (C("dw_k5s2_mult3", 1, 3, 9, (11, 12), (5, 5), group=3, stride=(2, 2), pads_begin=(2, 2), pads_end=(2, 2)),
     "fallback", ("depthwise<{t},k5s2,staged>", "depthwise<{t},k5s2,staged>")),
    (C("dw_k7s1", 2, 5, 5, (14, 13), (7, 7), group=5, pads_begin=(3, 3), pads_end=(3, 3), bias=False), "fallback",
     ("depthwise<{t},k7s1,staged>", "depthwise<{t},k7s1,staged>")),
    (C("dw_generic_dilated", 2, 4, 8, (13, 12), (3, 3), group=4, stride=(1, 2), dilation=(2, 2), pads_begin=(2, 2),
       pads_end=(2, 2), activation="relu"), "fallback",
     ("depthwise<{t},generic,staged>", "depthwise<{t},generic,staged>")),
    (C("dw_generic_1d_col_tiles", 1, 2, 2, (4200,), (5,), group=2, pads_begin=(2,), pads_end=(2,)), "depthwise",
     ("depthwise<{t},generic>", "depthwise<{t},generic>")),
    (C("dw_col_tiles_row_bands", 1, 1, 1, (20, 1100), (3, 3), group=1, pads_begin=(1, 1), pads_end=(1, 1),
       activation="silu"), "depthwise", ("depthwise<{t},k3s1>", "depthwise<{t},k3s1>")),
    (C("dw_many_planes", 5, 61, 122, (7, 7), (3, 3), group=61, pads_begin=(1, 1), pads_end=(1, 1),
       activation="relu"), "fallback", ("depthwise<{t},k3s1,staged>", "depthwise<{t},k3s1,staged>")),
    # The register-prefetch path on whole planes (x one element off: 2 bytes is too little for
    # cp.async; float32 still takes the staged path with 4-byte copies), several planes per tile.
    (C("dw_k7s1_regs", 2, 5, 5, (14, 13), (7, 7), group=5, pads_begin=(3, 3), pads_end=(3, 3)), "depthwise",
     ("depthwise<{t},k7s1>", "depthwise<{t},k7s1,staged>")),
    (C("dw_many_planes_regs", 5, 61, 122, (7, 7), (3, 3), group=61, pads_begin=(1, 1), pads_end=(1, 1),
       activation="relu"), "depthwise", ("depthwise<{t},k3s1>", "depthwise<{t},k3s1,staged>")),
    # The staged path with every buffer refilled (several tiles per CTA, P = 2, a short last tile).
    (C("dw_staged_1d_reuse", 3, 1333, 1333, (512,), (5,), group=1333, pads_begin=(2,), pads_end=(2,),
       activation="gelu"), "depthwise", ("depthwise<{t},generic,staged>", "depthwise<{t},generic,staged>")),
    (C("dw_staged_vec4_crop", 2, 6, 6, (10, 12), (3, 3), group=6, pads_begin=(1, -1), pads_end=(1, -1)),
     "depthwise", ("depthwise<{t},k3s1,staged>", "depthwise<{t},k3s1,staged>")),
    (C("dw_misaligned", 2, 6, 6, (8, 16), (3, 3), group=6, pads_begin=(1, 1), pads_end=(1, 1)), "depthwise",
     ("depthwise<{t},k3s1>", "depthwise<{t},k3s1,staged>")),
    # tests/gpu/test_conv_cuda.py::test_misaligned_pointers' case (issue 3): x, w and bias one element
    # off; the direct kernel here (gemm_misaligned covers the GEMM), backend 'auto' too with --with-cudnn
    # (cuDNN must refuse it and hand it to the fallback).
    (C("misaligned_xwb", 2, 24, 40, (9, 10), (3, 3), pads_begin=(1, 1), pads_end=(1, 1), activation="relu"),
     "direct", ("direct<{t}>", "direct<{t}>")),
]
DTYPES = ("float16", "bfloat16", "float32")
MISALIGN = {"gemm_misaligned": ("x", "w", "bias", "y"), "nhwc_misaligned": ("x", "w", "bias", "y"),
            "misaligned_xwb": ("x", "w", "bias"), "dw_misaligned": ("x", "w", "bias", "y"),
            "dw_k7s1_regs": ("x",), "dw_many_planes_regs": ("x",)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--list", action="store_true", help="print the cases and exit")
    ap.add_argument("--with-cudnn", action="store_true", help="also run backend 'auto' (cuDNN) per case")
    ap.add_argument("--autotune", action="store_true",
                    help="plan with autotuning (every variant of a 'fallback' case's kernel runs)")
    args = ap.parse_args()
    # read when a signature is planned; the default keeps the kernel choice deterministic
    os.environ["TRT_FASTOPS_CONV_AUTOTUNE"] = "1" if args.autotune else "0"
    if args.list:
        for case, backend, _ in CASES:
            print(f"{case.name:28s} backend={backend:9s} {case.describe()}")
        return 0
    try:
        import torch
        from trt_fastops import _C
    except ImportError as e:
        print(f"sanitize_conv: needs torch and trt_fastops._C ({e})")
        return 2
    if not torch.cuda.is_available() or not hasattr(_C, "conv_forward"):
        print("sanitize_conv: needs a CUDA device and the conv bindings in trt_fastops._C")
        return 2
    from scripts._conv_torch import Workspaces, alloc, make_inputs, max_error_ratio, point_at_cudnn, reference, run

    point_at_cudnn()

    workspaces = Workspaces(torch)
    failures = 0
    for case, backend, expect in CASES:
        for dtype in DTYPES:
            backends = [backend] + (["auto"] if args.with_cudnn else [])
            for be in backends:
                seed = zlib.crc32(f"{case.name}/{dtype}".encode())
                x, w, b = make_inputs(torch, case, dtype, seed=seed, misalign=MISALIGN.get(case.name, ()))
                y = alloc(torch, case.y_shape(), getattr(torch, dtype), "y" in MISALIGN.get(case.name, ()))
                y.fill_(float("nan"))
                try:
                    info = run(torch, _C, case, dtype, x, w, b, y, backend=be, workspaces=workspaces)
                    torch.cuda.synchronize()
                except RuntimeError as e:
                    print(f"FAIL {case.name} {dtype} {be}: {e}")
                    failures += 1
                    continue
                ratio = max_error_ratio(torch, y, reference(torch, case, x, w, b),
                                        reference(torch, case, x, w, b, absolute=True), dtype)
                want = (expect[1] if dtype == "float32" else expect[0]).format(t=dtype)
                got = info["fallback_kernel"]
                if be == "auto":
                    kernel_ok = True
                elif args.autotune and be == "fallback":  # the tuned variant: its family
                    kernel_ok = got.split(",")[0] == want.split(",")[0]
                else:
                    kernel_ok = got == want
                ok = ratio <= 1.0 and kernel_ok
                failures += not ok
                print(f"{'ok  ' if ok else 'FAIL'} {case.name:28s} {dtype:9s} {be:8s} {info['description']:55s} "
                      f"err/bound {ratio:.3g}" + ("" if kernel_ok else f"  (expected kernel {want})"))
    print(f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
