#!/usr/bin/env python3
"""Small, fast run of every attention kernel variant with result checks, for compute-sanitizer.

    compute-sanitizer --tool memcheck  python3 scripts/sanitize_attention.py
    (also synccheck, initcheck)
    compute-sanitizer --tool racecheck --kernel-name kns=trt_fastops python3 scripts/sanitize_attention.py
    (our kernels only: over torch's reference kernels racecheck takes minutes a case; bench/NOTES-attention-log.md item 94)

Covers both kernel families (wgmma on sm_90a, mma.sync), each head-dim bucket and dtype, aligned and element-load (misaligned)
variants, GQA, causal with offsets, bool / additive / short masks, key padding
(dead suffixes: skipped key blocks, no-op prefixes, fully dead rows), softcap, lse,
partial tiles and empty key sets. Exit status 0 when every case matches the
float64 reference of tests/gpu/test_attention_kernels.py, 1 on a mismatch, 2 when
torch/CUDA/_C are missing. --list prints the cases without running.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))  # the installed trt_fastops wins

# (name, dtype, b, hq, hkv, sq, skv, d, dv, options)
CASES = [
    ("d64", "float16", 2, 4, 4, 130, 150, 64, 64, {}),
    ("d128-gqa-causal", "bfloat16", 1, 8, 2, 200, 200, 128, 128, dict(causal=True)),
    ("d256", "float16", 1, 2, 1, 70, 90, 256, 256, {}),
    ("d80-dv48", "bfloat16", 1, 2, 2, 33, 65, 80, 48, {}),
    ("odd-d-misaligned", "float16", 1, 2, 2, 40, 50, 36, 36, dict(misalign=True)),
    ("d100-elementwise", "float16", 1, 2, 2, 40, 50, 100, 100, {}),
    ("causal-offset", "float16", 1, 2, 2, 64, 300, 64, 64, dict(causal=True, causal_offset=236)),
    ("causal-negative", "bfloat16", 1, 2, 2, 64, 64, 64, 64, dict(causal=True, causal_offset=-20)),
    ("bool-mask", "float16", 2, 4, 2, 100, 170, 64, 64, dict(mask="bool")),
    ("additive-mask", "bfloat16", 2, 4, 4, 100, 170, 128, 128, dict(mask="additive", causal=True)),
    ("short-mask", "float16", 2, 2, 2, 64, 200, 64, 64, dict(mask="short")),
    # Key padding ([B, 1, 1, S]): per batch row all live, all dead, one live key, dead suffixes
    # mid-block and on block boundaries (the ws kernel skips their blocks): the three-consumer d64
    # tile (even S, the mask held packed), the two-consumer one (odd S), then d128 with more tiles
    # than SMs.
    ("key-padding", "float16", 6, 4, 2, 150, 334, 64, 64, dict(mask="padding", causal=True, causal_offset=184)),
    ("key-padding-odd", "bfloat16", 6, 4, 4, 150, 333, 64, 64, dict(mask="padding")),
    ("key-padding-bool-persistent", "bfloat16", 8, 24, 8, 200, 300, 128, 128, dict(mask="padding-bool")),
    # BERT's shape at batch 4: the cost model's 64-row tile (two CTAs per SM) for short grids,
    # with a key-row mask.
    ("key-padding-bert", "float16", 4, 12, 12, 128, 128, 64, 64, dict(mask="padding")),
    ("softcap", "float16", 1, 2, 2, 64, 64, 128, 128, dict(softcap=10.0)),
    # Softcap runs on the builds that carry its code: variant 0 (d64: 192 rows), the general mask
    # code for key padding too.
    ("softcap-d64", "bfloat16", 2, 4, 4, 130, 130, 64, 64, dict(softcap=10.0, causal=True)),
    ("softcap-key-padding", "float16", 2, 4, 4, 96, 200, 64, 64, dict(mask="padding", softcap=20.0)),
    ("one-query", "float16", 3, 4, 1, 1, 333, 128, 128, {}),
    ("empty-kv", "float16", 1, 2, 2, 20, 0, 64, 64, {}),
    # More tiles than an H100 has SMs: the persistent kernel's CTAs each run several (three or
    # more here).
    ("persistent-d64", "float16", 4, 16, 16, 1000, 300, 64, 64, {}),
    ("persistent-d128", "bfloat16", 4, 16, 4, 1000, 300, 128, 128, {}),
    ("persistent-d128-causal", "bfloat16", 1, 32, 8, 600, 600, 128, 128, dict(causal=True)),
    # Non-causal, 200 tiles of 128 rows on 132 SMs, each head's second one partial: the partial
    # tiles go to the 68 CTAs that run a second tile (persistent_tile's balance_ways).
    ("persistent-dealt", "float16", 1, 100, 100, 200, 200, 128, 128, {}),
    # Non-causal d128 with an even count of query tiles a head: the 176-key tile in clusters of
    # two CTAs (K / V multicast), forced (attention_set_tile_variant; by default it takes 8k keys
    # or more): keys past a block, GQA, more tiles than SMs, and a grid of four tiles.
    ("cluster-d128", "float16", 2, 8, 8, 512, 300, 128, 128, dict(variant=4)),
    ("cluster-d128-gqa", "bfloat16", 3, 16, 4, 1024, 1000, 128, 128, dict(variant=4)),
    ("cluster-d128-small", "float16", 1, 2, 2, 256, 256, 128, 128, dict(variant=4)),
    # Non-causal whole tiles: 200 tiles of 128 rows on 100 CTAs of two (even_round_grid).
    ("persistent-even", "float16", 1, 200, 200, 128, 128, 128, 128, {}),
    # Causal, offset -300: empty tiles (all rows fully masked) between computed ones.
    ("persistent-empty-tiles", "bfloat16", 4, 16, 4, 1000, 300, 64, 64, dict(causal=True, causal_offset=-300)),
    # Three consumer warpgroups, the last tile's third past q_len; causal rows skip blocks.
    ("persistent-d64-causal", "float16", 3, 16, 4, 700, 700, 64, 64, dict(causal=True)),
    # Causal, 50 query blocks a head (past CAUSAL_TILES_PER_HEAD_MAX): a CTA per tile by default;
    # forced sections of 128 MiB (attention_set_schedule) put the three heads in one section on
    # the persistent grid (150 tiles on 132 SMs; bench/NOTES-attention-log.md item 62).
    ("persistent-causal-long", "bfloat16", 1, 3, 3, 6300, 6300, 128, 128, dict(causal=True, schedule=128)),
    # Causal grids the snake leaves ragged (576 tiles on 132 SMs): the last rounds dealt from the
    # launcher's table (causal_tail, which saves 17-20 % of the modelled makespan), 128 and 192 rows.
    ("tail-d128-causal", "float16", 4, 24, 8, 700, 700, 128, 128, dict(causal=True)),
    ("tail-d64-causal", "bfloat16", 6, 16, 16, 1000, 1000, 64, 64, dict(causal=True)),
    # Causal tiles drawn from the workspace's counter (ops.attention passes one): by default past
    # CAUSAL_TILES_PER_HEAD_MAX query blocks a head (50 here), forced (-3) on the three-consumer
    # d64 tile, and among empty tiles (offset -300).
    ("drawn-causal-long", "bfloat16", 1, 3, 3, 6300, 6300, 128, 128, dict(causal=True)),
    ("drawn-d64", "float16", 3, 16, 4, 700, 700, 64, 64, dict(causal=True, schedule=-3)),
    ("drawn-empty-tiles", "bfloat16", 4, 16, 4, 1000, 300, 128, 128, dict(causal=True, causal_offset=-300,
                                                                          schedule=-3)),
    # d256 on the warp-specialised tile (128 x 64, two consumers, one output slot): more tiles than
    # SMs, keys past a block, GQA; causal; softcapped (its SOFTCAP build); a 192-dim head with
    # 128-dim values in the same bucket (TMA reads the missing columns as zeros); key padding.
    ("d256-persistent", "float16", 4, 16, 4, 300, 333, 256, 256, {}),
    ("d256-persistent-causal", "bfloat16", 4, 16, 16, 500, 500, 256, 256, dict(causal=True)),
    ("d256-softcap", "float16", 1, 4, 2, 130, 200, 256, 256, dict(softcap=30.0, causal=True)),
    ("d192-dv128", "bfloat16", 1, 4, 4, 100, 150, 192, 128, {}),
    ("key-padding-d256", "bfloat16", 6, 4, 2, 150, 334, 256, 256, dict(mask="padding", causal=True)),
    # d256's 80-key tile (variant 2: the output staged in the V stages): several tiles a CTA, a
    # partial last block; key padding (its key-row build); tiles without keys (offset -300)
    # between tiles with some.
    ("d256-n80", "bfloat16", 3, 16, 8, 400, 1000, 256, 256, dict(variant=2)),
    ("key-padding-d256-n80", "float16", 6, 4, 2, 150, 334, 256, 256, dict(mask="padding", variant=2)),
    ("key-padding-d256-n80-causal", "bfloat16", 6, 4, 4, 300, 334, 256, 256, dict(mask="padding", causal=True,
                                                                                 variant=2)),
    ("d256-n80-empty-tiles", "float16", 2, 16, 4, 700, 400, 256, 256, dict(causal=True, causal_offset=-300,
                                                                          variant=2)),
    # d64's packed tile (variant 6: 192-row tiles over the heads' rows end to end): tiles that
    # straddle two heads (each consumer on its own head's K / V ring), a last tile with an empty
    # slot, GQA heads sharing K / V across a straddle, several tiles a CTA.
    ("packed-d64", "float16", 2, 5, 5, 256, 300, 64, 64, dict(variant=6)),
    ("packed-d64-gqa", "bfloat16", 3, 8, 2, 448, 1088, 64, 64, dict(variant=6)),
    ("packed-d64-many", "float16", 16, 12, 12, 320, 200, 64, 64, dict(variant=6)),
    # ViT-B/16 at batch 32: the cost model's 256-row tile under 512 keys (197 rows of 256, the
    # fourth consumer's 5 rows; 64-key blocks, the last one 5 keys).
    ("vit-b16", "float16", 32, 12, 12, 197, 197, 64, 64, {}),
    # Programmatic dependent launch: the kernel ahead (late_copy_probe) lets the attention start at
    # once and writes its Q / V only 200 us later; the attention waits for it (same bits as a launch
    # without the overlap). The probe kernel runs under the sanitizers here too.
    ("late-q-packed", "float16", 2, 4, 4, 512, 512, 64, 64, dict(late="q")),
    ("late-v-causal", "bfloat16", 1, 4, 2, 600, 600, 128, 128, dict(late="v", causal=True)),
]


def run_late(torch, q, k, v, late, causal) -> None:
    """Attention right after a late copy of `late` ('q' or 'v') into a NaN-filled buffer, against the
    launch without programmatic stream serialization (bit for bit)."""
    import math

    from test_attention_kernels import _forward_raw, dependent_launch
    from trt_fastops import _C

    stream = torch.cuda.current_stream().cuda_stream
    expected = torch.full_like(q, math.nan)
    with dependent_launch(False):
        _forward_raw(q, k, v, expected, scale=0.125, causal=causal)
    inputs = {"q": q, "v": v}
    src = inputs[late]
    inputs[late] = torch.full_like(src, math.nan)
    out = torch.full_like(q, math.nan)
    torch.cuda.synchronize()
    with dependent_launch(True):
        _C.late_copy_probe(src.data_ptr(), inputs[late].data_ptr(), src.numel() * 2, delay_us=200, stream=stream)
        _forward_raw(inputs["q"], k, inputs["v"], out, scale=0.125, causal=causal, stream=stream)
        torch.cuda.synchronize()
    assert not torch.isnan(expected).any()
    assert torch.equal(out, expected), "the attention read its input before the kernel ahead wrote it"


def run_case(torch, check, make_inputs, forced_schedule, case) -> None:
    name, dtype, b, hq, hkv, sq, skv, d, dv, opt = case
    dt = getattr(torch, dtype)
    q, k, v = make_inputs(b, hq, hkv, sq, skv, d, dv, dt, seed=len(name))
    if opt.get("misalign"):
        # The same values one element past a 16-byte boundary.
        def shift(t):
            buf = torch.zeros(t.numel() + 1, dtype=t.dtype, device=t.device)
            view = buf[1:].view(t.shape)
            view.copy_(t)
            return view
        q, k, v = shift(q), shift(k), shift(v)
    kw = {key: opt[key] for key in ("causal", "causal_offset", "softcap") if key in opt}
    mask = opt.get("mask")
    if mask == "bool":
        kw["mask"] = torch.rand(b, 1, sq, skv, device="cuda") > 0.4
    elif mask == "additive":
        kw["mask"] = torch.randn(1, hq, 1, skv, device="cuda").to(dt)
    elif mask == "short":
        kw["mask"] = torch.rand(sq, skv - 50, device="cuda") > 0.2
    elif mask in ("padding", "padding-bool"):
        lengths = torch.tensor([skv, 0, 1, 200, 256, 130, 77, 299][:b], device="cuda").view(b, 1, 1, 1)
        dead = torch.arange(skv, device="cuda").view(1, 1, 1, skv) >= lengths
        additive = torch.zeros(dead.shape, dtype=dt, device="cuda").masked_fill(dead, -10000.0)
        kw["mask"] = ~dead if mask == "padding-bool" else additive
    from trt_fastops import ops

    if "late" in opt:
        run_late(torch, q, k, v, opt["late"], opt.get("causal", False))
        return
    if skv == 0:
        out = ops.attention(q, k, v)
        torch.cuda.synchronize()
        assert torch.count_nonzero(out) == 0
        return
    native = ops._native()
    previous = native.attention_set_tile_variant(opt["variant"]) if "variant" in opt else None
    try:
        with forced_schedule(opt.get("schedule", -1)):
            check(q, k, v, compare_naive=False, **kw)
    finally:
        if previous is not None:
            native.attention_set_tile_variant(previous)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--paths", default="auto,auto-m64,auto-m128,auto-m192,auto-m256,auto-packed,auto-consumer-store,"
                                       "wgmma,sm80",
                    help="comma-separated kernel paths (_C.attention_set_path; auto-m64 / m128 / m192 / m256 / packed: "
                         "auto with d64's rows per tile forced; auto-consumer-store: the output stored by the consumer "
                         "warps), default all")
    ap.add_argument("--cases", default=None,
                    help="comma-separated case names (see --list), default all; racecheck takes minutes on each "
                         "persistent-* case, so long runs go one compute-sanitizer process per path or case")
    args = ap.parse_args(argv)
    cases = CASES
    if args.cases is not None:
        names = [n for n in args.cases.split(",") if n]
        known = {c[0] for c in CASES}
        unknown = [n for n in names if n not in known]
        if not names:
            ap.error("--cases: no case named; --list prints the names")
        if unknown:
            ap.error(f"--cases: unknown case(s) {', '.join(unknown)}; --list prints the names")
        cases = [c for c in CASES if c[0] in names]
    if args.list:
        for c in cases:
            print(c[0])
        return 0
    try:
        import torch

        if not torch.cuda.is_available():
            raise ImportError("no CUDA device")
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "gpu"))
        from test_attention_kernels import check, forced_schedule, make_inputs, set_kernel_path
    except ImportError as e:
        print(f"sanitize_attention: cannot run: {e}", file=sys.stderr)
        return 2

    failed = 0
    # On an H100: the warp-specialised TMA kernel (its default tiles, then each of d64's row
    # counts forced, then its output stored by the consumers), the plain wgmma kernel, the
    # mma.sync kernel.
    for path in args.paths.split(","):
        set_kernel_path(path)
        for case in cases:
            try:
                run_case(torch, check, make_inputs, forced_schedule, case)
                print(f"{path} {case[0]}: ok", flush=True)
            except AssertionError as e:
                failed += 1
                print(f"{path} {case[0]}: MISMATCH {e}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
