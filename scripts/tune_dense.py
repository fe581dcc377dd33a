#!/usr/bin/env python3
"""Dense's GELU GEMM paths timed inside a rewritten model's CUDA-graph replay (diagnosis).

`bench_dense.py` times the GELU GEMM alone; inside BERT at batch 1 its neighbours (the weights
of the layer before, the kernels around it) change what wins (session 16: our 64x64 ping-pong
GELU GEMM took 6.6 µs a call inside BERT b1 s128 against 4.6 for cuBLASLt's bare GEMM of the
same shape). For each case this script captures one OrtModel (CUDA graphs) per GELU path,
forced through `_C.dense_set_gelu_path` while the session warms up and captures, then times
the replays of all of them in turn, round after round (interleaved, so drift hits every path
alike), and profiles a few replays of each for the GELU GEMM's kernel time:

    python3 scripts/tune_dense.py [--case bert_base:1x128 ...] [--paths auto pp_64x64 fallback ...]

Paths: "auto" (the launcher's rule), "fallback" (cuBLASLt GEMM + bias, then our GELU pass) and
the sm_90a tiles this build carries (`_C.dense_sm90_tiles()`; a tuning build with
TRT_FASTOPS_DENSE_SM90_TILES=all has them all). Writes bench/results/dense_model_tiles.json
and prints a table: replay µs (median of the rounds' medians, and the best round), the GELU
GEMM's kernel µs per call, and the replay's summed kernel time.
"""
from __future__ import annotations

import argparse
import re
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(REPO))
import bench_models as BM  # noqa: E402
from _bench_common import ort_torch_header, write_results  # noqa: E402
from profile_models import bench_for, kernels_from_trace, parse_case, prepare_args, profile_runner  # noqa: E402

# The GELU GEMM's kernels: our CUTLASS tiles, or the fallback's GELU pass (its GEMM is a
# cuBLASLt kernel like the model's other GEMMs, so it is not counted here).
GELU_KERNEL = re.compile(r"cutlass|dense_gelu", re.I)


def capture(data: bytes, path: str, feeds, env, warm_runs: int):
    """An OrtModel whose graph was captured with the GELU path `path` forced."""
    from trt_fastops import _C

    previous = _C.dense_set_gelu_path(path)
    try:
        runner = env.ort_model(data, True)
        for _ in range(warm_runs):
            out = runner.run(feeds)
        env.sync()
    finally:
        _C.dense_set_gelu_path(previous)
    if not runner.graphs_enabled:
        raise RuntimeError(f"no CUDA graphs: {runner.graph_fallback}")
    return runner, {k: BM.to_numpy(x) for k, x in out.items()}


def gelu_kernels(trace: dict, iters: int) -> dict:
    ks = kernels_from_trace(trace)
    gelu = [d for n, d in ks if GELU_KERNEL.search(n)]
    names = sorted({n for n, _ in ks if GELU_KERNEL.search(n)})
    return {"gpu_us_per_run": round(sum(d for _, d in ks) / iters, 1),
            "gelu_us_per_call": round(statistics.mean(gelu), 2) if gelu else None,
            "gelu_calls_per_run": round(len(gelu) / iters, 1), "gelu_kernels": [n[:160] for n in names]}


def run_case(case, paths, env, args, errors) -> list[dict]:
    bench = bench_for(case)
    prep = BM.prepare(bench, prepare_args(argparse.Namespace(dtype="float16", variants=[], target="ort")))
    feeds = env.to_device(prep["feeds"][0])
    label = case.label
    runners, rows, ref = {}, {}, None
    for path in paths:
        try:
            runner, out = capture(prep["graphs"]["ours"], path, feeds, env, args.warm_runs)
            if ref is None:
                ref = out
            rows[path] = {"case": label, "path": path, "diff_vs_first": BM.scaled_diff(out, ref), "rounds": []}
            runners[path] = runner
        except Exception as e:  # noqa: BLE001 - one path's failure is reported, the others still run
            errors.append(f"{label} {path}: {type(e).__name__}: {str(e)[:300]}")
            rows[path] = {"case": label, "path": path, "error": errors[-1]}
    for _ in range(args.rounds):
        for path, runner in runners.items():
            t = BM.time_calls(lambda: runner.run(feeds), env.sync, 0.0, args.reps, args.reps)
            rows[path]["rounds"].append(round(t["ms"] * 1e3, 1))
    for path, runner in runners.items():
        iters = 10
        rows[path].update(gelu_kernels(profile_runner(runner, feeds, env.sync, 3, iters), iters))
        r = rows[path]["rounds"]
        rows[path]["replay_us"] = round(statistics.median(r), 1)
        rows[path]["best_round_us"] = min(r)
    runners.clear()
    env.release()
    return list(rows.values())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", action="append", dest="cases", metavar="bert_base:BxS")
    ap.add_argument("--paths", nargs="+", help="GELU paths (default: auto, fallback and every built tile)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--reps", type=int, default=150, help="timed calls per path and round")
    ap.add_argument("--warm-runs", type=int, default=5, help="runs while the path is forced (warm-up + capture)")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "dense_model_tiles.json")
    args = ap.parse_args()
    import onnxruntime

    from trt_fastops import _C

    onnxruntime.set_default_logger_severity(3)
    paths = args.paths or ["auto", "fallback", *_C.dense_sm90_tiles()]
    env = BM.Env(0)
    env.warm_gpu(3.0)
    cases = [parse_case(c) for c in (args.cases or ["bert_base:1x128", "bert_base:1x512"])]
    rows, errors = [], []
    for case in cases:
        rows += run_case(case, paths, env, args, errors)
        print(f"[{case.label}] done", flush=True)
    head = f"{'case':18s} {'path':18s} {'replay':>8s} {'best':>8s} {'gelu/call':>9s} {'kernels':>8s} {'diff':>8s}"
    lines = [head, "-" * len(head)]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['case']:18s} {r['path']:18s} {r['error'][:90]}")
            continue
        g = r["gelu_us_per_call"]
        lines.append(f"{r['case']:18s} {r['path']:18s} {r['replay_us']:8.1f} {r['best_round_us']:8.1f} "
                     f"{g if g is not None else float('nan'):9.2f} {r['gpu_us_per_run']:8.1f} "
                     f"{r['diff_vs_first']:8.4f}")
    doc = {**ort_torch_header("tune_dense"),
           "method": f"OrtModel (CUDA graphs, copy_outputs=False), one capture per GELU path; {args.rounds} "
                     f"interleaved rounds of {args.reps} run + synchronise calls per path (µs: median of the "
                     "rounds' medians, and the best round); kernel times from torch.profiler over 10 replays",
           "rows": rows, "errors": errors}
    return write_results(args.out, doc, errors, "\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
