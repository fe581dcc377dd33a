"""Per-block phase cycles of the warp-specialised attention kernel (a measurement, not a test).

Build a scratch copy with `bench/block_clocks.patch` applied (`git apply bench/block_clocks.patch`,
then `pip install --no-build-isolation --no-deps --target DIR .`): every consumer warpgroup then
sums, over the key blocks after the first of each tile, the clock cycles of six phases of a block
(mbarrier waits for K / V, the wait for its ping-pong turn, issuing S and P V with the rescale,
the wait for S, the softmax with the releases of K and Q before it, the wait for P V with the
packing of P) and warp 0 of each consumer writes its sums and the tile's block count into the
lse output instead of the log-sum-exp. The clock reads keep
ptxas from moving the P V wait above the softmax, so that build runs the two apart (0-6 % slower
than the unpatched kernel on the H100). This script runs bench_attention's shapes through it
(PYTHONPATH=DIR) and prints the mean cycles per block of each phase, overall and per consumer.
bench/NOTES-attention-log.md item 34 has the H100's numbers.
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.append(str(Path(__file__).resolve().parents[1]))  # the installed trt_fastops wins

from scripts._bench_common import CLOCK_CASES, clock_stamp_run  # noqa: E402
from trt_fastops import ops  # noqa: E402

PHASES = ["K/V wait", "turn wait", "issue", "S wait", "softmax", "P V wait, pack"]
SLOTS = 8  # per tile and consumer: the six sums, the tile's block count, the consumer


def run(d: int, b: int, h: int, s: int, causal: bool) -> None:
    name, consumers, m_blocks, lse = clock_stamp_run(torch, ops, d, b, h, s, causal)
    tiles = b * h * m_blocks
    x = lse[: tiles * consumers * SLOTS].view(tiles * consumers, SLOTS)
    loop_blocks = (x[:, 6] - 1).clamp(min=0)
    print(f"d{d} B{b} H{h} S{s} {'causal' if causal else 'full'} {name}: {int(loop_blocks.sum())} loop blocks")
    for label, keep in [("all", loop_blocks > 0)] + [(f"consumer {c}", (loop_blocks > 0) & (x[:, 7] == c))
                                                      for c in range(consumers)]:
        per_block = x[keep, :6].sum(0) / loop_blocks[keep].sum()
        print(f"  {label:10} " + "  ".join(f"{n} {c:5.0f}" for n, c in zip(PHASES, per_block.tolist()))
              + f"  | total {per_block.sum().item():5.0f} cycles")


def main() -> int:
    for case in CLOCK_CASES:
        run(*case)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
