"""A tile's cost by its length, ours against FlashAttention-3 (bench/NOTES-attention-log.md item 102).

One query tile a head (d128: 128 rows, d64: 192), 2112 heads (16 whole rounds on 132 SMs), 16
query heads a K/V head so K/V comes from L2, n key blocks of 128 (keys = 128 n), causal aligned
bottom-right (our offset keys - rows: the last block is the diagonal) and non-causal; then the
bench's causal grids. Settled 250 ms before each block of 20 calls, 5 trials rotated. Prints
microseconds a round of 132 tiles and FA3 / ours.

    python bench/tile_length_probe.py bench/fa3/build/libfa3_bench.so   (scripts/build_fa3.sh)
"""
import ctypes
import sys
from pathlib import Path

import torch

sys.path.append(str(Path(__file__).resolve().parents[1]))  # the installed trt_fastops wins
from scripts.bench_attention import time_interleaved  # noqa: E402
from trt_fastops import ops  # noqa: E402

FA3 = ctypes.CDLL(sys.argv[1])
FA3.fa3_fwd.restype = ctypes.c_int
FA3.fa3_fwd.argtypes = [ctypes.c_void_p] * 6 + [ctypes.c_int] * 9 + [ctypes.c_void_p]
SMS = torch.cuda.get_device_properties(0).multi_processor_count


def timed(fns):
    """Microseconds a call: bench_attention's method (settled 250 ms, 20 calls a block, 5 trials rotated)."""
    return time_interleaved(torch, fns, reps=20, trials=5, settle_ms=250.0)


def case(dt, b, h, sq, sk, d, causal, hk=None):
    hk = hk or h
    q3 = torch.randn(b, sq, h * d, device="cuda").to(dt)
    k3, v3 = (torch.randn(b, sk, hk * d, device="cuda").to(dt) for _ in range(2))
    q = q3.view(b, sq, h, d).transpose(1, 2)
    k, v = (t.view(b, sk, hk, d).transpose(1, 2) for t in (k3, v3))
    out3 = torch.empty_like(q3)
    out = out3.view(b, sq, h, d).transpose(1, 2)
    lse = torch.empty(b, h, sq, device="cuda", dtype=torch.float32)
    sem = torch.zeros(1, device="cuda", dtype=torch.int32)
    kw = dict(causal=True, causal_offset=sk - sq) if causal else {}
    ours = lambda: ops.attention(q, k, v, out=out, **kw)
    def fa3():
        FA3.fa3_fwd(q3.data_ptr(), k3.data_ptr(), v3.data_ptr(), out3.data_ptr(), lse.data_ptr(), sem.data_ptr(),
                    b, sq, sk, h, hk, d, int(dt == torch.bfloat16), int(causal), SMS,
                    torch.cuda.current_stream().cuda_stream)
    ours()
    ref = out3.clone()
    fa3()
    torch.cuda.synchronize()
    err = (ref.float() - out3.float()).abs().max().item()
    return timed({"ours": ours, "fa3": fa3}), err


for dt in (torch.float16, torch.bfloat16):
    for d, sq in ((128, 128), (64, 192)):
        for causal in (True, False):
            for n in (1, 2, 4, 8, 16):
                b, h, hk = 33, 64, 4  # 2112 tiles = 16 rounds of 132; 16 query heads a K/V head (L2)
                t, err = case(dt, b, h, sq, 128 * n, d, causal, hk)
                rounds = b * h / SMS
                us = {k: v / rounds for k, v in t.items()}
                print(f"{str(dt)[6:]:9s} d{d} {'causal' if causal else 'full  '} n={n:2d}  ours {us['ours']:7.2f} us/round  "
                      f"fa3 {us['fa3']:7.2f}  fa3/ours {t['ours'] / t['fa3']:.3f}  maxdiff {err:.1e}", flush=True)
    # the bench's grids (16k tokens, hidden 2048)
    for d, s in ((128, 1024), (128, 4096), (64, 1024), (64, 2048)):
        b, h = 16384 // s, 2048 // d
        t, err = case(dt, b, h, s, s, d, True)
        print(f"{str(dt)[6:]:9s} d{d} causal s={s}: ours {t['ours']:8.1f} us  fa3 {t['fa3']:8.1f}  fa3/ours {t['ours'] / t['fa3']:.3f}  "
              f"maxdiff {err:.1e}", flush=True)
