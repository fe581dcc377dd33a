#!/usr/bin/env python3
"""Per-kernel GPU profile of the end-to-end benchmark's variants: what each one runs.

    python3 scripts/profile_models.py                  # BERT-base b32 s512 and b1 s128, ViT-B/16 b32
    python3 scripts/profile_models.py --case bert_base:8x128 --case gpt2:1x1024 --top 25
    python3 scripts/profile_models.py --target portable   # ours without ORT contrib ops
    python3 scripts/profile_models.py --graphs --case bert_base:1x128   # CUDA-graph replays: GPU span and gaps
    python3 scripts/profile_models.py --dry-run        # the plan; needs no GPU and builds nothing

Builds the models exactly as scripts/bench_models.py does (its prepare(): float16, seeded
weights, the same rewrite and onnxruntime.transformers optimizer call) and runs each variant
  ort      ONNX Runtime CUDA EP on the original graph
  ortopt   after onnxruntime.transformers.optimizer fusions
  ours     the trt_fastops rewrite (--target ort: with ORT contrib ops such as BiasGelu; portable: without)
through trt_fastops.runtime.OrtModel with CUDA graphs OFF (so every kernel is a separate launch
the profiler sees), --warmup plain runs, then --iters runs under torch.profiler with CUDA
activity. CUPTI records every kernel in the process, ONNX Runtime's included. Printed per
variant: the top kernels by GPU time per run (with launches per run and the mean duration),
GPU time per kernel class (gemm / attention / norm / elementwise+copy / other: a name match,
indicative only), total GPU time and kernel launches per run, and the wall time per run
(measured separately, without the profiler). Everything goes to --out as JSON as well.

--graphs profiles CUDA-graph replays instead (OrtModel with cuda_graph=True, copy_outputs=False,
as bench_models times them). Each replay's GPU activities are found by the correlation id of its
cudaGraphLaunch; per run it adds: the replay's GPU span (first kernel start to last kernel end),
the idle gaps inside it (span - kernel time), the latency from the cudaGraphLaunch call to the
first kernel (and the first replay's opening activities), and the host's CUDA runtime calls (count and
µs per run by name). wall - span is what the host adds around the GPU work. The profiler itself
slows graph replays: a torch graph of 96 small kernels replays in 119 µs unprofiled but starts
its GPU work 125 µs after cudaGraphLaunch under CUPTI (scripts/graph_launch.py), so read spans
and the launch latency as comparisons between variants, not as their unprofiled times.

Case syntax: MODEL[:BATCHxSEQ] for bert_base / gpt2 / llama_gqa, MODEL[:BATCH] for vit_b16
(196 patches) and resnet50 (224 px); MODEL alone takes the bench_models default size.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import json
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.append(str(REPO))  # after site-packages: the installed trt_fastops wins; models/ comes from here
from scripts import bench_models as BM  # noqa: E402
from scripts._bench_common import driver_version  # noqa: E402

DEFAULT_CASES = ("bert_base:32x512", "bert_base:1x128", "vit_b16:32")
VARIANTS = ("ort", "ortopt", "ours")
#: kernel classes, first match wins (attention before gemm: ORT's fused attention kernels are cutlass / fmha)
CLASSES = (
    ("attention", re.compile(r"fmha|flash|attention|mha|softmax", re.I)),
    ("gemm", re.compile(r"gemm|nvjet|xmma|cublas|cutlass|sm\d+_.*tensorop|wgmma", re.I)),
    ("norm", re.compile(r"layer_?norm|skip_?layer|rms_?norm|norm_kernel|LayerNorm|SkipLayerNorm", re.I)),
    ("elementwise+copy", re.compile(r"elementwise|vectorized|binary|unary|gelu|erf|transpose|split|concat|gather|"
                                    r"expand|where|cast|reduce|_add|add_|mul|div|sub|copy|memcpy|memset|slice|"
                                    r"fill|pad|tile", re.I)),
)


@dataclasses.dataclass(frozen=True)
class Case:
    key: str  # bench_models model key
    batch: int | None = None
    seq: int | None = None

    @property
    def label(self) -> str:
        if self.batch is None:
            return self.key
        return f"{self.key} b{self.batch}" + (f" s{self.seq}" if self.seq is not None else "")


def parse_case(text: str) -> Case:
    key, _, size = text.strip().partition(":")
    if key not in BM.MODEL_KEYS:
        raise SystemExit(f"profile_models: unknown model {key!r} in --case {text!r}; choose from "
                         f"{', '.join(BM.MODEL_KEYS)}")
    if not size:
        return Case(key)
    seq_model = key in ("bert_base", "gpt2", "llama_gqa")
    m = re.fullmatch(r"(\d+)x(\d+)", size) if seq_model else re.fullmatch(r"(\d+)", size)
    if m is None:
        want = "BATCHxSEQ, e.g. 32x512" if seq_model else "BATCH, e.g. 32"
        raise SystemExit(f"profile_models: --case {text!r}: the size of {key} is {want}")
    nums = [int(g) for g in m.groups()]
    if any(n < 1 for n in nums):
        raise SystemExit(f"profile_models: --case {text!r}: sizes must be >= 1")
    return Case(key, nums[0], nums[1] if seq_model else None)


def bench_for(case: Case) -> BM.Bench:
    """bench_models' Bench of the case's model, at the case's size (one input signature)."""
    base = next(b for b in BM.FULL if b.key == case.key)
    if case.batch is None:
        return dataclasses.replace(base, dims=base.dims[:1])
    if base.dims:  # dynamic axes (BERT): the size is an input signature
        return dataclasses.replace(base, dims=((case.batch, case.seq),))
    kw = dict(base.build_kw)
    kw["batch"] = case.batch
    if case.seq is not None:
        kw["seq"] = case.seq
    return dataclasses.replace(base, build_kw=tuple(kw.items()))


def classify(name: str) -> str:
    for cls, pattern in CLASSES:
        if pattern.search(name):
            return cls
    return "other"


def short_name(name: str, width: int = 96) -> str:
    """Kernel names without their (often very long) template argument lists."""
    out, depth = [], 0
    for ch in name:
        if ch == "<":
            if depth == 0:
                out.append("<...>")
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    text = re.sub(r"\s+", " ", "".join(out)).strip()
    return text if len(text) <= width else text[: width - 3] + "..."


def gpu_events(trace: dict) -> list[dict]:
    """Every GPU activity of a Chrome trace (torch.profiler's export_chrome_trace): kernels,
    memcpys and memsets as {name, ts, dur, corr} (µs); memcpy/memset names get their category."""
    out = []
    for ev in trace.get("traceEvents", []):
        cat = str(ev.get("cat", "")).lower()
        if ev.get("ph") != "X" or cat not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        name = str(ev.get("name", "?"))
        if cat != "kernel":
            name = f"[{cat}] {name}"
        out.append({"name": name, "ts": float(ev.get("ts", 0.0)), "dur": float(ev.get("dur", 0.0)),
                    "corr": (ev.get("args") or {}).get("correlation")})
    return out


def runtime_events(trace: dict) -> list[dict]:
    """The host's CUDA runtime / driver API calls of the trace as {name, ts, dur, corr}."""
    out = []
    for ev in trace.get("traceEvents", []):
        if ev.get("ph") != "X" or str(ev.get("cat", "")).lower() not in ("cuda_runtime", "cuda_driver"):
            continue
        out.append({"name": str(ev.get("name", "?")), "ts": float(ev.get("ts", 0.0)),
                    "dur": float(ev.get("dur", 0.0)), "corr": (ev.get("args") or {}).get("correlation")})
    return out


def kernels_from_trace(trace: dict) -> list[tuple[str, float]]:
    """(name, duration µs) of every GPU activity of a Chrome trace."""
    return [(e["name"], e["dur"]) for e in gpu_events(trace)]


def replay_stats(trace: dict, iters: int) -> dict:
    """Per-run GPU span, gaps and launch latency of CUDA-graph replays, and the host's runtime calls.

    A replay's activities carry the correlation id of the cudaGraphLaunch that started them."""
    calls = runtime_events(trace)
    launches = {c["corr"]: c for c in calls if c["name"].startswith(("cudaGraphLaunch", "cuGraphLaunch"))}
    groups: dict = defaultdict(list)
    for e in gpu_events(trace):
        if e["corr"] in launches:
            groups[e["corr"]].append(e)
    spans, gaps, latency, counts = [], [], [], []
    first: list = []
    for corr, evs in groups.items():
        if not first:  # the first replay's opening activities, offsets from its cudaGraphLaunch
            t_launch = launches[corr]["ts"]
            first = [{"name": short_name(e["name"], 60), "start_us": round(e["ts"] - t_launch, 2),
                      "dur_us": round(e["dur"], 2)} for e in sorted(evs, key=lambda e: e["ts"])[:8]]
        start = min(e["ts"] for e in evs)
        span = max(e["ts"] + e["dur"] for e in evs) - start
        spans.append(span)
        gaps.append(span - sum(e["dur"] for e in evs))
        latency.append(start - launches[corr]["ts"])
        counts.append(len(evs))
    by_call: dict = defaultdict(lambda: [0.0, 0])
    for c in calls:
        by_call[c["name"]][0] += c["dur"]
        by_call[c["name"]][1] += 1
    med = (lambda xs: round(statistics.median(xs), 2) if xs else None)
    return {"replays": len(groups), "span_us": med(spans), "gaps_us": med(gaps), "launch_to_gpu_us": med(latency),
            "activities_per_replay": med(counts), "first_activities": first,
            "runtime_calls_per_run": {n: {"calls": round(k / iters, 2), "us": round(t / iters, 1)}
                                      for n, (t, k) in sorted(by_call.items(), key=lambda kv: -kv[1][0])}}


def summarize(kernels: list[tuple[str, float]], iters: int, top: int) -> dict:
    """Per-run totals, per-class times and the top kernels (grouped by full name)."""
    by_name: dict = defaultdict(lambda: [0.0, 0])
    by_class: dict = defaultdict(float)
    for name, dur in kernels:
        by_name[name][0] += dur
        by_name[name][1] += 1
        by_class[classify(name)] += dur
    total = sum(d for _, d in kernels)
    rows = sorted(by_name.items(), key=lambda kv: -kv[1][0])
    top_rows = [{"kernel": short_name(n), "name": n, "class": classify(n), "us_per_run": round(t / iters, 2),
                 "launches_per_run": round(c / iters, 2), "mean_us": round(t / c, 2) if c else 0.0,
                 "share": round(t / total, 4) if total else 0.0} for n, (t, c) in rows[:top]]
    return {"gpu_us_per_run": round(total / iters, 1), "launches_per_run": round(len(kernels) / iters, 1),
            "distinct_kernels": len(by_name),
            "classes_us_per_run": {k: round(v / iters, 1) for k, v in sorted(by_class.items(), key=lambda kv: -kv[1])},
            "top": top_rows}


def format_variant(label: str, variant: str, s: dict) -> str:
    lines = [f"--- {label} / {variant}: GPU {s['gpu_us_per_run'] / 1e3:.3f} ms per run in "
             f"{s['launches_per_run']:g} launches ({s['distinct_kernels']} distinct kernels); wall "
             f"{s.get('wall_ms', float('nan')):.3f} ms per run (no profiler)"]
    lines.append("    by class (us/run): " + ", ".join(f"{k} {v:.0f}" for k, v in s["classes_us_per_run"].items()))
    g = s.get("graph")
    if g:
        lines.append(f"    graph replay: span {g['span_us']} us, gaps {g['gaps_us']} us, cudaGraphLaunch -> first "
                     f"kernel {g['launch_to_gpu_us']} us, {g['activities_per_replay']} activities ({g['replays']} "
                     f"replays)")
        lines.append("    host CUDA calls per run: " + ", ".join(
            f"{n} {c['calls']:g}x {c['us']:.1f} us" for n, c in list(g["runtime_calls_per_run"].items())[:6]))
    lines.append(f"    {'us/run':>9s} {'share':>6s} {'n/run':>6s} {'mean us':>8s}  kernel")
    for r in s["top"]:
        lines.append(f"    {r['us_per_run']:9.1f} {100 * r['share']:5.1f}% {r['launches_per_run']:6g} "
                     f"{r['mean_us']:8.1f}  {r['kernel']}")
    return "\n".join(lines)


def format_summary(results: list[dict]) -> str:
    head = f"{'case':22s} {'variant':8s} {'GPU ms':>8s} {'wall ms':>8s} {'launches':>9s}  " \
           f"{'gemm':>7s} {'attn':>7s} {'norm':>7s} {'elem':>7s} {'other':>7s}  (GPU us per run by class)"
    lines = [head, "-" * len(head)]
    for res in results:
        for v in VARIANTS:
            s = res["variants"].get(v)
            if not isinstance(s, dict) or "gpu_us_per_run" not in s:
                note = s.get("note", "not run") if isinstance(s, dict) else "not run"
                lines.append(f"{res['case']:22s} {v:8s} {note}")
                continue
            c = s["classes_us_per_run"]
            lines.append(f"{res['case']:22s} {v:8s} {s['gpu_us_per_run'] / 1e3:8.3f} {s.get('wall_ms', 0.0):8.3f} "
                         f"{s['launches_per_run']:9g}  " + " ".join(
                             f"{c.get(k, 0.0):7.0f}" for k in ("gemm", "attention", "norm", "elementwise+copy",
                                                                "other")))
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", action="append", dest="cases", metavar="MODEL[:SIZE]",
                    help=f"a model and size (repeatable; default: {' '.join(DEFAULT_CASES)})")
    ap.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    ap.add_argument("--target", choices=("ort", "portable"), default="ort",
                    help="rewrite target of ours (ort: ORT contrib ops such as BiasGelu allowed; portable: without)")
    ap.add_argument("--dtype", choices=("float16", "float32"), default="float16")
    ap.add_argument("--device", default="0", help="CUDA device index")
    ap.add_argument("--warmup", type=int, default=3,
                    help="runs before profiling (with --graphs the first one captures the graph)")
    ap.add_argument("--iters", type=int, default=5, help="profiled runs (per-run numbers are over these)")
    ap.add_argument("--top", type=int, default=20, help="kernels listed per variant")
    ap.add_argument("--graphs", action="store_true",
                    help="profile CUDA-graph replays (span, gaps, launch latency, host CUDA calls) instead of "
                         "plain runs")
    ap.add_argument("--out", type=Path, default=None,
                    help="JSON output (default bench/results/profile_models.json, profile_models_graphs.json with "
                         "--graphs)")
    ap.add_argument("--dry-run", action="store_true", help="list the cases; builds nothing, needs no GPU")
    return ap


def prepare_args(args) -> argparse.Namespace:
    """The namespace bench_models.prepare() reads."""
    return argparse.Namespace(dtype=args.dtype, no_ortopt="ortopt" not in args.variants, use_trt=False,
                              target=args.target)


def profile_runner(runner, feeds: dict, sync, warmup: int, iters: int) -> dict:
    """The Chrome trace of `iters` runs after `warmup` ones."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(warmup):
        runner.run(feeds)
    sync()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            runner.run(feeds)
        sync()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        return json.loads(path.read_text())


def profile_case(case: Case, args, env) -> dict:
    bench = bench_for(case)
    t0 = time.perf_counter()
    prep = BM.prepare(bench, prepare_args(args))
    graphs, info = prep["graphs"], prep["info"]
    feeds = env.to_device(prep["feeds"][0])
    label = case.label if case.batch is not None else BM.case_labels(bench)[0]
    res = {"case": label, "model": bench.model, "inputs": {k: list(v.shape) for k, v in prep["feeds"][0].items()},
           "rewrite": info["rewrite"], "ortopt": info.get("ortopt"), "variants": {},
           "prepare_seconds": round(time.perf_counter() - t0, 1)}
    print(f"[{label}] rewrite {info['rewrite']['counts']} (target {args.target}); ortopt "
          f"{(info.get('ortopt') or {}).get('fused_ops', (info.get('ortopt') or {}).get('note'))}", flush=True)
    for v in args.variants:
        data = graphs.get(v)
        if data is None:
            note = (info.get("ortopt") or {}).get("note", "not available")
            res["variants"][v] = {"note": note}
            print(f"--- {label} / {v}: skipped ({note})")
            continue
        try:
            runner = env.ort_model(data, args.graphs)
            if args.graphs and not runner.graphs_enabled:
                raise RuntimeError(f"no CUDA graphs: {runner.graph_fallback}")
            trace = profile_runner(runner, feeds, env.sync, args.warmup, args.iters)
            s = summarize(kernels_from_trace(trace), args.iters, args.top)
            if args.graphs:
                s["graph"] = replay_stats(trace, args.iters)
            s["wall_ms"] = BM.time_calls(lambda: runner.run(feeds), env.sync, 0.25, 10, 200)["ms"]
            s["graph_runs"] = runner.stats().get("graph_runs")
        except Exception as e:  # noqa: BLE001 - one failing variant must not end the run
            s = {"note": f"failed: {type(e).__name__}: {str(e).strip()[:300]}"}
            print(f"--- {label} / {v}: {s['note']}", flush=True)
        else:
            print(format_variant(label, v, s), flush=True)
        res["variants"][v] = s
        runner = None
        env.release()
    return res


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.out is None:
        args.out = REPO / "bench" / "results" / ("profile_models_graphs.json" if args.graphs else "profile_models.json")
    if args.warmup < 0 or args.iters < 1 or args.top < 1:
        raise SystemExit("profile_models: need --warmup >= 0, --iters >= 1 and --top >= 1")
    cases = [parse_case(c) for c in (args.cases or DEFAULT_CASES)]
    if args.dry_run:
        for c in cases:
            b = bench_for(c)
            print(f"{c.label:22s} model {b.model:18s} build {dict(b.build_kw)} dims {list(b.dims)}")
        print(f"{len(cases)} cases x variants {', '.join(args.variants)} (OrtModel, CUDA graphs "
              f"{'on: replays' if args.graphs else 'off'}; "
              f"{args.warmup} warm-up + {args.iters} profiled runs); ours: target {args.target}; dtype {args.dtype}")
        return 0
    device = BM.parse_device(args.device)
    if device < 0:
        raise SystemExit("profile_models: needs a CUDA device (kernel profiles); --device cpu is not supported")
    try:
        import onnxruntime

        env = BM.Env(device)
        import torch.profiler  # noqa: F401
    except (ImportError, RuntimeError) as e:
        print(f"profile_models: cannot run: {e}", file=sys.stderr)
        return 2
    if "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
        print("profile_models: cannot run: onnxruntime has no CUDAExecutionProvider", file=sys.stderr)
        return 2
    onnxruntime.set_default_logger_severity(3)
    results = []
    for case in cases:
        try:
            results.append(profile_case(case, args, env))
        except Exception as e:  # noqa: BLE001
            print(f"[{case.label}] ERROR {type(e).__name__}: {e}", flush=True)
            results.append({"case": case.label, "error": f"{type(e).__name__}: {e}", "variants": {}})
        env.release()
    import onnx
    import trt_fastops

    doc = {"benchmark": "profile_models", "gpu": env.torch.cuda.get_device_name(device),
           "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
           "versions": {"onnxruntime": onnxruntime.__version__, "onnx": onnx.__version__,
                        "trt_fastops": trt_fastops.__version__, "torch": env.torch.__version__,
                        "cuda": env.torch.version.cuda, "driver": driver_version()},
           "dtype": args.dtype, "target": args.target,
           "method": f"OrtModel, CUDA graphs {'on (replays)' if args.graphs else 'off'}, {args.warmup} warm-up runs, "
                     f"torch.profiler (CUDA activity) over "
                     f"{args.iters} runs; per-run = total / {args.iters}; wall_ms measured without the profiler",
           "classes": "name match, indicative: " + "; ".join(f"{k} = /{p.pattern}/" for k, p in CLASSES),
           "cases": results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"\nwrote {args.out}")
    print(format_summary([r for r in results if "error" not in r]))
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
