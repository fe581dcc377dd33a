#!/usr/bin/env python3
"""How fast a CUDA graph of our kernels starts: cudaGraphLaunch -> first GPU activity.

Inside BERT (profile_models.py --graphs) our rewritten model's graph replay reached the GPU
70-85 us after cudaGraphLaunch began, ORT-optimized's 15-18 us after (its launch call took
longer, but its work started while the call was still submitting). This script captures torch
CUDA graphs of ~96 small nodes each, differing in one kind of node, and reports per graph:
the host time of cudaGraphLaunch, launch -> first GPU activity, the replay's GPU span and a
replay's wall time (replay + synchronize, no profiler):

    torch      96 torch elementwise kernels (the reference)
    copy       a device-to-device copy node first, then 95 torch kernels
    probe      our tiny test kernel (_C.graph_probe, a plain launch) x 96: a kernel of our module
    cluster    the same kernel launched in clusters of 2 (cudaLaunchKernelEx) x 96
    norm       our LayerNorm (trt_fastops.ops.layer_norm) x 96
    attention  our attention (BERT's b1 s128 shape, key-padding mask) x 12 + 84 torch kernels
    dense      our Dense (cuBLASLt, bias) x 12 + 84 torch kernels
    gelu       our Dense with GELU (CUTLASS sm_90a) x 12 + 84 torch kernels
    bert       BERT's order: norm, dense, attention, dense, norm, gelu, dense per layer x 12

    python3 scripts/graph_launch.py [--graphs torch norm ...] [--replays 200]

Writes bench/results/graph_launch.json and prints a table. Finding (H100, 2026-11-26): every
graph, torch's own included, starts 72-125 us after the launch call under the profiler, while
the torch graph replays whole in 119 us without it: the in-model gap is CUPTI's, not ours.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench_common import driver_version, gpu_setup, write_results  # noqa: E402
from profile_models import profile_runner, replay_stats  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
GRAPHS = ("torch", "copy", "probe", "cluster", "norm", "attention", "dense", "gelu", "bert")
HIDDEN, HEADS, SEQ, FFN = 768, 12, 128, 3072


def make_graph_bodies(torch, _C, ops):
    """name -> a function enqueueing that graph's work (called once under capture)."""
    g = torch.Generator(device="cuda").manual_seed(0)
    dt = torch.float16

    def rnd(*shape, scale=1.0):
        return (scale * torch.randn(*shape, device="cuda", generator=g)).to(dt)

    x = rnd(SEQ, HIDDEN)
    small = rnd(SEQ, HIDDEN)
    gamma, beta = rnd(HIDDEN) + 1, rnd(HIDDEN)
    w_qkv, b_qkv = rnd(HIDDEN, 3 * HIDDEN, scale=HIDDEN ** -0.5), rnd(3 * HIDDEN)
    w_o, b_o = rnd(HIDDEN, HIDDEN, scale=HIDDEN ** -0.5), rnd(HIDDEN)
    w_up, b_up = rnd(HIDDEN, FFN, scale=HIDDEN ** -0.5), rnd(FFN)
    w_dn, b_dn = rnd(FFN, HIDDEN, scale=FFN ** -0.5), rnd(HIDDEN)
    qkv = torch.empty(SEQ, 3 * HIDDEN, device="cuda", dtype=dt)
    ctx = torch.empty(SEQ, HIDDEN, device="cuda", dtype=dt)
    up = torch.empty(SEQ, FFN, device="cuda", dtype=dt)
    y = torch.empty(SEQ, HIDDEN, device="cuda", dtype=dt)
    mask = torch.zeros(1, 1, 1, SEQ, device="cuda", dtype=dt)
    mask[..., SEQ - 16:] = -10000.0
    ws = torch.empty(_C.dense_workspace_bytes(), dtype=torch.uint8, device="cuda")
    copy_src = torch.randn(SEQ, HIDDEN, device="cuda").to(dt)
    px = torch.randn(SEQ * HIDDEN, device="cuda", generator=g)
    py_ = torch.empty_like(px)

    def s():
        return torch.cuda.current_stream().cuda_stream

    def dense(src, w, b, dst, act="none"):
        m, k = src.shape
        n = w.shape[1]
        _C.dense_forward("float16", src.data_ptr(), w.data_ptr(), dst.data_ptr(), m, n, k, bias=b.data_ptr(),
                         activation=act, workspace=ws.data_ptr(), workspace_bytes=ws.numel(), stream=s())

    def attention():
        q, k, v = qkv.view(1, SEQ, 3, HEADS, HIDDEN // HEADS).unbind(2)
        ops.attention(q, k, v, mask=mask, layout="bshd", out=ctx.view(1, SEQ, HEADS, HIDDEN // HEADS))

    def norm():
        return ops.layer_norm(x, gamma, beta, skip=small)

    def torch_ops(n):
        for _ in range(n):
            small.mul_(0.999)

    def body(name):
        if name == "torch":
            torch_ops(96)
        elif name == "copy":
            x.copy_(copy_src)
            torch_ops(95)
        elif name in ("probe", "cluster"):
            for _ in range(96):
                _C.graph_probe(px.data_ptr(), py_.data_ptr(), px.numel(), a=0.5, b=1.0,
                               cluster=2 if name == "cluster" else 1, stream=s())
        elif name == "norm":
            for _ in range(96):
                norm()
        elif name == "attention":
            for _ in range(12):
                attention()
                torch_ops(7)
        elif name == "dense":
            for _ in range(12):
                dense(x, w_o, b_o, y)
                torch_ops(7)
        elif name == "gelu":
            for _ in range(12):
                dense(x, w_up, b_up, up, "gelu")
                torch_ops(7)
        elif name == "bert":
            for _ in range(12):
                norm()
                dense(x, w_qkv, b_qkv, qkv)
                attention()
                dense(ctx, w_o, b_o, y)
                norm()
                dense(x, w_up, b_up, up, "gelu")
                dense(up, w_dn, b_dn, y)
        else:
            raise ValueError(name)

    return body


class _Replays:
    """A graph as profile_runner's runner: each run is one replay, waited for."""

    def __init__(self, torch, graph):
        self.torch, self.graph = torch, graph

    def run(self, _feeds):
        self.graph.replay()
        self.torch.cuda.synchronize()


def measure(torch, graph, replays: int) -> dict:
    runner = _Replays(torch, graph)
    for _ in range(20):
        runner.run(None)
    walls = []
    for _ in range(replays):
        t0 = time.perf_counter()
        runner.run(None)
        walls.append((time.perf_counter() - t0) * 1e6)
    iters = 10
    stats = replay_stats(profile_runner(runner, {}, torch.cuda.synchronize, 0, iters), iters)
    launch = stats["runtime_calls_per_run"].get("cudaGraphLaunch") or {}
    return {"wall_us": round(statistics.median(walls), 1), "launch_call_us": launch.get("us"),
            "launch_to_gpu_us": stats["launch_to_gpu_us"], "span_us": stats["span_us"],
            "gaps_us": stats["gaps_us"], "activities": stats["activities_per_replay"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graphs", nargs="+", choices=GRAPHS, default=list(GRAPHS))
    ap.add_argument("--replays", type=int, default=200)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "graph_launch.json")
    args = ap.parse_args()
    setup = gpu_setup("graph_launch", want_ort=False)
    if isinstance(setup, int):
        return setup
    torch, _C, _, device_index, _ = setup
    from trt_fastops import ops

    body = make_graph_bodies(torch, _C, ops)
    rows, errors = [], []
    for name in args.graphs:
        try:
            body(name)  # eager once: plans, module loads and workspaces before capture
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                body(name)
            torch.cuda.synchronize()
            row = {"graph": name, **measure(torch, graph, args.replays)}
        except Exception as e:  # noqa: BLE001 - one graph's failure is reported, the others still run
            errors.append(f"{name}: {type(e).__name__}: {e}")
            continue
        rows.append(row)
        print(json.dumps(row), flush=True)
    head = f"{'graph':10s} {'wall us':>8s} {'launch call':>11s} {'-> GPU':>8s} {'span':>8s} {'gaps':>7s} {'nodes':>6s}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['graph']:10s} {r['wall_us']:8.1f} {r['launch_call_us'] or 0:11.1f} "
                     f"{r['launch_to_gpu_us'] or 0:8.1f} {r['span_us'] or 0:8.1f} {r['gaps_us'] or 0:7.1f} "
                     f"{r['activities'] or 0:6g}")
    doc = {"benchmark": "graph_launch", "gpu": torch.cuda.get_device_name(device_index),
           "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
           "versions": {"torch": torch.__version__, "cuda": torch.version.cuda, "driver": driver_version()},
           "method": "torch CUDA graphs; wall = replay + synchronize (median); launch figures from torch.profiler "
                     "over 10 replays (median)", "rows": rows, "errors": errors}
    return write_results(args.out, doc, errors, "\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
