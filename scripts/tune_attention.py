#!/usr/bin/env python3
"""A/B timing of our attention kernel's variants and causal schedules, interleaved.

bench_attention.py times each variant in turn, so slow drifts of the GPU's clocks land on
whichever variant runs last. Here every trial times every configuration once, in turn,
and the median over trials is reported, so configurations are compared under the same
conditions. Same cases as bench_attention.py (batch * seqlen = 16k tokens, hidden 2048).

    python scripts/tune_attention.py --variants 0 3 --schedules -1 0 8 32 --seqlens 512 4096
Prints one line per case: TFLOP/s per configuration (variant/schedule), and the kernel names.
"""
from __future__ import annotations

import argparse
import itertools
import statistics
import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # the installed trt_fastops wins

from scripts.bench_attention import HIDDEN, TOKENS, max_diff  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seqlens", type=int, nargs="+", default=[512, 1024, 4096, 16384])
    ap.add_argument("--dims", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--dtypes", nargs="+", default=["float16"])
    ap.add_argument("--causal", choices=("both", "yes", "no"), default="both")
    ap.add_argument("--variants", type=int, nargs="+", default=[0], help="tile variants (attention_set_tile_variant)")
    ap.add_argument("--schedules", type=int, nargs="+", default=[-1],
                    help="causal schedules (attention_set_causal_schedule; ignored for non-causal cases)")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--trials", type=int, default=9)
    args = ap.parse_args()

    import torch
    from trt_fastops import _C, ops

    for dtype, d, causal, s in itertools.product(args.dtypes, args.dims,
                                                  {"both": (False, True), "yes": (True,), "no": (False,)}[args.causal],
                                                  args.seqlens):
        b, h = max(1, TOKENS // s), HIDDEN // d
        flops = 4 * b * h * s * s * d // (2 if causal else 1)
        dt = getattr(torch, dtype)
        g = torch.Generator(device="cuda").manual_seed(0)
        q3, k3, v3 = (torch.randn(b, s, h * d, device="cuda", generator=g).to(dt) for _ in range(3))
        q, k, v = (t.view(b, s, h, d).transpose(1, 2) for t in (q3, k3, v3))
        out = torch.empty_like(q3).view(b, s, h, d).transpose(1, 2)
        ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        configs = [(vnt, sch) for vnt in args.variants for sch in (args.schedules if causal else [-1])]
        times = {c: [] for c in configs}
        names, wrong = {}, {}
        for trial in range(args.trials + 1):  # trial 0 warms up and checks
            for c in configs:
                _C.attention_set_tile_variant(c[0])
                _C.attention_set_causal_schedule(c[1])
                try:
                    if trial == 0:
                        out.fill_(float("nan"))
                        ops.attention(q, k, v, causal=causal, out=out)
                        torch.cuda.synchronize()
                        wrong[c] = max_diff(torch, out, ref)
                        names[c] = _C.attention_forward(
                            dtype, q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), b, h, h, s, s, d, d,
                            q_strides=q.stride()[:3], k_strides=k.stride()[:3], v_strides=v.stride()[:3],
                            out_strides=out.stride()[:3], scale=d ** -0.5, causal=causal, dry_run=True)
                        continue
                    st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    st.record()
                    for _ in range(args.reps):
                        ops.attention(q, k, v, causal=causal, out=out)
                    en.record()
                    torch.cuda.synchronize()
                    times[c].append(st.elapsed_time(en) * 1e3 / args.reps)
                finally:
                    _C.attention_set_tile_variant(0)
                    _C.attention_set_causal_schedule(-1)
        cells = []
        for c in configs:
            tf = flops / statistics.median(times[c]) / 1e6
            bad = "" if wrong[c] <= 0.02 else f" WRONG({wrong[c]:.3g})"
            cells.append(f"v{c[0]}/s{c[1]}={tf:.1f}{bad}")
        print(f"{dtype} d{d} {'causal' if causal else 'full  '} s{s:<6}", "  ".join(cells), flush=True)
        print("   ", {f"v{c[0]}": names[c] for c in configs if c[1] == configs[0][1]}, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
