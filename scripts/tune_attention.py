#!/usr/bin/env python3
"""A/B timing of our attention kernel's variants and tile schedules, interleaved.

Timing each variant in a block of its own lets slow drifts of the GPU's clocks land on
whichever variant runs last. Here every trial times every configuration once, the order
rotated from trial to trial so that none always opens a trial, and the median over trials is
reported. Rotation keeps each configuration's predecessor, and one timed right after a
different kernel runs a few per cent slower than one timed after itself
(bench/NOTES-attention-log.md item 41): compare configurations that sit alike (auto/v0 with cudnn/v0, which
both follow a different kernel; not cudnn/v0 with cudnn/v2). Each timed block follows 250 ms of
untimed calls of the same configuration (--settle-ms): the card's power-bound clocks take 100-150 ms
to settle after a change of kernel (item 50), and burst timing (--settle-ms 0) ranked tile schedules
the other way round (item 62: larger causal sections faster in a burst, slower settled). Same cases as
bench_attention.py (batch * seqlen = 16k tokens, hidden 2048).

    python scripts/tune_attention.py --variants 0 3 --schedules -1 0 8 32 --seqlens 512 4096
    python scripts/tune_attention.py --graph --shapes 1x12x128x64 8x12x512x64 --mask padding --paths auto wgmma sm80
Prints one line per case: TFLOP/s and microseconds per configuration (path/variant/schedule),
and the kernel names. --shapes (BxHxSxD) replaces the seqlen x dim grid; --mask padding adds a
BERT-style additive key-padding mask [B, 1, 1, S] (0 / -10000; the last sequence's second half
padded, as models/build.py feeds it); --graph times CUDA-graph replays, which small cases need.
--layout picks how Q, K, V lie in memory: separate [B, S, H*D] tensors (default), packed (one
[B, S, 3*H*D] tensor, as the packed-QKV rewrite feeds the op in a model) or bhsd (contiguous
[B, H, S, D]). --rotate N cycles N copies of the inputs, so that with N * (inputs) beyond the
L2 cache each call reads them from memory, as a layer of a model does. --before gemm (packed
layout) runs the QKV projection GEMM (torch.matmul, [B*S, H*D] x [H*D, 3*H*D]) into the packed
tensor before every call, as in a model, and reports the attention's share: graph time of
GEMM + attention minus the GEMM alone (--graph). --before flush writes 256 MiB before every call
instead (nothing of the kernel's, code or data, left in the L2 cache); --before scatter scales 48
separately allocated 4.5 MiB tensors in place (~216 MiB in many allocations, as a layer's weights
and activations are touched between two attention calls of a model). --clocks samples the SM clock
with nvidia-smi every 20 ms (SmClockSampler) and adds each configuration's median MHz over its
settled stretches (the last 100 ms of each settle and the timed block) and work per clock
(TFLOP/s per GHz): at the power limit a change that does more work per clock can lose it
all in clocks (item 104), and these two numbers tell which happened.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # the installed trt_fastops wins

from scripts._bench_common import SmClockSampler, attention_kernel_name  # noqa: E402
from scripts.bench_attention import HIDDEN, TOKENS, max_diff, settle  # noqa: E402


def cases(args) -> list[tuple]:
    """(dtype, batch, heads, seqlen, head dim, causal) per case."""
    causals = {"both": (False, True), "yes": (True,), "no": (False,)}[args.causal]
    if args.shapes:
        shapes = []
        for text in args.shapes:
            try:
                b, h, s, d = (int(x) for x in text.lower().split("x"))
            except ValueError:
                raise SystemExit(f"tune_attention: --shapes wants BxHxSxD (e.g. 1x12x128x64), got {text!r}")
            shapes.append((b, h, s, d))
    else:
        shapes = [(max(1, TOKENS // s), HIDDEN // d, s, d) for d in args.dims for s in args.seqlens]
    return [(dtype, b, h, s, d, causal) for dtype in args.dtypes for causal in causals for (b, h, s, d) in shapes]


def make_inputs(torch, args, g, dt, b, h, s, d) -> tuple:
    """q, k, v ([B, H, S, D] views in args.layout), the mask (or None) and out ([B, H, S, D] view of [B, S, H*D])."""
    qkv = None
    if args.layout == "packed":
        qkv = torch.randn(b, s, 3 * h * d, device="cuda", generator=g).to(dt)
        q, k, v = (qkv[..., i * h * d:(i + 1) * h * d].view(b, s, h, d).transpose(1, 2) for i in range(3))
    elif args.layout == "bhsd":
        q, k, v = (torch.randn(b, h, s, d, device="cuda", generator=g).to(dt) for _ in range(3))
    else:
        q, k, v = (torch.randn(b, s, h * d, device="cuda", generator=g).to(dt).view(b, s, h, d).transpose(1, 2)
                   for _ in range(3))
    mask = None
    if args.mask == "padding":
        keep = torch.ones(b, s, device="cuda")
        if b > 1 and s > 2:
            keep[-1, s // 2:] = 0
        mask = ((1 - keep) * -10000.0).to(dt).view(b, 1, 1, s)
    out = torch.empty(b, s, h * d, device="cuda", dtype=dt).view(b, s, h, d).transpose(1, 2)
    proj = None
    if args.before == "gemm":  # x, w of the projection writing qkv; scaled so that q, k, v stay ~N(0, 1)
        x = torch.randn(b * s, h * d, device="cuda", generator=g).to(dt)
        w = (torch.randn(h * d, 3 * h * d, device="cuda", generator=g) * (h * d) ** -0.5).to(dt)
        proj = (x, w, qkv.view(b * s, 3 * h * d))
    return q, k, v, mask, out, proj


def parse_schedule(text: str) -> tuple[int, int]:
    """(attention_set_schedule, attention_set_section_heads) for a --schedules entry: an integer,
    hN (the default with sections of N heads), d (-3: causal tiles drawn from a counter) or dN
    (drawn, in sections of N heads)."""
    if text.startswith(("h", "d")):
        return -1 if text[0] == "h" else -3, int(text[1:]) if len(text) > 1 or text[0] == "h" else 0
    return int(text), 0


def schedule_arg(text: str) -> str:
    """--schedules: see parse_schedule."""
    try:
        parse_schedule(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a schedule: {text!r} (an integer, hN, d or dN)") from None
    return text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seqlens", type=int, nargs="+", default=[512, 1024, 4096, 16384])
    ap.add_argument("--dims", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--shapes", nargs="+", default=[], help="BxHxSxD cases instead of the seqlen x dim grid")
    ap.add_argument("--mask", choices=("none", "padding"), default="none")
    ap.add_argument("--layout", choices=("separate", "packed", "bhsd"), default="separate",
                    help="Q/K/V memory layout (see above)")
    ap.add_argument("--rotate", type=int, default=1, help="input copies cycled through (L2-cold reads)")
    ap.add_argument("--before", choices=("none", "gemm", "flush", "scatter"), default="none",
                    help="gemm: the QKV projection into the packed tensor before each call (see above); flush: "
                         "a 256 MiB fill before each call (the L2 cache, code included, cold); scatter: 48 separate "
                         "4.5 MiB tensors scaled in place (weights-like: many allocations touched)")
    ap.add_argument("--dtypes", nargs="+", default=["float16"])
    ap.add_argument("--causal", choices=("both", "yes", "no"), default="both")
    ap.add_argument("--paths", nargs="+", default=["auto"], choices=("auto", "wgmma", "sm80", "cudnn"),
                    help="kernel paths (attention_set_path); cudnn: torch's SDPA on its cuDNN backend, a reference")
    ap.add_argument("--variants", type=int, nargs="+", default=[0], help="tile variants (attention_set_tile_variant)")
    ap.add_argument("--schedules", type=schedule_arg, nargs="+", default=["-1"],
                    help="tile schedules (attention_set_schedule: -1 the default, -2 head-major on every SM without dealing "
                         "the partial tiles apart, -3 causal tiles drawn from a counter, 0 a CTA per tile, n > 0 "
                         "sections of heads whose K/V take n MiB; hN: the default with sections of N heads "
                         "where the grid runs sections, attention_set_section_heads; d: -3, dN: -3 in sections of N heads)")
    ap.add_argument("--pdl", choices=("on", "off"), nargs="+", default=["on"],
                    help="the sm_90a kernels launched with programmatic stream serialization or not "
                         "(attention_set_dependent_launch): on lets each call's CTAs start while the call ahead "
                         "finishes")
    ap.add_argument("--reps", type=int, default=20,
                    help="calls per timed block, as bench_attention.py (10 or fewer read a burst regime in which "
                         "our kernel looks closer to cuDNN than it runs sustained: bench/NOTES-attention-log.md item 42)")
    ap.add_argument("--trials", type=int, default=9)
    ap.add_argument("--settle-ms", type=float, default=250.0, metavar="MS",
                    help="untimed calls of each configuration for this long before each of its timed blocks, as "
                         "bench_attention.py does (item 50; default 250): configurations that draw different power "
                         "(cuDNN, and our own tile schedules: item 62) rank differently in a burst; 0 times bursts")
    ap.add_argument("--clocks", action="store_true",
                    help="sample the SM clock (nvidia-smi); print median MHz and TFLOP/s per GHz "
                         "(see above; needs --settle-ms 250 or more)")
    ap.add_argument("--graph", action="store_true",
                    help="time CUDA-graph replays of --reps calls (small cases: eager timing is Python launch cost)")
    args = ap.parse_args()
    if args.before == "gemm" and (args.layout != "packed" or not args.graph):
        raise SystemExit("tune_attention: --before gemm needs --layout packed and --graph")
    if args.before in ("flush", "scatter") and not args.graph:
        raise SystemExit(f"tune_attention: --before {args.before} needs --graph")

    if args.clocks and args.settle_ms < 250:
        # The window opens 100 ms before the settle ends, and the clocks settle 100-150 ms after a change.
        raise SystemExit("tune_attention: --clocks reads the clock over the settled stretch: --settle-ms 250 or more")

    import torch
    from trt_fastops import _C, ops

    sampler = SmClockSampler() if args.clocks else None

    for dtype, b, h, s, d, causal in cases(args):
        flops = 4 * b * h * s * s * d // (2 if causal else 1)
        dt = getattr(torch, dtype)
        g = torch.Generator(device="cuda").manual_seed(0)
        sets = [make_inputs(torch, args, g, dt, b, h, s, d) for _ in range(max(1, args.rotate))]
        flush = torch.empty(64 << 20, device="cuda", dtype=torch.float32) if args.before == "flush" else None
        scatter = [torch.ones(9 << 19, device="cuda", dtype=torch.float16) for _ in range(48)] \
            if args.before == "scatter" else None
        configs = [(path, vnt, sch, pdl) for path in args.paths for vnt in args.variants
                   for sch in args.schedules for pdl in args.pdl]
        if args.before != "none":
            configs.append(("before-only", 0, "-1", "on"))
        times = {c: [] for c in configs}
        windows = {c: [] for c in configs}
        names, wrong, graphs = {}, {}, {}

        def before(pi):
            if pi is not None:
                torch.matmul(pi[0], pi[1], out=pi[2])
            elif flush is not None:
                flush.fill_(1.0)
            elif scatter is not None:
                torch._foreach_mul_(scatter, 1.0)

        for *_, pi in sets:
            before(pi)  # q, k, v as the timed runs leave them (--before gemm writes them)
        q, k, v, mask, out, _ = sets[0]
        ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)

        def ours():
            for qi, ki, vi, mi, oi, pi in sets:
                before(pi)
                ops.attention(qi, ki, vi, mask=mi, causal=causal, out=oi)

        def gemm_only():
            for *_, pi in sets:
                before(pi)

        def cudnn(check=False):
            from torch.nn.attention import SDPBackend, sdpa_kernel

            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                for qi, ki, vi, mi, oi, pi in sets:
                    before(pi)
                    y = torch.nn.functional.scaled_dot_product_attention(qi, ki, vi, attn_mask=mi, is_causal=causal)
                    if check:  # timed runs leave the result where SDPA put it
                        oi.copy_(y)

        for trial in range(args.trials + 1):  # trial 0 warms up and checks
            rot = trial % len(configs)  # (not k: that is the keys)
            for c in configs[rot:] + configs[:rot]:
                run = {"cudnn": cudnn, "before-only": gemm_only}.get(c[0], ours)
                previous = _C.attention_set_path("auto" if c[0] in ("cudnn", "before-only") else c[0])
                _C.attention_set_tile_variant(c[1])
                schedule, heads = parse_schedule(c[2])
                _C.attention_set_schedule(schedule)
                _C.attention_set_section_heads(heads)
                _C.attention_set_dependent_launch(c[3] == "on")
                try:
                    if trial == 0:
                        out.fill_(float("nan"))
                        run(check=True) if run is cudnn else run()
                        torch.cuda.synchronize()
                        wrong[c] = 0.0 if run is gemm_only else max_diff(torch, out, ref)
                        names[c] = {"cudnn": "torch SDPA (cuDNN)", "before-only": f"{args.before} alone"}.get(c[0]) or \
                            attention_kernel_name(
                            _C, dtype, q, k, v, out, scale=d ** -0.5, causal=causal,
                            **({} if mask is None else dict(mask_kind="additive", mask_dtype=dtype,
                                                            mask=mask.data_ptr(), mask_strides=(s, 0, 0, 1),
                                                            mask_kv_len=s)))
                        if args.graph:  # the settings above are read at capture
                            graphs[c] = torch.cuda.CUDAGraph()
                            with torch.cuda.graph(graphs[c]):
                                for _ in range(args.reps):
                                    run()
                        continue
                    settle_from = time.time()
                    if args.settle_ms > 0:
                        settle(torch, graphs[c].replay if args.graph else run, args.settle_ms)
                    st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    st.record()
                    if args.graph:
                        graphs[c].replay()
                    else:
                        for _ in range(args.reps):
                            run()
                    en.record()
                    torch.cuda.synchronize()
                    times[c].append(st.elapsed_time(en) * 1e3 / (args.reps * len(sets)))
                    if sampler is not None:  # the clocks have settled ~100-150 ms after a change of kernel
                        windows[c].append((settle_from + (args.settle_ms - 100) / 1e3, time.time()))
                finally:
                    _C.attention_set_path(previous)
                    _C.attention_set_tile_variant(0)
                    _C.attention_set_schedule(-1)
                    _C.attention_set_section_heads(0)
                    _C.attention_set_dependent_launch(True)
        cells = []
        base = statistics.median(times[("before-only", 0, "-1", "on")]) if args.before != "none" else 0.0
        for c in configs:
            us = statistics.median(times[c]) - (0.0 if c[0] == "before-only" else base)
            bad = "" if wrong[c] <= 0.02 else f" WRONG({wrong[c]:.3g})"
            clock = ""
            if sampler is not None:
                f = sampler.median(windows[c])
                clock = ",no clock samples" if f is None else f",{f:.0f}MHz,{flops / us / 1e6 / (f / 1e3):.1f}TF/GHz"
            pdl = "" if c[3] == "on" else "/pdl-off"
            cells.append(f"{c[0]}/v{c[1]}/s{c[2]}{pdl}={flops / us / 1e6:.1f}TF,{us:.2f}us{clock}{bad}")
        print(f"{dtype} b{b} h{h} d{d} {'causal' if causal else 'full  '} s{s:<6}"
              f"{' mask' if mask is not None else ''} {args.layout}{f' x{len(sets)}' if len(sets) > 1 else ''}",
              "  ".join(cells), flush=True)
        print("   ", {f"{c[0]}/v{c[1]}": names[c] for c in configs if c[2] == configs[0][2]}, flush=True)
    if sampler is not None:
        sampler.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
