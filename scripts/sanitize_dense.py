#!/usr/bin/env python3
"""Run every Dense GELU path once on small shapes, for compute-sanitizer.

    compute-sanitizer --tool memcheck python3 scripts/sanitize_dense.py
    compute-sanitizer --tool racecheck python3 scripts/sanitize_dense.py

Each case: Y poisoned (NaN), Dense(activation="gelu") through _C.dense_forward with the path
forced (_C.dense_set_gelu_path: each sm_90a tile the build has, _C.dense_sm90_tiles(), where the
GPU runs them, and fallback = cuBLASLt + our GELU kernel), then Y compared with torch's float32
GELU(X @ W + b). Partial tiles in M, N and K; one case per dtype without bias. Exit status 1 on
any mismatch or error.
"""
from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.append(str(REPO))  # after site-packages: the installed trt_fastops wins

CASES = [  # (name, m, k, n, dtype, bias)
    ("bert-like", 200, 128, 264, "float16", True),
    ("partial-k", 70, 72, 136, "bfloat16", True),
    ("no-bias", 33, 64, 256, "float16", False),
    ("unaligned-n", 17, 64, 7, "float16", True),
    ("few-tiles-long-k", 40, 1024, 128, "float16", True),  # stream-K splits K here
]


def main() -> int:
    import torch

    from trt_fastops import _C

    dtypes = {"float16": torch.float16, "bfloat16": torch.bfloat16}
    ws = torch.empty(_C.dense_workspace_bytes(), dtype=torch.uint8, device="cuda")
    paths = list(_C.dense_sm90_tiles()) + ["fallback"]
    failed = 0
    for name, m, k, n, dtype, with_bias in CASES:
        g = torch.Generator(device="cuda").manual_seed(m * 31 + n)
        dt = dtypes[dtype]
        x = (torch.randn(m, k, generator=g, device="cuda") * 0.5).to(dt)
        w = (torch.randn(k, n, generator=g, device="cuda") * 0.5).to(dt)
        b = torch.randn(n, generator=g, device="cuda").to(dt) if with_bias else None
        ref = x.float() @ w.float() + (b.float() if with_bias else 0)
        ref = torch.nn.functional.gelu(ref)
        for path in paths:
            previous = _C.dense_set_gelu_path(path)
            try:
                y = torch.full((m, n), float("nan"), dtype=dt, device="cuda")
                args = (dtype, x.data_ptr(), w.data_ptr(), y.data_ptr(), m, n, k)
                kw = dict(bias=b.data_ptr() if with_bias else 0, activation="gelu", workspace=ws.data_ptr(),
                          workspace_bytes=ws.numel())
                kernel = _C.dense_kernel_name(*args, **kw)
                _C.dense_forward(*args, **kw)
                torch.cuda.synchronize()
                err = float((y.float() - ref).abs().max()) / max(1.0, float(ref.abs().max()))
                ok = bool(torch.isfinite(y).all()) and err < 2e-2
                print(f"{'ok  ' if ok else 'FAIL'} {name} {dtype} {path}: {kernel} (max rel err {err:.2e})")
                failed += not ok
            except RuntimeError as e:
                print(f"FAIL {name} {dtype} {path}: {e}")
                failed += 1
            finally:
                _C.dense_set_gelu_path(previous)
    print(f"sanitize_dense: {len(CASES) * len(paths) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
