#!/usr/bin/env python3
"""End-to-end model benchmark: our rewritten models against ONNX Runtime, in one run.

    python3 scripts/bench_models.py                 # full set (H100: ~3 minutes) -> bench/results/models.json
    python3 scripts/bench_models.py --quick         # one or two cases per model family (~1.5 minutes)
    python3 scripts/bench_models.py --dry-run       # the plan; needs no GPU and builds nothing
    python3 scripts/bench_models.py --models bert_base resnet50 --min-time 0.5

Cases (float16, models from models/build.py with seeded random weights):
  bert_base   BERT-base (110M), dynamic axes: batch 1 / 8 / 32 x seq 128 and 512
  gpt2        GPT-2 small (124M) causal decoder, prefill of 1024 tokens
  llama_gqa   4 TinyLlama-1.1B blocks (hidden 2048, 32 heads, 4 KV heads, RMSNorm, rotary), 1024 tokens
  vit_b16     ViT-B/16 encoder at 224x224, batch 32
  resnet50    ResNet-50 at 224x224, batch 32
Variants, each timed in this run on the same device inputs (torch CUDA tensors):
  ort      ONNX Runtime CUDA EP on the original graph
  ortopt   the same after onnxruntime.transformers.optimizer fusions (the strongest ONNX-side
           baseline; the fused ops it produced are recorded per model; where it fuses nothing,
           ort stands in for it; none for CNNs)
  ours     the trt_fastops-rewritten graph (transformers: every rule; CNNs: conv="all"), for
           --target ort (default: ONNX Runtime contrib ops such as BiasGelu allowed) or portable
  trt      the rewritten graph as a TensorRT engine with our plugins (when tensorrt imports)
each plain and with CUDA graphs (suffix _graph), all through trt_fastops.runtime.OrtModel
(TrtEngine for trt) with copy_outputs=False, so every variant pays the same harness cost.
Torch eager is not measured: the zoo's models are built with onnx.helper, not exported from torch.

Correctness: every variant's output is compared with the first variant's (ort, the original
graph on the CUDA EP) before it is timed: max |a - b| / (1 + |b|) <= --tol. A mismatch is
reported (row "errors", exit status 1) and the variant is still timed.
Timing: the GPU first kept busy for --gpu-warmup seconds; then --rounds rounds per model (each
round opens, times and closes every variant once, the order rotated by one per round, so drifts
of the machine land on all variants; the first round also checks outputs; the median over rounds
is reported): wall clock of run() + device synchronize per call, after 3 warm-up calls (the
first call of a signature captures its graph); calls repeat for --min-time seconds (10..200 calls);
median, p10 and p90 in the JSON, medians (ms) in the table.
Bars (issue 6): ours_graph >= 1.1x the faster ortopt variant on every transformer case; CUDA
graphs cut batch-1 BERT-base latency (ours) >= 1.5x. Missed bars are marked '!' and listed per
row; they do not change the exit status.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import gc
import importlib
import json
import logging
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.append(str(REPO))  # after site-packages: the installed trt_fastops wins; models/ comes from here
from scripts._bench_common import driver_version  # noqa: E402

VARIANTS = ("ort", "ortopt", "ours", "trt")
TARGET_VS_ORTOPT = 1.1
TARGET_GRAPH_GAIN_BERT_B1 = 1.5
DEFAULT_TOL = 0.05  # float16, 4-12 layers: ours computes softmax / attention in float32, ORT in float16
TORCH_EAGER_NOTE = "not measured: the zoo's models are built with onnx.helper, not exported from torch modules"


@dataclasses.dataclass(frozen=True)
class Bench:
    """One model build and the input signatures it is timed at."""

    key: str  # name in the results
    model: str  # models.build registry name
    family: str  # "transformer" | "cnn"
    build_kw: tuple = ()  # (name, value) pairs overriding the registry entry's keywords
    dims: tuple = ()  # ((batch, sequence), ...) for models with symbolic axes; () for static models
    ort_opt: str | None = None  # onnxruntime.transformers.optimizer model_type; None: no optimizer baseline
    conv: str | None = None  # rewrite(conv=...)

    @property
    def kwargs(self) -> dict:
        return dict(self.build_kw)


BERT_DIMS = ((1, 128), (8, 128), (32, 128), (1, 512), (8, 512), (32, 512))

FULL = (
    Bench("bert_base", "bert_base_dynamic", "transformer", dims=BERT_DIMS, ort_opt="bert"),
    Bench("gpt2", "gpt2_small", "transformer", ort_opt="gpt2"),
    Bench("llama_gqa", "llama_small_gqa", "transformer", ort_opt="gpt2"),
    Bench("vit_b16", "vit_base", "transformer", ort_opt="vit"),
    Bench("resnet50", "resnet50", "cnn", conv="all"),
)
QUICK = (
    Bench("bert_base", "bert_base_dynamic", "transformer", dims=((1, 128), (8, 128)), ort_opt="bert"),
    Bench("gpt2", "gpt2_small", "transformer", build_kw=(("seq", 256),), ort_opt="gpt2"),
    Bench("vit_b16", "vit_base", "transformer", build_kw=(("batch", 8),), ort_opt="vit"),
    Bench("resnet50", "resnet50", "cnn", build_kw=(("batch", 8),), conv="all"),
)
# CI sizes (--tiny): the same builders and code paths at the tiny configurations.
TINY = (
    Bench("bert_base", "bert_base_dynamic", "transformer", build_kw=(("config", "tiny"),), dims=((2, 8), (1, 16)),
          ort_opt="bert"),
    Bench("gpt2", "gpt2_small", "transformer", build_kw=(("config", "tiny"),), ort_opt="gpt2"),
    Bench("llama_gqa", "llama_small_gqa", "transformer", build_kw=(("config", "tiny"), ("kv_heads", 2)),
          ort_opt="gpt2"),
    Bench("vit_b16", "vit_base", "transformer", build_kw=(("config", "tiny"), ("patch", 4), ("grid", None)),
          ort_opt="vit"),
    Bench("resnet50", "resnet50", "cnn", build_kw=(("blocks", (1, 1, 1, 1)), ("width", 8), ("size", 32),
                                                   ("classes", 10), ("batch", 2)), conv="all"),
)
MODEL_KEYS = tuple(b.key for b in FULL)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="a smaller set: one or two cases per family, no llama")
    size.add_argument("--tiny", action="store_true", help="the CI-sized models (a smoke test of the script)")
    ap.add_argument("--models", nargs="+", choices=MODEL_KEYS, help="only these models (default: all of the set)")
    ap.add_argument("--dtype", choices=("float16", "float32"), default="float16")
    ap.add_argument("--device", default="0", help="CUDA device index, or 'cpu' (ORT CPU, no graphs: a smoke test)")
    ap.add_argument("--min-time", type=float, default=0.25, help="seconds of timed calls per measurement")
    ap.add_argument("--gpu-warmup", type=float, default=5.0, help="seconds of GPU work before timing anything")
    ap.add_argument("--rounds", type=int, default=3,
                    help="timing rounds per model: every variant once per round, order rotated; median of rounds")
    ap.add_argument("--min-reps", type=int, default=10)
    ap.add_argument("--max-reps", type=int, default=200)
    ap.add_argument("--tol", type=float, default=DEFAULT_TOL, help="max |a - b| / (1 + |b|) against the original")
    ap.add_argument("--target", choices=("ort", "portable"), default="ort",
                    help="rewrite target of ours: ort = ONNX Runtime contrib ops (BiasGelu / FastGelu) allowed, "
                         "portable = standard ONNX + trt_fastops ops only (the trt variant always uses portable)")
    ap.add_argument("--no-ortopt", action="store_true", help="skip the onnxruntime.transformers optimizer baseline")
    ap.add_argument("--tensorrt", choices=("auto", "on", "off"), default="auto",
                    help="TensorRT engines of the rewritten models: auto = when tensorrt imports (adds ~1 min of "
                         "engine builds per model)")
    ap.add_argument("--out", type=Path, help="results JSON (default bench/results/models.json; models-quick.json "
                                             "with --quick, models-tiny.json with --tiny)")
    ap.add_argument("--dry-run", action="store_true", help="list the cases and variants; builds nothing, needs no GPU")
    return ap


def parse_device(text: str) -> int:
    text = str(text).strip().lower()
    if text == "cpu":
        return -1
    if text.startswith("cuda:"):
        text = text[5:]
    if not text.isdigit():
        raise SystemExit(f"bench_models: --device must be a CUDA device index, cuda:N or cpu, got {text!r}")
    return int(text)


def plan(args) -> list[Bench]:
    benches = TINY if args.tiny else QUICK if args.quick else FULL
    if args.models:
        benches = tuple(b for b in benches if b.key in args.models)
    return list(benches)


def _merged_kwargs(bench: Bench) -> dict:
    from models import build as B

    return {**B.MODELS[bench.model].builder.keywords, **bench.kwargs}


def case_labels(bench: Bench) -> list[str]:
    """One label per timed input signature, without building the model."""
    from models import transformer as T

    kw = _merged_kwargs(bench)
    if bench.dims:
        return [f"{bench.key} b{b} s{s}" for b, s in bench.dims]
    if "config" in kw:
        cfg = T._config(kw["config"], batch=kw.get("batch"), seq=kw.get("seq"))
        return [f"{bench.key} b{cfg.batch} s{cfg.seq}"]
    return [f"{bench.key} b{kw.get('batch', 2)} {kw.get('size', 32)}px"]


def heads_hidden(bench: Bench) -> tuple[int, int]:
    from models import transformer as T

    kw = _merged_kwargs(bench)
    cfg = T._config(kw.get("config", "tiny"))
    return cfg.heads, cfg.hidden


def variant_names(tensorrt: bool) -> list[str]:
    names = []
    for v in VARIANTS:
        if v == "trt" and not tensorrt:
            continue
        names += [v, v + "_graph"]
    return names


def dry_run(args) -> int:
    from models import build as B

    trt_state = {"on": "on", "off": "off", "auto": "when tensorrt imports"}[args.tensorrt]
    print(f"{'case':24s} {'model':20s} {'rewrite':12s} {'ortopt':8s}")
    n = 0
    for bench in plan(args):
        for label in case_labels(bench):
            ortopt = "-" if (args.no_ortopt or not bench.ort_opt) else bench.ort_opt
            conv = f"conv={bench.conv}" if bench.conv else "all rules"
            print(f"{label:24s} {bench.model:20s} {conv:12s} {ortopt:8s}")
            n += 1
    variants = [v for v in variant_names(args.tensorrt != "off") if not (args.no_ortopt and v.startswith("ortopt"))]
    print(f"{n} cases x variants {', '.join(variants)} (trt: {trt_state}); ours: target {args.target}; "
          f"dtype {args.dtype}; correctness tol {args.tol}")
    for bench in plan(args):
        print(f"  {bench.model}: {B.MODELS[bench.model].description}")
    return 0


# ---------------------------------------------------------------------------------------
# numerics and timing


def to_numpy(x) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return x.astype(np.float32) if x.dtype.kind == "f" else x
    t = x.detach()
    if t.is_floating_point():
        t = t.float()
    return t.cpu().numpy()


def scaled_diff(got: dict, ref: dict) -> float:
    """max over outputs of max |a - b| / (1 + |b|) (inf on a shape mismatch or a non-finite value)."""
    worst = 0.0
    for name, r in ref.items():
        g = got.get(name)
        if g is None or g.shape != r.shape:
            return float("inf")
        d = np.abs(g.astype(np.float64) - r) / (1.0 + np.abs(r.astype(np.float64)))
        if not np.isfinite(d).all():
            return float("inf")
        worst = max(worst, float(d.max()) if d.size else 0.0)
    return worst


def time_calls(call, sync, min_time: float, min_reps: int, max_reps: int) -> dict:
    """Per-call wall clock (ms) of call() + sync(): median / p10 / p90 over an adaptive count."""
    for _ in range(3):
        call()
        sync()
    t0 = time.perf_counter()
    call()
    sync()
    est = time.perf_counter() - t0
    reps = int(min(max_reps, max(min_reps, min_time / max(est, 1e-6))))
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        call()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    return {"ms": round(statistics.median(times), 4), "p10_ms": round(times[len(times) // 10], 4),
            "p90_ms": round(times[min(len(times) - 1, (9 * len(times)) // 10)], 4), "reps": reps}


# ---------------------------------------------------------------------------------------
# model preparation


def ort_optimize(orig: bytes, bench: Bench) -> tuple[bytes | None, dict]:
    """onnxruntime.transformers.optimizer fusions of the original -> (bytes or None, info)."""
    import onnx

    try:
        from onnxruntime.transformers.optimizer import optimize_model
    except ImportError as e:
        return None, {"note": f"onnxruntime.transformers not importable: {e}"}
    heads, hidden = heads_hidden(bench)
    t0 = time.perf_counter()
    logging.disable(logging.WARNING)  # the optimizer logs every pattern it fails to match
    try:
        opt = optimize_model(onnx.load_from_string(orig), model_type=bench.ort_opt, num_heads=heads,
                             hidden_size=hidden, opt_level=0, use_gpu=True)
        model = opt.model
    except Exception as e:  # noqa: BLE001 - the optimizer's own failure is the baseline's note
        return None, {"note": f"optimizer failed: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"}
    finally:
        logging.disable(logging.NOTSET)
    before = Counter(n.op_type for n in onnx.load_from_string(orig).graph.node if n.op_type != "Constant")
    after = Counter(n.op_type for n in model.graph.node if n.op_type != "Constant")
    fused = {k: v for k, v in after.items() if k not in before}  # op types the fusions introduced
    info = {"model_type": bench.ort_opt, "num_heads": heads, "hidden_size": hidden, "fused_ops": fused,
            "seconds": round(time.perf_counter() - t0, 1)}
    if not fused and after == before:
        info["note"] = "the optimizer fused nothing: the same graph as ort (not timed twice; x_opt uses ort)"
        info["same_as_original"] = True
        return None, info
    return model.SerializeToString(), info


def prepare(bench: Bench, args) -> dict:
    """Builds the model and the graphs to time; returns bytes per variant and per-model info."""
    import onnx

    import trt_fastops
    from models import build as B

    t0 = time.perf_counter()
    model = B.build(bench.model, dtype=args.dtype, seed=0, **bench.kwargs)
    info = {"model": bench.model, "description": B.MODELS[bench.model].description, "family": bench.family,
            "build_kwargs": {k: list(v) if isinstance(v, tuple) else v for k, v in bench.kwargs.items()},
            "parameters": int(sum(int(np.prod(i.dims)) for i in model.graph.initializer)),
            "build_seconds": round(time.perf_counter() - t0, 1)}
    dims = [{"batch": b, "sequence": s} for b, s in bench.dims] or [None]
    feeds = [B.example_inputs(model, seed=i, dims=d) for i, d in enumerate(dims)]
    graphs = {"ort": model.SerializeToString()}
    t0 = time.perf_counter()
    result = trt_fastops.rewrite(model, conv=bench.conv, target=args.target)
    graphs["ours"] = result.model.SerializeToString()
    info["rewrite"] = {"counts": result.report.counts(), "refusals": len(result.report.refusals),
                       "conv": bench.conv, "target": args.target, "seconds": round(time.perf_counter() - t0, 1)}
    del model, result
    if bench.ort_opt and not args.no_ortopt:
        opt, info["ortopt"] = ort_optimize(graphs["ort"], bench)
        graphs["ortopt"] = opt
    else:
        graphs["ortopt"] = None
        info["ortopt"] = {"note": "disabled (--no-ortopt)" if args.no_ortopt else
                          "no onnxruntime.transformers optimizer model type for CNNs (ORT's session-level fusions "
                          "such as Conv + activation apply to the original)"}
    if args.use_trt:
        t0 = time.perf_counter()
        trt_model = trt_fastops.rewrite(onnx.load_from_string(graphs["ort"]), conv=bench.conv,
                                        plugin_attributes=True, target="portable").model
        graphs["trt"] = trt_model.SerializeToString()
        info["trt_rewrite_seconds"] = round(time.perf_counter() - t0, 1)
    return {"graphs": graphs, "info": info, "feeds": feeds}


# ---------------------------------------------------------------------------------------
# running


class Env:
    """Device, input conversion and synchronisation: torch on CUDA, numpy on the CPU."""

    def __init__(self, device: int):
        self.device = device
        self.torch = None
        if device >= 0:
            import torch

            if not torch.cuda.is_available():
                raise RuntimeError("no CUDA device visible to torch")
            self.torch = torch
            torch.cuda.set_device(device)

    def to_device(self, feeds: dict):
        if self.torch is None:
            return feeds
        return {k: self.torch.from_numpy(np.ascontiguousarray(v)).to(f"cuda:{self.device}") for k, v in feeds.items()}

    def sync(self):
        if self.torch is not None:
            self.torch.cuda.synchronize(self.device)

    def warm_gpu(self, seconds: float) -> None:
        """Keep the GPU busy (fp16 matmuls) for `seconds` before anything is timed: coming from idle
        (after a build), the first variants timed ran up to 1.3x slower on the H100 (ORT-optimized
        BERT b1 s128 + graphs: 0.83 ms in the first run of a machine session, 0.65 after)."""
        if self.torch is None or seconds <= 0:
            return
        a = self.torch.randn(4096, 4096, device=f"cuda:{self.device}", dtype=self.torch.float16)
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            for _ in range(20):
                a = (a @ a).clamp_(-1, 1)
            self.sync()
        del a
        self.release()

    def release(self):
        gc.collect()
        if self.torch is not None:
            self.torch.cuda.empty_cache()

    def ort_model(self, data: bytes, graphs: bool):
        from trt_fastops.runtime import OrtModel

        return OrtModel(data, "cpu" if self.device < 0 else self.device, cuda_graph=graphs, copy_outputs=False)


def _short(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0][:240] if text else ''}"


def check_variant(name: str, runner, rows: list[dict], feeds: list[dict], refs: dict, env: Env, args,
                  errors: list[str], graphs_wanted: bool) -> list[bool]:
    """First runs of one variant (an OrtModel or TrtEngine) on every case (graph capture where graphs
    are on) and its outputs checked against the reference variant's. Returns, per case, whether
    to time it (a failing run or a missing CUDA graph is noted in the row and not timed)."""
    timed = []
    for i, row in enumerate(rows):
        try:
            runner.run(feeds[i])  # first run of the signature (warm-up, capture)
            env.sync()
            out = {k: to_numpy(v) for k, v in runner.run(feeds[i]).items()}  # a replay where graphs are on
            if graphs_wanted and not runner.graphs_enabled:
                row[f"{name}_ms"] = None
                row[f"{name}_note"] = f"no CUDA graph: {runner.graph_fallback}"
                timed.append(False)
                continue
            if i not in refs:
                refs[i] = out
                row["reference"] = name
                ok, diff = all(np.isfinite(v).all() for v in out.values() if v.dtype.kind == "f"), 0.0
                if not ok:
                    errors.append(f"{row['case']}: {name}: the reference output is not finite")
            else:
                diff = scaled_diff(out, refs[i])
                ok = diff <= args.tol
                row["diff"][name] = diff if np.isfinite(diff) else str(diff)
                if not ok:
                    errors.append(f"{row['case']}: {name} differs from {row['reference']} by {diff:.3g} "
                                  f"(max |a - b| / (1 + |b|) > {args.tol})")
            if not ok:
                row[f"{name}_note"] = "WRONG result (timed anyway)"
            timed.append(True)
        except Exception as e:  # noqa: BLE001 - one failing variant must not end the run
            row[f"{name}_ms"] = None
            row[f"{name}_note"] = _short(e)
            errors.append(f"{row['case']}: {name}: {_short(e)}")
            timed.append(False)
    return timed


def time_variant(name: str, runner, rows: list[dict], feeds: list[dict], timed: list[bool], env: Env, args,
                 errors: list[str]) -> None:
    """One round of timing of one variant on every case it passed; each round's median is kept in
    row["timing"][name]["rounds"] and the row's {name}_ms becomes the median over rounds."""
    for i, row in enumerate(rows):
        if not timed[i]:
            continue
        try:
            stats = time_calls(lambda: runner.run(feeds[i]), env.sync, args.min_time, args.min_reps, args.max_reps)
        except Exception as e:  # noqa: BLE001
            row[f"{name}_ms"] = None
            row[f"{name}_note"] = _short(e)
            errors.append(f"{row['case']}: {name}: {_short(e)}")
            timed[i] = False
            continue
        t = row["timing"].setdefault(name, {"rounds": []})
        t["rounds"].append(stats)
        row[f"{name}_ms"] = round(statistics.median(r["ms"] for r in t["rounds"]), 4)


def run_variant(name: str, runner, rows: list[dict], feeds: list[dict], refs: dict, env: Env, args,
                errors: list[str], graphs_wanted: bool) -> None:
    """Check then time one variant on every case (one round; the TensorRT variants)."""
    timed = check_variant(name, runner, rows, feeds, refs, env, args, errors, graphs_wanted)
    time_variant(name, runner, rows, feeds, timed, env, args, errors)


def bench_model(bench: Bench, args, env: Env, errors: list[str]) -> tuple[dict, list[dict]]:
    t0 = time.perf_counter()
    prep = prepare(bench, args)
    info, graphs = prep["info"], prep["graphs"]
    feeds = [env.to_device(f) for f in prep["feeds"]]
    labels = case_labels(bench)
    rows = []
    for label, f in zip(labels, prep["feeds"]):
        rows.append({"case": label, "model": bench.key, "family": bench.family, "dtype": args.dtype,
                     "inputs": {k: list(v.shape) for k, v in f.items()}, "diff": {}, "timing": {}})
    print(f"[{bench.key}] built {info['parameters'] / 1e6:.1f}M parameters in {info['build_seconds']}s; "
          f"rewrite {info['rewrite']['counts']} ({info['rewrite']['refusals']} refusals); "
          f"ortopt {info['ortopt'].get('fused_ops', info['ortopt'].get('note'))}", flush=True)
    refs: dict = {}
    names = []  # (name, variant, graphs_on) of the variants that exist
    for variant in ("ort", "ortopt", "ours"):
        for graphs_on in (False, True):
            name = variant + ("_graph" if graphs_on else "")
            if graphs[variant] is None:
                for row in rows:
                    row[f"{name}_ms"] = None
                    row[f"{name}_note"] = info["ortopt"].get("note", "not available")
                    row["ortopt_same_as_ort"] = bool(info["ortopt"].get("same_as_original"))
                continue
            names.append((name, variant, graphs_on))
    # Rounds: every variant timed once per round, the order rotated from round to round, so slow
    # drifts of the machine (clocks, host) land on all variants alike; medians over rounds. One
    # session is open at a time (each round opens its own: several open sessions slowed each
    # other on the H100's host); the first round also checks the outputs.
    t1 = time.perf_counter()
    timed, graph_runs = {}, {}
    for r in range(args.rounds):
        for k in range(len(names)):
            name, variant, graphs_on = names[(k + r) % len(names)]
            if r > 0 and not any(timed.get(name, ())):
                continue
            try:
                runner = env.ort_model(graphs[variant], graphs_on)
            except Exception as e:  # noqa: BLE001
                for row in rows:
                    row[f"{name}_ms"] = None
                    row[f"{name}_note"] = f"session: {_short(e)}"
                errors.append(f"{bench.key}: {name}: session: {_short(e)}")
                timed[name] = [False] * len(rows)
                continue
            if r == 0:
                timed[name] = check_variant(name, runner, rows, feeds, refs, env, args, errors, graphs_on)
            time_variant(name, runner, rows, feeds, timed[name], env, args, errors)
            stats = runner.stats()
            graph_runs[name] = (graph_runs.get(name, (0, 0))[0] + stats["graph_runs"],
                                graph_runs.get(name, (0, 0))[1] + stats["plain_runs"])
            runner = None
            env.release()
    for name, _, _ in names:
        g, p = graph_runs.get(name, (0, 0))
        print(f"  {name:12s} " + "  ".join(
            f"{r['case'].split(' ', 1)[1]}: {_fmt_ms(r.get(name + '_ms'))}" for r in rows) +
            f"   (graph runs {g}, plain {p})", flush=True)
    print(f"  ({args.rounds} rounds in {time.perf_counter() - t1:.1f}s)", flush=True)
    if args.use_trt:
        bench_trt(bench, graphs["trt"], rows, feeds, refs, env, args, errors, prep["feeds"])
    else:
        for row in rows:
            for name in ("trt", "trt_graph"):
                row[f"{name}_ms"] = None
                row[f"{name}_note"] = args.trt_note
    for row in rows:
        finish_row(row)
    info["seconds"] = round(time.perf_counter() - t0, 1)
    return info, rows


def trt_profile(feeds_np: list[dict]) -> dict | None:
    """(min, opt, max) per input over the cases' shapes, when they differ; None for one shape."""
    names = list(feeds_np[0])
    if all(f[n].shape == feeds_np[0][n].shape for f in feeds_np for n in names):
        return None
    shapes = {}
    for n in names:
        dims = np.array([f[n].shape for f in feeds_np])
        mid = feeds_np[len(feeds_np) // 2][n].shape
        shapes[n] = (tuple(int(d) for d in dims.min(0)), tuple(int(d) for d in mid), tuple(int(d) for d in dims.max(0)))
    return shapes


def bench_trt(bench, data, rows, feeds, refs, env, args, errors, feeds_np) -> None:
    from trt_fastops.runtime import TrtEngine

    t0 = time.perf_counter()
    try:
        engine = TrtEngine.build(data, shapes=trt_profile(feeds_np), fp16=args.dtype == "float16",
                                 device=env.device, copy_outputs=False)
    except Exception as e:  # noqa: BLE001
        for row in rows:
            for name in ("trt", "trt_graph"):
                row[f"{name}_ms"] = None
                row[f"{name}_note"] = f"engine build: {_short(e)}"
        errors.append(f"{bench.key}: TensorRT engine build: {_short(e)}")
        return
    build_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "engine.plan"
        engine.save(path)
        run_variant("trt_graph", engine, rows, feeds, refs, env, args, errors, True)
        engine = None
        env.release()
        plain = TrtEngine.load(path, device=env.device, cuda_graph=False, copy_outputs=False)
        run_variant("trt", plain, rows, feeds, refs, env, args, errors, False)
        plain = None
        env.release()
    for row in rows:
        row["trt_build_seconds"] = round(build_s, 1)
    print(f"  trt          engine built in {build_s:.0f}s; " + "  ".join(
        f"{r['case'].split(' ', 1)[1]}: {_fmt_ms(r.get('trt_ms'))} / {_fmt_ms(r.get('trt_graph_ms'))}" for r in rows),
        flush=True)


def _best(row: dict, variant: str):
    vals = [row.get(f"{variant}_ms"), row.get(f"{variant}_graph_ms")]
    vals = [v for v in vals if isinstance(v, (int, float))]
    return min(vals) if vals else None


def _ratio(a, b):
    return round(a / b, 3) if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b > 0 else None


def finish_row(row: dict) -> None:
    """Ratios (> 1: ours is faster / graphs help) and the issue's bars."""
    ours_g = row.get("ours_graph_ms")
    row["x_ours_graph_vs_ort"] = _ratio(_best(row, "ort"), ours_g)
    row["x_ours_graph_vs_ortopt"] = _ratio(_best(row, "ort" if row.get("ortopt_same_as_ort") else "ortopt"), ours_g)
    for v in VARIANTS:
        row[f"graph_gain_{v}"] = _ratio(row.get(f"{v}_ms"), row.get(f"{v}_graph_ms"))
    missed = []
    if row["family"] == "transformer":
        x = row["x_ours_graph_vs_ortopt"]
        if x is None:
            missed.append("ours_graph vs ortopt: not measured")
        elif x < TARGET_VS_ORTOPT:
            missed.append(f"ours_graph < {TARGET_VS_ORTOPT}x ortopt")
    if row["model"] == "bert_base" and row["inputs"].get("input_ids", [0])[0] == 1:
        g = row["graph_gain_ours"]
        if g is None or g < TARGET_GRAPH_GAIN_BERT_B1:
            missed.append(f"CUDA graphs cut ours < {TARGET_GRAPH_GAIN_BERT_B1}x at batch 1")
    row["missed"] = missed


def _fmt_ms(v, width: int = 0) -> str:
    text = f"{v:.3f}" if isinstance(v, (int, float)) else "-"
    return f"{text:>{width}s}" if width else text


def table(rows: list[dict], tensorrt: bool) -> str:
    cols = variant_names(tensorrt)
    head = f"{'case':24s} " + " ".join(f"{c.replace('_graph', '+g'):>9s}" for c in cols) + \
        f" {'x_opt':>7s} {'x_ort':>7s} {'graphs':>7s} {'maxdiff':>8s}"
    lines = ["median ms per run (+g: with CUDA graphs); x_opt / x_ort = the faster ortopt / ort variant's time "
             "over ours+g; graphs = ours / ours+g", head, "-" * len(head)]
    for r in rows:
        miss_opt = any("ortopt" in m for m in r["missed"])
        miss_graph = any("CUDA graphs" in m for m in r["missed"])
        diffs = [v for v in r["diff"].values() if isinstance(v, (int, float))]
        diff = f"{max(diffs):8.1e}" if diffs else f"{'-':>8s}"
        if any(isinstance(v, str) for v in r["diff"].values()):
            diff = f"{'inf':>8s}"

        def x(v, miss):
            return (f"{v:6.2f}" if isinstance(v, (int, float)) else f"{'-':>6s}") + ("!" if miss else " ")

        lines.append(f"{r['case']:24s} " + " ".join(_fmt_ms(r.get(f'{c}_ms'), 9) for c in cols) +
                     f" {x(r['x_ours_graph_vs_ortopt'], miss_opt)} {x(r['x_ours_graph_vs_ort'], False)} "
                     f"{x(r['graph_gain_ours'], miss_graph)} {diff}")
    lines.append(f"bars: ours+g >= {TARGET_VS_ORTOPT}x the faster ortopt variant (transformers); CUDA graphs cut "
                 f"batch-1 BERT-base >= {TARGET_GRAPH_GAIN_BERT_B1}x; '!' = missed")
    return "\n".join(lines)


def versions(env: Env, trt) -> dict:
    import onnx
    import onnxruntime

    import trt_fastops

    out = {"onnxruntime": onnxruntime.__version__, "onnx": onnx.__version__, "trt_fastops": trt_fastops.__version__,
           "numpy": np.__version__, "tensorrt": getattr(trt, "__version__", None)}
    if env.torch is not None:
        out.update(torch=env.torch.__version__, cuda=env.torch.version.cuda, driver=driver_version())
    return out


def tensorrt_module(mode: str):
    """(tensorrt module or None, note when not used)."""
    if mode == "off":
        return None, "disabled (--tensorrt off)"
    try:
        import tensorrt
    except ImportError as e:
        if mode == "on":
            raise SystemExit(f"bench_models: --tensorrt on, but tensorrt does not import: {e}") from e
        return None, f"skipped: tensorrt does not import ({e})"
    try:
        import trt_fastops

        trt_fastops.library_path("trt")
    except FileNotFoundError as e:
        if mode == "on":
            raise SystemExit(f"bench_models: --tensorrt on, but {e}") from e
        return None, f"skipped: {e}"
    return tensorrt, None


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.min_reps < 1 or args.max_reps < args.min_reps or args.min_time < 0 or args.tol <= 0 or args.rounds < 1:
        raise SystemExit("bench_models: need 1 <= --min-reps <= --max-reps, --min-time >= 0, --tol > 0 and --rounds >= 1")
    device = parse_device(args.device)
    if args.out is None:
        suffix = "-tiny" if args.tiny else "-quick" if args.quick else ""
        args.out = REPO / "bench" / "results" / f"models{suffix}.json"
    if args.dry_run:
        return dry_run(args)
    try:
        import onnxruntime

        importlib.import_module("trt_fastops.runtime")  # fail early without the package
        env = Env(device)
    except (ImportError, RuntimeError) as e:
        print(f"bench_models: cannot run: {e}", file=sys.stderr)
        return 2
    if device >= 0 and "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
        print("bench_models: cannot run: onnxruntime has no CUDAExecutionProvider (install onnxruntime-gpu, or "
              "pass --device cpu for a smoke test)", file=sys.stderr)
        return 2
    onnxruntime.set_default_logger_severity(3)
    trt, args.trt_note = tensorrt_module(args.tensorrt) if device >= 0 else (None, "skipped: --device cpu")
    args.use_trt = trt is not None
    t_start = time.perf_counter()
    env.warm_gpu(args.gpu_warmup)
    models, rows, errors = {}, [], []
    for bench in plan(args):
        try:
            info, brows = bench_model(bench, args, env, errors)
            models[bench.key] = info
            rows += brows
        except Exception as e:  # noqa: BLE001 - report the model, go on with the next
            errors.append(f"{bench.key}: {_short(e)}")
            print(f"[{bench.key}] ERROR {_short(e)}", flush=True)
        env.release()
    doc = {"benchmark": "models",
           "gpu": env.torch.cuda.get_device_name(device) if env.torch is not None else "cpu (smoke test)",
           "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
           "versions": versions(env, trt), "dtype": args.dtype, "target": args.target, "set": "tiny" if args.tiny else
           "quick" if args.quick else "full",
           "method": "trt_fastops.runtime.OrtModel (TrtEngine for trt), torch CUDA inputs, copy_outputs=False; "
                     f"the GPU kept busy {args.gpu_warmup}s first; {args.rounds} interleaved rounds (order rotated), "
                     "median over rounds of each round's median; "
                     "wall clock of run() + device synchronize per call after 3 warm-up calls (graphs captured on "
                     f"the first), {args.min_time}s of calls ({args.min_reps}-{args.max_reps}); median ms",
           "correctness": f"every variant vs the first (ort, original graph) before timing: max |a - b| / (1 + |b|) "
                          f"<= {args.tol}",
           "torch_eager": TORCH_EAGER_NOTE, "tensorrt": args.trt_note or "used",
           "targets": {"x_ours_graph_vs_ortopt": TARGET_VS_ORTOPT, "graph_gain_bert_batch1": TARGET_GRAPH_GAIN_BERT_B1},
           "seconds": round(time.perf_counter() - t_start, 1), "errors": errors, "models": models, "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {args.out} ({doc['seconds']}s)")
    for e in errors:
        print(f"ERROR {e}")
    print(table(rows, args.use_trt))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
