#!/usr/bin/env python3
"""Benchmark EmbedLayerNorm (BERT-base's embedding) against the unfused form.

    python3 scripts/bench_embed.py            # H100: ~10 s -> bench/results/embed.json

Cases: BERT-base tables (vocabulary 30522, 512 positions, 2 token types, hidden 768), float16,
batch x sequence in {1, 8, 32} x {128, 512}. Per case, in the same run:
  ours   trt_fastops._C.embed_norm_forward (one kernel)
  torch  three torch.nn.functional.embedding lookups, two adds and layer_norm: the exported
         graph's kernels (ONNX Runtime runs the same six, plus a copy of the position ids)
Both are captured in CUDA graphs of --calls calls each (as inside a model's graph, so launch
overhead between kernels is what a graph replay pays, not the host's); per call = replay time /
calls, median of --reps replays (CUDA events). bytes = the three gathered rows read, gamma and
beta, the indices and Y written once; GB/s over our time.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench_common import driver_version, gpu_setup, write_results  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
VOCAB, POSITIONS, TYPES, HIDDEN = 30522, 512, 2, 768
CASES = [(b, s) for s in (128, 512) for b in (1, 8, 32)]


def graph_time_us(torch, fn, calls: int, reps: int) -> float:
    fn()  # eager once: allocations and module loads before capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    g.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record()
        g.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / calls)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "embed.json")
    args = ap.parse_args()
    setup = gpu_setup("bench_embed", want_ort=False)
    if isinstance(setup, int):
        return setup
    torch, _C, _, device_index, stream = setup
    F = torch.nn.functional
    dt = torch.float16
    g = torch.Generator(device="cuda").manual_seed(0)
    word = (torch.randn(VOCAB, HIDDEN, generator=g, device="cuda") * 0.05).to(dt)
    pos = (torch.randn(POSITIONS, HIDDEN, generator=g, device="cuda") * 0.05).to(dt)
    typ = (torch.randn(TYPES, HIDDEN, generator=g, device="cuda") * 0.05).to(dt)
    gamma = (1 + 0.1 * torch.randn(HIDDEN, generator=g, device="cuda")).to(dt)
    beta = (0.1 * torch.randn(HIDDEN, generator=g, device="cuda")).to(dt)
    rows, errors = [], []
    for batch, seq in CASES:
        ids = torch.randint(0, VOCAB, (batch, seq), generator=g, device="cuda")
        seg = torch.randint(0, TYPES, (batch, seq), generator=g, device="cuda")
        positions = torch.arange(seq, device="cuda")[None]
        y = torch.empty(batch, seq, HIDDEN, device="cuda", dtype=dt)

        def ours():
            _C.embed_norm_forward("float16", ids.data_ptr(), word.data_ptr(), pos.data_ptr(), gamma.data_ptr(),
                                  y.data_ptr(), batch, seq, HIDDEN, VOCAB, POSITIONS, segment_ids=seg.data_ptr(),
                                  segment=typ.data_ptr(), segment_rows=TYPES, beta=beta.data_ptr(), epsilon=1e-12,
                                  stream=torch.cuda.current_stream().cuda_stream)

        def unfused():
            e = F.embedding(ids, word) + F.embedding(seg, typ) + F.embedding(positions, pos)
            return F.layer_norm(e, (HIDDEN,), gamma, beta, 1e-12)

        try:
            ours()
            want = unfused().float()
            torch.cuda.synchronize()
            diff = float((y.float() - want).abs().max())
            if not diff < 2e-2:
                errors.append(f"b{batch} s{seq}: ours differs from torch by {diff:.3g}")
            t_ours = graph_time_us(torch, ours, args.calls, args.reps)
            t_torch = graph_time_us(torch, unfused, args.calls, args.reps)
        except Exception as e:  # noqa: BLE001 - one case's failure is reported, the others still run
            errors.append(f"b{batch} s{seq}: {type(e).__name__}: {e}")
            continue
        tokens = batch * seq
        nbytes = tokens * (3 * HIDDEN * 2 + 2 * 8 + HIDDEN * 2) + 2 * HIDDEN * 2
        rows.append({"case": f"b{batch} s{seq}", "tokens": tokens, "ours_us": round(t_ours, 2),
                     "torch_us": round(t_torch, 2), "x_torch": round(t_torch / t_ours, 2),
                     "ours_gbps": round(nbytes / t_ours / 1e3, 1), "max_abs_diff": diff})
        print(rows[-1], flush=True)
    head = f"{'case':10s} {'tokens':>7s} {'ours us':>8s} {'torch us':>9s} {'x torch':>8s} {'GB/s':>7s}"
    lines = [head, "-" * len(head)] + [
        f"{r['case']:10s} {r['tokens']:7d} {r['ours_us']:8.2f} {r['torch_us']:9.2f} {r['x_torch']:8.2f} "
        f"{r['ours_gbps']:7.1f}" for r in rows]
    doc = {"benchmark": "bench_embed", "gpu": torch.cuda.get_device_name(device_index),
           "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
           "versions": {"torch": torch.__version__, "cuda": torch.version.cuda, "driver": driver_version()},
           "dtype": "float16", "tables": {"vocab": VOCAB, "positions": POSITIONS, "types": TYPES, "hidden": HIDDEN},
           "method": f"CUDA graphs of {args.calls} calls, per call = replay / calls, median of {args.reps} replays "
                     "(CUDA events)", "rows": rows, "errors": errors}
    return write_results(args.out, doc, errors, "\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
