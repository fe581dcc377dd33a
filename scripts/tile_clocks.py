"""Per-tile clock stamps of the warp-specialised attention kernel (a measurement, not a test).

Build a scratch copy with `bench/tile_clocks.patch` applied (`git apply bench/tile_clocks.patch`,
then `pip install --no-build-isolation --no-deps --target DIR .`): consumer warp 0 of each consumer
warpgroup then writes clock64 (low 24 bits, as float) into the lse output instead of the log-sum-exp,
six values per tile and consumer: 0 after the Q wait, 1 after block 0's softmax (the prologue),
2 after the last block's softmax (the loop), 3 after the epilogue, 4 at the tile's start, 5 the CTA.
This script runs a few grids through that build (PYTHONPATH=DIR) and prints, per grid, the median
cycles of each stage and the per-tile overhead: a tile's cycles minus its blocks at the loop's
per-block rate. bench/NOTES-attention-log.md item 25 has the H100's numbers.
"""
from __future__ import annotations

import statistics as st
import sys
from pathlib import Path

import torch

sys.path.append(str(Path(__file__).resolve().parents[1]))  # the installed trt_fastops wins

from scripts._bench_common import CLOCK_CASES, clock_stamp_run, stamp_cycles as cycles  # noqa: E402
from trt_fastops import ops  # noqa: E402


def run(d: int, b: int, h: int, s: int, causal: bool) -> None:
    name, consumers, m_blocks, lse = clock_stamp_run(torch, ops, d, b, h, s, causal)
    tiles = b * h * m_blocks
    stamps = lse[: tiles * consumers * 6].view(tiles, consumers, 6).tolist()
    stages, per_cta = [], {}
    for t in range(tiles):
        for c in range(consumers):
            q_ready, prologue, loop, done, start, cta = stamps[t][c]
            stages.append(dict(last=t % m_blocks == 0, wait=cycles(start, q_ready), prologue=cycles(q_ready, prologue),
                               loop=cycles(prologue, loop), tail=cycles(loop, done), total=cycles(start, done)))
            if c == 0:
                per_cta.setdefault(int(cta), []).append((t, start, done))
    gaps = [cycles(a[2], b_[1]) for lst in per_cta.values() for a, b_ in zip(sorted(lst), sorted(lst)[1:])]

    def med(key, keep=lambda r: True):
        return st.median(r[key] for r in stages if keep(r))

    print(f"d{d} B{b} H{h} S{s} {'causal' if causal else 'full'} {name} tiles={tiles} ctas={len(per_cta)}")
    for label, keep in (("all", lambda r: True), ("last m-block", lambda r: r["last"])):
        print(f"  {label:12} wait {med('wait', keep):6.0f}  prologue {med('prologue', keep):6.0f}  "
              f"loop {med('loop', keep):7.0f}  tail {med('tail', keep):6.0f}  total {med('total', keep):7.0f} cycles")
    if not causal:
        blocks = -(-s // 128)
        per_block = med("loop") / (blocks - 1)
        print(f"  per block {per_block:.0f}; per-tile overhead {med('total') - blocks * per_block:.0f}; "
              f"between tiles {st.median(gaps) if gaps else 0:.0f} cycles")
    busy = [sum(cycles(a, b_) for _, a, b_ in lst) for lst in per_cta.values()]
    print(f"  busy cycles per CTA min / median / max {min(busy):.0f} / {st.median(busy):.0f} / {max(busy):.0f}")
    # A CTA's span in its SM's clock (its first tile's start to its last tile's end; the CTAs start
    # within a microsecond of each other): the grid ends with the longest, so max / mean is what
    # the tile order's balance costs (bench/NOTES-attention-log.md item 103).
    spans = [max(cycles(lst[0][1], done) for _, _, done in lst) for lst in per_cta.values()]
    print(f"  span cycles per CTA min / mean / max {min(spans):.0f} / {st.mean(spans):.0f} / {max(spans):.0f} "
          f"(max / mean {max(spans) / st.mean(spans):.3f})")


def main() -> int:
    for case in CLOCK_CASES:
        run(*case)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
