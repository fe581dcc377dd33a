"""scripts/bench_models.py without a GPU: arguments, the case plan (--dry-run), the models at
their benchmark sizes (built and rewritten), the bars and the table, and a CPU smoke run of the
whole pipeline at CI sizes (--tiny --device cpu)."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from models import build as B

ort = pytest.importorskip("onnxruntime")

_PATH = Path(__file__).resolve().parents[1] / "scripts" / "bench_models.py"
_spec = importlib.util.spec_from_file_location("bench_models_under_test", _PATH)
bm = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = bm  # dataclasses resolve string annotations through sys.modules
_spec.loader.exec_module(bm)


def args(*argv):
    return bm.build_parser().parse_args(list(argv))


def test_defaults_and_sets():
    a = args()
    assert (a.quick, a.tiny, a.dtype, a.device, a.tensorrt, a.tol) == (False, False, "float16", "0", "auto", 0.05)
    assert a.out is None  # main: bench/results/models.json (models-quick.json with --quick)
    assert [b.key for b in bm.plan(a)] == ["bert_base", "gpt2", "llama_gqa", "vit_b16", "resnet50"]
    assert [b.key for b in bm.plan(args("--quick"))] == ["bert_base", "gpt2", "vit_b16", "resnet50"]
    assert [b.key for b in bm.plan(args("--models", "resnet50", "bert_base"))] == ["bert_base", "resnet50"]
    assert len(bm.plan(args("--tiny"))) == len(bm.FULL)
    with pytest.raises(SystemExit):
        args("--quick", "--tiny")
    with pytest.raises(SystemExit):
        args("--models", "alexnet")
    assert (bm.parse_device("0"), bm.parse_device("cuda:1"), bm.parse_device("cpu")) == (0, 1, -1)
    with pytest.raises(SystemExit, match="--device"):
        bm.parse_device("gpu")
    with pytest.raises(SystemExit, match="min-reps"):
        bm.main(["--min-reps", "0", "--dry-run"])


def test_every_bench_model_is_registered():
    for benches in (bm.FULL, bm.QUICK, bm.TINY):
        for b in benches:
            assert b.model in B.MODELS and b.model in B.BASE_MODELS
            assert b.family in ("transformer", "cnn")
            assert (b.ort_opt is None) == (b.family == "cnn")


def test_dry_run_lists_the_issue_cases(capsys):
    assert bm.main(["--dry-run"]) == 0
    out = capsys.readouterr().out
    for label in ["bert_base b1 s128", "bert_base b8 s128", "bert_base b32 s128", "bert_base b1 s512",
                  "bert_base b8 s512", "bert_base b32 s512", "gpt2 b1 s1024", "llama_gqa b1 s1024",
                  "vit_b16 b32 s196", "resnet50 b32 224px"]:
        assert label in out
    assert "10 cases x variants ort, ort_graph, ortopt, ortopt_graph, ours, ours_graph, trt, trt_graph" in out
    assert bm.main(["--dry-run", "--quick", "--tensorrt", "off", "--no-ortopt"]) == 0
    out = capsys.readouterr().out
    assert "5 cases x variants ort, ort_graph, ours, ours_graph (trt: off)" in out
    assert "llama" not in out.split("cases x")[0]


@pytest.mark.parametrize("bench", bm.FULL, ids=lambda b: b.key)
def test_models_at_bench_size_build_and_rewrite(bench):
    """The full-size models: inputs as the plan says, float16, and the rewrite takes every
    norm / attention (transformers) or conv (ResNet-50)."""
    import trt_fastops
    from models import transformer as T

    model = B.build(bench.model, dtype="float16", **bench.kwargs)
    labels = bm.case_labels(bench)
    dims = [{"batch": b, "sequence": s} for b, s in bench.dims] or [None]
    assert len(labels) == len(dims)
    for label, d in zip(labels, dims):
        feeds = B.example_inputs(model, dims=d)
        first = next(iter(feeds.values()))
        assert label.split()[1] == f"b{first.shape[0]}"
        if bench.family == "transformer" and "pixel_values" not in feeds:
            assert label.split()[2] == f"s{first.shape[1]}"
            assert feeds["input_ids"].max() < int(dict((p.key, p.value) for p in model.metadata_props)["vocab_size"])
    assert model.graph.output[0].type.tensor_type.elem_type == 10  # float16
    params = sum(int(np.prod(i.dims)) for i in model.graph.initializer)
    expected = {"bert_base": 110e6, "gpt2": 124e6, "llama_gqa": 240e6, "vit_b16": 86e6, "resnet50": 25.6e6}[bench.key]
    assert abs(params - expected) / expected < 0.05, params
    counts = trt_fastops.rewrite(model, conv=bench.conv, target="ort").report.counts()
    if bench.family == "cnn":
        assert counts == {"Conv": 53}
    else:
        layers = T.CONFIGS[bm._merged_kwargs(bench)["config"]].layers
        norm = "RMSNorm" if bench.key == "llama_gqa" else "SkipLayerNorm"
        # target "ort": the Q/K/V projection's MatMul + bias -> Dense (packed into one for BERT,
        # where it was three; GPT-2 and ViT project once already); the MLP's MatMul + bias + erf
        # GELU -> Dense(activation="gelu"), GPT-2's tanh GELU -> com.microsoft.FastGelu; Llama's
        # projections have no bias
        gelu = {"gpt2": {"FastGelu": layers}}.get(bench.key, {})
        dense = {"llama_gqa": {}, "gpt2": {"Dense": layers}}.get(bench.key, {"Dense": 2 * layers})
        # BERT's embedding (three lookups + the first norm) -> EmbedLayerNorm
        embed = {"EmbedLayerNorm": 1} if bench.key == "bert_base" else {}
        norms = {norm: 2 * layers + (0 if embed else 1)}
        assert counts == {"Attention": layers, **norms, **gelu, **dense, **embed}
        portable = trt_fastops.rewrite(model, conv=bench.conv).report.counts()
        assert portable == {"Attention": layers, norm: 2 * layers + 1}


def test_bars_and_table():
    def row(case, model, family, batch, **ms):
        r = {"case": case, "model": model, "family": family, "inputs": {"input_ids": [batch, 128]}, "diff": {"ours": 0.01},
             **{f"{v}_ms": None for v in bm.variant_names(True)}}
        r.update({f"{k}_ms": v for k, v in ms.items()})
        bm.finish_row(r)
        return r

    good = row("bert_base b1 s128", "bert_base", "transformer", 1, ort=3.0, ort_graph=2.0, ortopt=2.0, ortopt_graph=1.0,
               ours=1.6, ours_graph=0.8)
    assert good["x_ours_graph_vs_ortopt"] == 1.25 and good["x_ours_graph_vs_ort"] == 2.5
    assert good["graph_gain_ours"] == 2.0 and good["graph_gain_ort"] == 1.5 and good["missed"] == []
    slow = row("bert_base b1 s512", "bert_base", "transformer", 1, ortopt=1.0, ours=1.2, ours_graph=1.0)
    assert slow["missed"] == ["ours_graph < 1.1x ortopt", "CUDA graphs cut ours < 1.5x at batch 1"]
    none = row("gpt2 b1 s1024", "gpt2", "transformer", 1, ours=1.0, ours_graph=0.9)
    assert none["missed"] == ["ours_graph vs ortopt: not measured"]  # a batch-1 bar only for BERT
    same = {"ortopt_same_as_ort": True}  # the optimizer fused nothing: ort stands in for it
    r = {"case": "llama_gqa b1 s1024", "model": "llama_gqa", "family": "transformer", "inputs": {"input_ids": [1, 1024]},
         "diff": {}, "ort_ms": 2.0, "ort_graph_ms": 1.8, "ours_ms": 1.5, "ours_graph_ms": 1.2, **same}
    bm.finish_row(r)
    assert r["x_ours_graph_vs_ortopt"] == 1.5 and r["missed"] == []
    cnn = row("resnet50 b32 224px", "resnet50", "cnn", 32, ort=2.0, ours=2.0, ours_graph=1.9)
    assert cnn["missed"] == [] and cnn["x_ours_graph_vs_ortopt"] is None
    text = bm.table([good, slow, cnn], tensorrt=False)
    lines = text.splitlines()
    assert "trt" not in lines[1] and "ours+g" in lines[1]
    assert "1.25 " in lines[3] and "2.00 " in lines[3]
    assert lines[4].count("!") == 2 and "!" not in lines[5]


def test_helpers():
    ref = {"y": np.array([[1.0, -2.0]], np.float32)}
    assert bm.scaled_diff({"y": np.array([[1.5, -2.0]], np.float32)}, ref) == pytest.approx(0.25)
    assert bm.scaled_diff({"y": np.zeros((2, 2), np.float32)}, ref) == float("inf")
    assert bm.scaled_diff({"y": np.array([[np.nan, 0]], np.float32)}, ref) == float("inf")
    assert bm.scaled_diff({}, ref) == float("inf")
    calls = []
    stats = bm.time_calls(lambda: calls.append(1), lambda: None, min_time=0.0, min_reps=5, max_reps=9)
    assert stats["reps"] == 5 and len(calls) == 3 + 1 + 5 and stats["p10_ms"] <= stats["ms"] <= stats["p90_ms"]
    f = [{"x": np.zeros((1, 128))}, {"x": np.zeros((8, 512))}, {"x": np.zeros((32, 128))}]
    assert bm.trt_profile(f) == {"x": ((1, 128), (8, 512), (32, 512))}
    assert bm.trt_profile(f[:1]) is None
    assert bm.tensorrt_module("off") == (None, "disabled (--tensorrt off)")
    if importlib.util.find_spec("tensorrt") is None:
        mod, note = bm.tensorrt_module("auto")
        assert mod is None and note.startswith("skipped: tensorrt does not import")
        with pytest.raises(SystemExit, match="--tensorrt on"):
            bm.tensorrt_module("on")


def test_cpu_smoke_run_writes_results(tmp_path, capsys):
    """The whole pipeline (build, rewrite, ORT optimizer, OrtModel runs, checks, timing, JSON,
    table) at CI sizes on ORT CPU; graphs fall back there, which the rows say."""
    out = tmp_path / "models.json"
    rc = bm.main(["--tiny", "--device", "cpu", "--min-time", "0", "--min-reps", "1", "--max-reps", "2",
                  "--out", str(out)])
    text = capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert rc == 0, doc["errors"]
    assert doc["errors"] == [] and doc["set"] == "tiny" and doc["dtype"] == "float16"
    assert [r["case"] for r in doc["rows"]] == ["bert_base b2 s8", "bert_base b1 s16", "gpt2 b2 s8", "llama_gqa b2 s8",
                                                "vit_b16 b2 s8", "resnet50 b2 32px"]
    for r in doc["rows"]:
        assert r["reference"] == "ort" and r["ort_ms"] > 0 and r["ours_ms"] > 0
        assert r["diff"]["ours"] <= 0.01
        assert "CUDA graphs need CUDA" in r["ours_graph_note"] and r["ours_graph_ms"] is None
        assert r["trt_note"] == "skipped: --device cpu"
        if r["model"] == "llama_gqa":  # float16 HF RMSNorm / GQA: the optimizer fuses nothing
            assert r["ortopt_same_as_ort"] and r["ortopt_ms"] is None and "fused nothing" in r["ortopt_note"]
            assert r["x_ours_graph_vs_ortopt"] is None  # no graphs on the CPU
        elif r["family"] == "transformer":
            assert r["ortopt_ms"] > 0 and r["diff"]["ortopt"] <= 0.01
        else:
            assert r["ortopt_ms"] is None and "CNN" in r["ortopt_note"]
    assert doc["models"]["bert_base"]["ortopt"]["fused_ops"]["Attention"] == 2
    assert doc["models"]["resnet50"]["rewrite"]["counts"] == {"Conv": 17}
    assert doc["target"] == "ort" and doc["models"]["bert_base"]["rewrite"]["counts"]["Dense"] == 4
    assert doc["models"]["gpt2"]["rewrite"]["counts"]["FastGelu"] == 2
    assert "bert_base b2 s8" in text.split("median ms per run")[1]


# ---------------------------------------------------------------------------------------
# scripts/profile_models.py (a GPU script; everything but the CUDA profiler runs here)

_PPATH = Path(__file__).resolve().parents[1] / "scripts" / "profile_models.py"
_pspec = importlib.util.spec_from_file_location("profile_models_under_test", _PPATH)
pm = importlib.util.module_from_spec(_pspec)
sys.modules[_pspec.name] = pm
_pspec.loader.exec_module(pm)

# a Chrome trace as torch.profiler writes it (Kineto): CPU ops, kernels, a memcpy, a flow event
TRACE = {"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "dur": 5.0},
    {"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1",
     "dur": 100.0},
    {"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1",
     "dur": 110.0},
    {"ph": "X", "cat": "kernel", "name": "void trt_fastops::attention::flash_fwd_hopper_kernel<__half, Cfg<64>, true>"
     "(trt_fastops::AttentionParams)", "dur": 60.0},
    {"ph": "X", "cat": "kernel", "name": "void onnxruntime::contrib::cuda::BiasGeluKernel<half, 256, 4>(int, half const*)",
     "dur": 20.0},
    {"ph": "X", "cat": "kernel", "name": "void trt_fastops::norm::skip_layer_norm_kernel<__half, 768>(NormParams)",
     "dur": 8.0},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "dur": 2.0},
    {"ph": "X", "cat": "kernel", "name": "mystery", "dur": 0.0},
    {"ph": "s", "cat": "ac2g", "name": "flow", "id": 1},
]}


def test_profile_cases_and_plan(capsys):
    assert pm.parse_case("bert_base:32x512") == pm.Case("bert_base", 32, 512)
    assert pm.parse_case("vit_b16:8") == pm.Case("vit_b16", 8, None)
    assert pm.parse_case("gpt2") == pm.Case("gpt2")
    for bad, msg in [("alexnet:1", "unknown model"), ("vit_b16:1x3", "BATCH, e.g. 32"),
                     ("bert_base:32", "BATCHxSEQ"), ("bert_base:0x8", ">= 1")]:
        with pytest.raises(SystemExit, match=msg):
            pm.parse_case(bad)
    b = pm.bench_for(pm.Case("bert_base", 1, 128))
    assert b.model == "bert_base_dynamic" and b.dims == ((1, 128),) and b.ort_opt == "bert"
    v = pm.bench_for(pm.Case("vit_b16", 4))
    assert v.kwargs == {"batch": 4} and v.dims == () and v.ort_opt == "vit"
    assert pm.bench_for(pm.Case("gpt2", 2, 64)).kwargs == {"batch": 2, "seq": 64}
    assert pm.bench_for(pm.Case("bert_base")).dims == ((1, 128),)
    assert pm.main(["--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "bert_base b32 s512" in out and "bert_base b1 s128" in out and "vit_b16 b32" in out
    assert "3 cases x variants ort, ortopt, ours" in out and "target ort" in out
    with pytest.raises(SystemExit, match="CUDA device"):
        pm.main(["--device", "cpu"])
    with pytest.raises(SystemExit, match="--iters"):
        pm.main(["--iters", "0", "--dry-run"])
    a = pm.prepare_args(pm.build_parser().parse_args(["--variants", "ours", "--target", "portable"]))
    assert (a.no_ortopt, a.use_trt, a.target, a.dtype) == (True, False, "portable", "float16")


def test_profile_trace_parsing_and_tables():
    k = pm.kernels_from_trace(TRACE)
    assert len(k) == 7 and ("[gpu_memcpy] Memcpy HtoD (Pageable -> Device)", 2.0) in k
    assert [pm.classify(n) for n, _ in k] == ["gemm", "gemm", "attention", "elementwise+copy", "norm",
                                              "elementwise+copy", "other"]
    assert pm.short_name("void f<int, g<2>>(int)") == "void f<...>(int)"
    assert len(pm.short_name("x" * 300, 50)) == 50
    s = pm.summarize(k, iters=2, top=3)
    assert s["gpu_us_per_run"] == 150.0 and s["launches_per_run"] == 3.5 and s["distinct_kernels"] == 6
    assert s["classes_us_per_run"] == {"gemm": 105.0, "attention": 30.0, "elementwise+copy": 11.0, "norm": 4.0,
                                       "other": 0.0}
    top = s["top"]
    assert [t["class"] for t in top] == ["gemm", "attention", "elementwise+copy"]
    assert top[0]["us_per_run"] == 105.0 and top[0]["launches_per_run"] == 1.0 and top[0]["mean_us"] == 105.0
    assert top[0]["share"] == pytest.approx(0.7)
    s["wall_ms"] = 0.5
    text = pm.format_variant("bert_base b1 s128", "ours", s)
    assert "GPU 0.150 ms per run in 3.5 launches (6 distinct kernels); wall 0.500 ms" in text
    assert "flash_fwd_hopper_kernel<...>(trt_fastops::AttentionParams)" in text
    table = pm.format_summary([{"case": "bert_base b1 s128", "variants": {"ort": s, "ortopt": {"note": "skipped"}}}])
    assert "bert_base b1 s128      ort         0.150    0.500       3.5      105      30       4      11       0" in table
    assert "ortopt   skipped" in table and "ours     not run" in table


def test_profile_graph_replays():
    """--graphs: a replay's activities are found by its cudaGraphLaunch's correlation id."""
    def launch(corr, ts):
        return {"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "ts": ts, "dur": 4.0,
                "args": {"correlation": corr}}

    def kernel(corr, ts, dur):
        return {"ph": "X", "cat": "kernel", "name": "k", "ts": ts, "dur": dur, "args": {"correlation": corr}}

    trace = {"traceEvents": [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpy", "ts": 0.0, "dur": 6.0, "args": {"correlation": 1}},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD", "ts": 3.0, "dur": 1.0, "args": {"correlation": 1}},
        launch(2, 10.0), kernel(2, 20.0, 5.0), kernel(2, 26.0, 4.0),       # span 10, gaps 1, latency 10
        launch(3, 100.0), kernel(3, 108.0, 5.0), kernel(3, 116.0, 4.0),    # span 12, gaps 3, latency 8
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpy", "ts": 90.0, "dur": 8.0, "args": {"correlation": 4}},
    ]}
    g = pm.replay_stats(trace, iters=2)
    assert g["replays"] == 2 and g["span_us"] == 11.0 and g["gaps_us"] == 2.0 and g["launch_to_gpu_us"] == 9.0
    assert g["activities_per_replay"] == 2
    assert g["first_activities"] == [{"name": "k", "start_us": 10.0, "dur_us": 5.0},
                                     {"name": "k", "start_us": 16.0, "dur_us": 4.0}]
    assert g["runtime_calls_per_run"] == {"cudaMemcpy": {"calls": 1.0, "us": 7.0},
                                          "cudaGraphLaunch": {"calls": 1.0, "us": 4.0}}
    s = pm.summarize(pm.kernels_from_trace(trace), 2, 3)
    s["graph"], s["wall_ms"] = g, 0.05
    text = pm.format_variant("bert_base b1 s128", "ours", s)
    assert "graph replay: span 11.0 us, gaps 2.0 us, cudaGraphLaunch -> first kernel 9.0 us" in text
    assert "host CUDA calls per run: cudaMemcpy 1x 7.0 us, cudaGraphLaunch 1x 4.0 us" in text
    assert pm.main(["--dry-run", "--graphs"]) == 0


def test_profile_case_pipeline_on_cpu(monkeypatch, capsys):
    """profile_case end to end at the tiny sizes on ORT CPU, with the CUDA profiler replaced by
    the synthetic trace: build, rewrite (target ort), optimizer, OrtModel, timing, summaries."""
    monkeypatch.setattr(pm.BM, "FULL", pm.BM.TINY)
    monkeypatch.setattr(pm, "profile_runner", lambda runner, feeds, sync, warmup, iters: (
        [runner.run(feeds) for _ in range(warmup + iters)] and TRACE))
    args = pm.build_parser().parse_args(["--top", "4", "--iters", "1", "--warmup", "1"])
    res = pm.profile_case(pm.Case("bert_base", 2, 8), args, pm.BM.Env(-1))
    out = capsys.readouterr().out
    assert res["case"] == "bert_base b2 s8" and res["inputs"]["input_ids"] == [2, 8]
    assert res["rewrite"]["target"] == "ort" and res["rewrite"]["counts"]["Dense"] == 4
    assert res["ortopt"]["fused_ops"]["BiasGelu"] == 2
    for v in ("ort", "ortopt", "ours"):
        s = res["variants"][v]
        assert s["gpu_us_per_run"] == 300.0 and len(s["top"]) == 4 and s["wall_ms"] > 0
        assert f"--- bert_base b2 s8 / {v}: GPU 0.300 ms" in out
    res = pm.profile_case(pm.Case("vit_b16", 2), pm.build_parser().parse_args(["--target", "portable", "--iters", "1"]),
                          pm.BM.Env(-1))
    assert res["case"] == "vit_b16 b2" and res["inputs"]["pixel_values"][0] == 2
    assert "BiasGelu" not in res["rewrite"]["counts"] and res["rewrite"]["target"] == "portable"
    res = pm.profile_case(pm.Case("llama_gqa"), pm.build_parser().parse_args(["--iters", "1"]), pm.BM.Env(-1))
    assert res["variants"]["ortopt"]["note"].startswith("the optimizer fused nothing")
