"""What the K / V loads of the packed d64 tile cost at the power cap (bench/NOTES-attention-log.md item 111).

Times our packed 192-row d64 kernel (non-causal, the bench's shapes: B = 16k / S, 32 heads,
[B, S, H, D] storage) with `bench/kv_skip.patch` applied, under each TRT_FASTOPS_PROBE_KV mode:
0 as main; 1 no K / V loads after a CTA's first tile; 2 never the second head's; 3 / 5 a tile's
first / last two blocks skipped after the CTA's first tile; 10 each CTA a contiguous run of
tiles; 13 / 15 that run, a tile's first / last two blocks skipped for the heads its CTA's
previous tile loaded (what keeping them in the ring would save). Skipped loads leave stale K / V
in shared memory: the outputs are wrong, only the times mean anything. Each mode is settled
1000 ms before each block of 20 calls, 5 trials rotated (bench_attention's method); then 600 ms
of calls with nvidia-smi sampling the SM clock and board power every 50 ms (SmClockSampler;
medians of the last two thirds). Prints µs, the ratio to the first mode, MHz and W.

    git apply bench/kv_skip.patch && bash scripts/gpu_session.sh build
    python bench/kv_skip_probe.py 0,1,2,3,5,10,13,15 512,1024 float16,bfloat16
"""
import os
import sys
import time
from pathlib import Path

import torch

sys.path.append(str(Path(__file__).resolve().parents[1]))  # the installed trt_fastops wins
from scripts._bench_common import SmClockSampler  # noqa: E402
from scripts.bench_attention import time_interleaved  # noqa: E402
from trt_fastops import ops  # noqa: E402


def clocks_during(sampler, fn, ms=600.0):
    """(SM MHz, board W): the sampler's medians over the last two thirds of `ms` of back-to-back calls."""
    t0 = time.time()
    while (time.time() - t0) * 1e3 < ms:
        for _ in range(20):
            fn()
        torch.cuda.synchronize()
    window = [(t0 + ms / 3e3, time.time())]
    return sampler.median(window) or 0.0, sampler.median(window, column=2) or 0.0


def main(modes, seqlens, dtypes):
    sampler = SmClockSampler(period_ms=50, power=True)
    for dt_name in dtypes:
        dt = getattr(torch, dt_name)
        for s in seqlens:
            b, h, d = 16384 // s, 32, 64
            g = torch.Generator(device="cuda").manual_seed(0)
            q3, k3, v3 = (torch.randn(b, s, h * d, device="cuda", generator=g).to(dt) for _ in range(3))
            q, k, v = (t.view(b, s, h, d).transpose(1, 2) for t in (q3, k3, v3))
            out = torch.empty_like(q3).view(b, s, h, d).transpose(1, 2)
            fns = {}
            for m in modes:
                def fn(m=m):
                    os.environ["TRT_FASTOPS_PROBE_KV"] = m  # read by the launcher at each call
                    ops.attention(q, k, v, causal=False, out=out)
                fns[m] = fn
            us = time_interleaved(torch, fns, reps=20, trials=5, settle_ms=1000.0)
            cells = []
            for m in modes:
                mhz, watts = clocks_during(sampler, fns[m])
                cells.append(f"m{m}: {us[m]:.1f} us x{us[modes[0]] / us[m]:.3f} {mhz:.0f} MHz {watts:.0f} W")
            print(dt_name, s, "  ".join(cells), flush=True)
    os.environ.pop("TRT_FASTOPS_PROBE_KV", None)
    sampler.close()


if __name__ == "__main__":
    args = sys.argv[1:] + [None] * 3
    main((args[0] or "0,1,2,3").split(","), [int(x) for x in (args[1] or "512,1024").split(",")],
         (args[2] or "float16,bfloat16").split(","))
