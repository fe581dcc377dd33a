"""Cycles of each step at a tile's boundary in the warp-specialised attention kernel (a measurement,
not a test).

Build a scratch copy with `bench/boundary_clocks.patch` applied (`git apply
bench/boundary_clocks.patch`, then `pip install --no-build-isolation --no-deps --target DIR .`):
warp 0 of each consumer warpgroup then writes clock64 (low 24 bits, as float) into the lse output
instead of the log-sum-exp, twelve values per tile and consumer: 0 the tile's start, 1 after the Q
wait, 2 after block 0's K wait, 3 after its ping-pong turn, 4 after S_0 has landed, 5 after block
0's softmax (the prologue), 6 after the block loop, 7 after the last V wait, 8 after the last turn,
9 after the last P V has landed, 10 after the epilogue, 11 the CTA; the issuing thread writes the
clock at which it issued each tile's Q load after them. This script runs a few grids through that
build (PYTHONPATH=DIR) and prints, per grid, the median cycles of each step and how long Q took
from its issue. bench/NOTES-attention-log.md item 43 has the H100's numbers.
"""
from __future__ import annotations

import statistics as st
import sys
from pathlib import Path

import torch

sys.path.append(str(Path(__file__).resolve().parents[1]))  # the installed trt_fastops wins

from scripts._bench_common import clock_stamp_run, stamp_cycles as cycles  # noqa: E402
from trt_fastops import ops  # noqa: E402

SLOTS = 12
STEPS = ["Q wait", "K wait", "turn", "S_0", "softmax_0", "loop", "V wait", "turn", "last P V", "epilogue"]
CASES = [(128, 16, 16, 1024, False), (128, 4, 16, 4096, False), (64, 16, 32, 1024, False), (64, 16, 32, 1024, True)]


def run(d: int, b: int, h: int, s: int, causal: bool) -> None:
    name, consumers, m_blocks, lse = clock_stamp_run(torch, ops, d, b, h, s, causal)
    tiles = b * h * m_blocks
    stamps = lse[: tiles * consumers * SLOTS].view(tiles, consumers, SLOTS).tolist()
    q_issued = lse[tiles * consumers * SLOTS: tiles * consumers * SLOTS + tiles].tolist()
    steps = [[] for _ in STEPS]
    q_latency = []
    for t in range(tiles):
        for c in range(consumers):
            x = stamps[t][c]
            for k in range(len(STEPS)):
                steps[k].append(cycles(x[k], x[k + 1]))
            q_latency.append(cycles(q_issued[t], x[1]))
    total = st.median(sum(steps[k][i] for k in range(len(STEPS))) for i in range(len(steps[0])))
    print(f"d{d} B{b} H{h} S{s} {'causal' if causal else 'full'} {name} tiles={tiles}")
    print("  " + "  ".join(f"{label} {st.median(v):.0f}" for label, v in zip(STEPS, steps)) + f"  tile {total:.0f}")
    print(f"  Q: issue to the consumers' q_full {st.median(q_latency):.0f} cycles")


def main() -> int:
    for case in CASES:
        run(*case)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
