"""On a GPU: scripts/bench_models.py at CI sizes (every variant with CUDA graphs, incl. the
dynamic-axes BERT whose shape subgraph ONNX Runtime keeps on the CPU), and trt-fastops run /
bench on the CUDA execution provider. Needs onnxruntime-gpu; the benchmark also needs torch."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from models import build as B
from trt_fastops import cli

pytestmark = pytest.mark.gpu

TOL = 2e-2  # float32 models: the CUDA EP runs MatMul in TF32 by default
TOL16 = 5e-2  # float16 models (as scripts/bench_models.py): ours runs softmax / attention in float32, ORT in float16


@pytest.fixture(scope="module")
def bench_models():
    path = Path(__file__).resolve().parents[2] / "scripts" / "bench_models.py"
    spec = importlib.util.spec_from_file_location("bench_models_gpu_test", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_bench_models_tiny_on_cuda(ort_cuda, bench_models, tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "models.json"
    rc = bench_models.main(["--tiny", "--min-time", "0", "--min-reps", "2", "--max-reps", "3", "--tensorrt", "off",
                            "--out", str(out)])
    doc = json.loads(out.read_text())
    assert rc == 0, doc["errors"]
    assert len(doc["rows"]) == 6 and doc["gpu"] != "cpu (smoke test)"
    for r in doc["rows"]:
        for v in ("ort", "ort_graph", "ours", "ours_graph"):
            assert r[f"{v}_ms"] is not None and r[f"{v}_ms"] > 0, (r["case"], v, r.get(f"{v}_note"))
        assert r["graph_gain_ours"] is not None and r["x_ours_graph_vs_ort"] is not None
        assert all(isinstance(d, float) and d <= 0.05 for d in r["diff"].values()), r["diff"]


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli_cuda") / "bert.onnx"
    onnx.save(B.build("bert_tiny_dynamic"), str(path))
    return path


@pytest.fixture(scope="module")
def bert16(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli_cuda16") / "bert16.onnx"
    onnx.save(B.build("bert_tiny_dynamic", dtype="float16"), str(path))
    return path


def test_run_on_cuda_with_graphs(ort_cuda, bert, tmp_path, capsys):
    out, rep = tmp_path / "out.npz", tmp_path / "run.json"
    rc = cli.main(["run", str(bert), "--device", "cuda:0", "--dim", "batch=2", "--dim", "sequence=16",
                   "--iterations", "5", "--output", str(out), "--json", str(rep)])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert "on cuda:0, CUDA graphs" in captured.out and "host copies are not timed" in captured.out
    stats = json.loads(rep.read_text())["stats"]
    # 3 warm-up + 5 timed + 1 for the outputs, all through one captured graph
    assert (stats["cuda_graphs"], stats["graph_runs"], stats["plain_runs"], stats["graph_misses"]) == (True, 9, 0, 1)

    from trt_fastops.check import random_inputs

    feeds = random_inputs(onnx.load(str(bert)), seed=0, dims={"batch": 2, "sequence": 16})
    (ref,) = ort_cuda.InferenceSession(str(bert), providers=["CPUExecutionProvider"]).run(None, feeds)
    with np.load(out) as f:
        np.testing.assert_allclose(f["last_hidden_state"], ref, atol=TOL, rtol=TOL)


def _bench_rows(path, tmp_path, capsys):
    rep = tmp_path / f"bench_{path.stem}.json"
    rc = cli.main(["bench", str(path), "--rewrite", "--device", "cuda:0", "--dim", "batch=2", "--dim", "sequence=16",
                   "--iterations", "5", "--json", str(rep)])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    return json.loads(rep.read_text())["rows"], captured.out


def test_bench_on_cuda(ort_cuda, bert, tmp_path, capsys):
    """float32 BERT: the rewrite's float32 Attention nodes run on the CPU EP (the CUDA EP
    registers Attention for float16 / bfloat16 only), so ONNX Runtime inserts copies
    around them and refuses CUDA graphs for the rewritten model: OrtModel falls back to
    plain runs and says why. The original model captures as before."""
    rows, out = _bench_rows(bert, tmp_path, capsys)
    assert [(r["model"].endswith("(rewritten)"), r["cuda_graphs"]) for r in rows] == \
        [(False, False), (False, True), (True, False), (True, False)], [r["graph_fallback"] for r in rows]
    assert all(r["device"] == "cuda:0" and r["max_scaled_diff_vs_first"] <= TOL for r in rows)
    assert "+graphs" in out


def test_bench_on_cuda_float16(ort_cuda, bert16, tmp_path, capsys):
    """float16 BERT: every node of the rewrite (SkipLayerNorm, Attention) runs on CUDA,
    so both models capture CUDA graphs."""
    rows, out = _bench_rows(bert16, tmp_path, capsys)
    assert [(r["model"].endswith("(rewritten)"), r["cuda_graphs"]) for r in rows] == \
        [(False, False), (False, True), (True, False), (True, True)], [r["graph_fallback"] for r in rows]
    assert all(r["device"] == "cuda:0" and r["max_scaled_diff_vs_first"] <= TOL16 for r in rows), \
        [r["max_scaled_diff_vs_first"] for r in rows]
    assert "+graphs" in out
