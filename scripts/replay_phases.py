#!/usr/bin/env python3
"""Where the wall time of an OrtModel CUDA-graph replay goes, per model variant.

Session 13 found our rewritten BERT's `OrtModel.run` + synchronise 75-120 µs over its graph's
GPU span, against 6-39 µs for ORT's fused model (`bench/NOTES-dense.md`). This script times,
without the profiler, the phases of a replay for each variant:

    run      OrtModel.run + synchronise (as bench_models times it: copy_outputs=False)
    stage    the input staging alone (one native call: wait, three copies, wait)
    replay   the ORT call alone (run_with_iobinding with the entry's gpu_graph_id) + synchronise
    feeds    normalising the inputs alone (Python, no GPU)
    python   OrtModel.run with staging and ORT's call stubbed out (Python, no GPU)

and then, under torch.profiler, the replay's GPU span and its launch -> first kernel latency
(as profile_models --graphs does). replay - span is what ORT and the driver add around the GPU
work. Variants (BERT-base only for the patched ones):

    ort         ONNX Runtime on the original graph
    ortopt      after onnxruntime.transformers.optimizer fusions
    ours        the trt_fastops rewrite (target ort)
    ours_range  ours with the position ids' Slice of the arange initializer computed by Range
                (the Slice is a contiguous copy: a memcpy node in the graph)
    ours_embed  ours with the embedding (three Gathers, Add, SkipLayerNorm) replaced by ORT's
                com.microsoft.EmbedLayerNormalization (as the fused model has it)
    ours_stream ours with ONNX Runtime on a stream of ours (provider option user_compute_stream);
                adds the phase "on_stream": the inputs copied on that stream, no host wait, then
                the replay (what staging could cost if OrtModel owned ORT's stream)

    python3 scripts/replay_phases.py [--case bert_base:1x128 ...] [--variants ours ours_embed ...]

Writes bench/results/replay_phases.json and prints a table. Diagnosis only: the patched
variants are hand edits of the ONNX graph, checked against ours' output.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(REPO))
import bench_models as BM  # noqa: E402
from _bench_common import ort_torch_header, write_results  # noqa: E402
from profile_models import bench_for, parse_case, prepare_args, profile_runner, replay_stats  # noqa: E402

VARIANTS = ("ort", "ortopt", "ours", "ours_range", "ours_embed", "ours_stream")


# ---------------------------------------------------------------------------------------------
# graph edits (diagnosis only)


def _consumers(graph) -> dict:
    out: dict = {}
    for n in graph.node:
        for i in n.input:
            out.setdefault(i, []).append(n)
    return out


def _producers(graph) -> dict:
    return {o: n for n in graph.node for o in n.output}


def _dead_code(graph) -> None:
    """Drops nodes none of whose outputs reach a graph output."""
    live = {o.name for o in graph.output}
    keep = []
    for n in reversed(list(graph.node)):
        if any(o in live for o in n.output):
            keep.append(n)
            live.update(i for i in n.input if i)
    del graph.node[:]
    graph.node.extend(reversed(keep))


def _arange_slice(graph, inits):
    """The Slice of an arange initializer [1, N] (BERT's position ids) and N."""
    from onnx import numpy_helper as nh

    for n in graph.node:
        if n.op_type == "Slice" and n.input[0] in inits:
            a = nh.to_array(inits[n.input[0]])
            if a.ndim == 2 and a.shape[0] == 1 and np.array_equal(a[0], np.arange(a.shape[1])):
                return n, a.shape[1]
    raise RuntimeError("no Slice of an arange initializer (position ids) in this graph")


def patch_range(data: bytes) -> bytes:
    """Slice(position_ids, 0, end) -> Unsqueeze(Range(0, Min(end, N), 1), 0): a kernel, not a copy."""
    import onnx
    from onnx import helper, numpy_helper as nh

    m = onnx.load_from_string(data)
    g = m.graph
    inits = {i.name: i for i in g.initializer}
    sl, n = _arange_slice(g, inits)
    starts = nh.to_array(inits[sl.input[1]]) if sl.input[1] in inits else None
    pre = sl.output[0] + "__range"
    g.initializer.extend([nh.from_array(np.array(0, np.int64), pre + "_zero"),
                          nh.from_array(np.array(1, np.int64), pre + "_one"),
                          nh.from_array(np.array(n, np.int64), pre + "_n"),
                          nh.from_array(np.array([0], np.int64), pre + "_axes")])
    new = [helper.make_node("Squeeze", [sl.input[2], pre + "_axes"], [pre + "_end"]),
           helper.make_node("Min", [pre + "_end", pre + "_n"], [pre + "_lim"]),
           helper.make_node("Range", [pre + "_zero", pre + "_lim", pre + "_one"], [pre + "_r"]),
           helper.make_node("Unsqueeze", [pre + "_r", pre + "_axes"], [sl.output[0]])]
    if starts is not None and int(np.asarray(starts).reshape(-1)[0]) != 0:
        raise RuntimeError("the position ids' Slice does not start at 0")
    idx = list(g.node).index(sl)
    g.node.remove(sl)
    for k, node in enumerate(new):
        g.node.insert(idx + k, node)
    _dead_code(g)
    return m.SerializeToString()


def patch_embed(data: bytes) -> bytes:
    """The embedding's SkipLayerNorm(Add(Gather word, Gather type), Gather pos) -> Cast ids to int32 +
    com.microsoft.EmbedLayerNormalization (positions 0..S-1, as the arange Slice gives)."""
    import onnx
    from onnx import TensorProto, helper

    m = onnx.load_from_string(data)
    g = m.graph
    inits = {i.name: i for i in g.initializer}
    prod = _producers(g)
    sl, _ = _arange_slice(g, inits)
    pos_gather = next(n for n in g.node if n.op_type == "Gather" and sl.output[0] in n.input)
    sln = next(n for n in g.node if n.op_type == "SkipLayerNorm" and pos_gather.output[0] in n.input[:2])
    other = sln.input[0] if sln.input[1] == pos_gather.output[0] else sln.input[1]
    add = prod[other]
    if add.op_type != "Add":
        raise RuntimeError(f"the embedding sum is {add.op_type}, not Add")
    gathers = [prod[i] for i in add.input]
    names = {i.name for i in g.input}
    word = next(x for x in gathers if x.input[1] == "input_ids")
    typ = next(x for x in gathers if x.input[1] == "token_type_ids")
    assert {"input_ids", "token_type_ids"} <= names
    eps = next((a.f for a in sln.attribute if a.name == "epsilon"), 1e-5)
    if len(sln.input) > 4 and sln.input[4]:
        raise RuntimeError("the embedding's SkipLayerNorm has a bias input")
    new = [helper.make_node("Cast", ["input_ids"], ["__ids32"], to=TensorProto.INT32),
           helper.make_node("Cast", ["token_type_ids"], ["__seg32"], to=TensorProto.INT32),
           helper.make_node("EmbedLayerNormalization",
                            ["__ids32", "__seg32", word.input[0], pos_gather.input[0], typ.input[0],
                             sln.input[2], sln.input[3]], [sln.output[0], "__mask_index"], domain="com.microsoft",
                            epsilon=eps)]  # ORT's type inference wants the mask_index output
    idx = list(g.node).index(sln)
    g.node.remove(sln)
    for k, node in enumerate(new):
        g.node.insert(idx + k, node)
    if not any(o.domain == "com.microsoft" for o in m.opset_import):
        m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    _dead_code(g)
    return m.SerializeToString()


PATCHES = {"ours_range": patch_range, "ours_embed": patch_embed}


# ---------------------------------------------------------------------------------------------
# timing


def _times_us(call, sync, reps: int) -> dict:
    """bench_models' time_calls (warm-up, then per-call wall of call + sync) for exactly `reps`
    calls, in µs."""
    t = BM.time_calls(call, sync, 0.0, reps, reps)
    return {"us": round(t["ms"] * 1e3, 1), "p10_us": round(t["p10_ms"] * 1e3, 1),
            "p90_us": round(t["p90_ms"] * 1e3, 1)}


class _ReplayOnly:
    """profile_runner's runner: the ORT replay call alone."""

    def __init__(self, model, entry):
        self.model, self.entry = model, entry

    def run(self, _feeds):
        self.model._session.run_with_iobinding(self.entry.binding, self.entry.run_options)


def measure(runner, feeds, env, reps: int, stream=None) -> dict:
    runner.run(feeds)
    env.sync()
    if not runner.graphs_enabled:
        raise RuntimeError(f"no CUDA graphs: {runner.graph_fallback}")
    entry = next(iter(runner._entries.values()))
    from trt_fastops.runtime import _normalize_feeds

    staged = _normalize_feeds(feeds, runner.input_names, "replay_phases", need_ortvalue=False)
    replay = _ReplayOnly(runner, entry)
    out = {"run": _times_us(lambda: runner.run(feeds), env.sync, reps),
           "stage": _times_us(lambda: runner._stage_inputs(entry, staged), env.sync, reps),
           "replay": _times_us(lambda: replay.run(None), env.sync, reps)}
    # Python alone: feed normalisation, and a whole run with staging and ORT's call stubbed out.
    out["feeds"] = _times_us(lambda: _normalize_feeds(feeds, runner.input_names, "x", need_ortvalue=False),
                             lambda: None, reps)
    real_stage, real_session = runner._stage_inputs, runner._session

    class _NoReplay:
        def run_with_iobinding(self, *_):
            pass

    runner._stage_inputs = lambda *_: None
    runner._session = _NoReplay()
    try:
        out["python"] = _times_us(lambda: runner.run(feeds), lambda: None, reps)
    finally:
        runner._stage_inputs, runner._session = real_stage, real_session
    if stream is not None:
        from trt_fastops import _C

        def on_stream():
            for f in staged.values():
                _C.copy_bytes(entry.input_ptrs[f.name], f.ptr, f.nbytes, device=0, stream=stream, wait=False)
            replay.run(None)

        out["on_stream"] = _times_us(on_stream, env.sync, reps)
    iters = 10
    stats = replay_stats(profile_runner(replay, None, env.sync, 3, iters), iters)
    launch = stats["runtime_calls_per_run"].get("cudaGraphLaunch") or {}
    out.update({"span_us": stats["span_us"], "gaps_us": stats["gaps_us"],
                "launch_to_gpu_us": stats["launch_to_gpu_us"], "launch_call_us": launch.get("us"),
                "activities": stats["activities_per_replay"], "first_activities": stats["first_activities"]})
    return out


def run_case(case, variants, env, reps: int, errors: list) -> list[dict]:
    bench = bench_for(case)
    prep = BM.prepare(bench, prepare_args(argparse.Namespace(dtype="float16", variants=["ortopt"], target="ort")))
    graphs = dict(prep["graphs"])
    feeds = env.to_device(prep["feeds"][0])
    label = case.label
    rows, ref = [], None
    for v in variants:
        row = {"case": label, "variant": v}
        try:
            if v in PATCHES:
                data = PATCHES[v](graphs["ours"])
            else:
                data = graphs.get("ours" if v == "ours_stream" else v)
                if data is None:
                    raise RuntimeError(f"variant {v} not available")
            stream = None
            if v == "ours_stream":
                from trt_fastops.runtime import OrtModel

                torch_stream = env.torch.cuda.Stream()
                stream = torch_stream.cuda_stream
                runner = OrtModel(data, 0, cuda_graph=True, copy_outputs=False,
                                  provider_options={"user_compute_stream": str(stream)})
            else:
                runner = env.ort_model(data, True)
            out = {k: BM.to_numpy(x) for k, x in runner.run(feeds).items()}
            if v == "ours":
                ref = out
            elif ref is not None and v.startswith("ours_"):
                row["diff_vs_ours"] = BM.scaled_diff(out, ref)
            row.update(measure(runner, feeds, env, reps, stream))
            row["replay_minus_span_us"] = round(row["replay"]["us"] - (row["span_us"] or 0), 1)
            row["run_minus_span_us"] = round(row["run"]["us"] - (row["span_us"] or 0), 1)
        except Exception as e:  # noqa: BLE001 - one variant's failure is reported, the others still run
            errors.append(f"{label} {v}: {type(e).__name__}: {str(e)[:300]}")
            row["error"] = errors[-1]
        runner = None
        env.release()
        rows.append(row)
        print(json.dumps({k: x for k, x in row.items() if k != "first_activities"}), flush=True)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", action="append", dest="cases", metavar="bert_base:BxS")
    ap.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "replay_phases.json")
    args = ap.parse_args()
    import onnxruntime

    onnxruntime.set_default_logger_severity(3)
    env = BM.Env(0)
    cases = [parse_case(c) for c in (args.cases or ["bert_base:1x128", "bert_base:8x128", "bert_base:1x512"])]
    rows, errors = [], []
    for case in cases:
        rows += run_case(case, args.variants, env, args.reps, errors)
    head = (f"{'case':18s} {'variant':11s} {'run':>7s} {'stage':>7s} {'replay':>7s} {'span':>7s} "
            f"{'rep-span':>8s} {'->GPU':>7s} {'nodes':>6s} {'feeds':>6s} {'python':>6s} {'on_stream':>9s}")
    lines = [head, "-" * len(head)]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['case']:18s} {r['variant']:11s} {r['error'][:80]}")
            continue
        lines.append(f"{r['case']:18s} {r['variant']:11s} {r['run']['us']:7.1f} {r['stage']['us']:7.1f} "
                     f"{r['replay']['us']:7.1f} {r['span_us'] or 0:7.1f} {r['replay_minus_span_us']:8.1f} "
                     f"{r['launch_to_gpu_us'] or 0:7.1f} {r['activities'] or 0:6g} {r['feeds']['us']:6.1f} "
                     f"{r['python']['us']:6.1f} "
                     f"{r['on_stream']['us'] if 'on_stream' in r else float('nan'):9.1f}")
    doc = {**ort_torch_header("replay_phases"),
           "method": f"OrtModel (CUDA graphs, copy_outputs=False); medians of {args.reps} timed calls each, no "
                     "profiler; span / launch figures from torch.profiler over 10 replays (median)",
           "rows": rows, "errors": errors}
    return write_results(args.out, doc, errors, "\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
