"""trt-fastops run / bench / build-engine on the CPU (in-process): latency reports, outputs,
side-by-side timing with a rewrite, and the errors that say what to do."""
from __future__ import annotations

import importlib.util
import json

import numpy as np
import onnx
import pytest

from models import build as B
from trt_fastops import cli

ort = pytest.importorskip("onnxruntime")


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli_runtime")
    path = d / "bert.onnx"
    onnx.save(B.build("bert_tiny_dynamic"), str(path))
    return path


def test_help_shows_examples(capsys):
    for cmd, example in [("run", "trt-fastops run model.fast.onnx --dim batch=8"),
                         ("bench", "trt-fastops bench model.onnx --rewrite"),
                         ("build-engine", "trt-fastops build-engine model.trt.onnx -o model.engine --fp16")]:
        with pytest.raises(SystemExit) as e:
            cli.main([cmd, "--help"])
        assert e.value.code == 0
        assert example in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    top = capsys.readouterr().out
    assert "trt-fastops run " in top and "trt-fastops bench " in top and "trt-fastops build-engine " in top


def test_run_reports_latency_and_saves_outputs(bert, tmp_path, capsys):
    out, rep = tmp_path / "out.npz", tmp_path / "run.json"
    rc = cli.main(["run", str(bert), "--device", "cpu", "--dim", "batch=3", "--dim", "sequence=5", "--iterations", "4",
                   "--warmup", "1", "--output", str(out), "--json", str(rep)])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert "latency over 4 runs (ms): p50" in captured.out and "p99" in captured.out
    assert "input_ids [3, 5] int64" in captured.out and "last_hidden_state [3, 5, 64] float32" in captured.out
    assert "no CUDA graphs (the model runs on the CPU execution provider" in captured.out
    assert "warm-up" in captured.err  # progress goes to stderr
    doc = json.loads(rep.read_text())
    lat = doc["latency"]
    assert lat["iterations"] == 4 and lat["min_ms"] <= lat["p50_ms"] <= lat["p99_ms"] <= lat["max_ms"]
    assert doc["stats"]["plain_runs"] == 1 + 4 + 1

    from trt_fastops.check import random_inputs

    feeds = random_inputs(onnx.load(str(bert)), seed=0, dims={"batch": 3, "sequence": 5})
    (ref,) = ort.InferenceSession(str(bert), providers=["CPUExecutionProvider"]).run(None, feeds)
    with np.load(out) as f:
        np.testing.assert_array_equal(f["last_hidden_state"], ref)


def test_run_with_given_inputs(bert, tmp_path, capsys):
    feeds = B.example_inputs(onnx.load(str(bert)), dims={"batch": 1, "sequence": 7})
    np.savez(tmp_path / "feeds.npz", **feeds)
    assert cli.main(["run", str(bert), "--device", "cpu", "--inputs", str(tmp_path / "feeds.npz"),
                     "--iterations", "2"]) == 0
    assert "input_ids [1, 7] int64" in capsys.readouterr().out


def test_bench_original_and_rewrite(bert, tmp_path, capsys):
    rep = tmp_path / "bench.json"
    rc = cli.main(["bench", str(bert), "--rewrite", "--device", "cpu", "--dim", "batch=2", "--dim", "sequence=6",
                   "--iterations", "3", "--warmup", "1", "--json", str(rep)])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    lines = captured.out.splitlines()
    assert lines[0].split() == ["model", "p50", "ms", "p90", "ms", "speedup", "max", "diff"]
    assert lines[1].split()[0] == str(bert) and "(rewritten)" in lines[2]
    assert "1.00x" in lines[1]
    rows = json.loads(rep.read_text())["rows"]
    assert [r["model"] for r in rows] == [str(bert), f"{bert} (rewritten)"]
    assert rows[0]["max_scaled_diff_vs_first"] == 0.0 and rows[1]["max_scaled_diff_vs_first"] < 1e-4
    assert all(r["cuda_graphs"] is False and r["device"] == "cpu" for r in rows)


def test_bench_refuses_models_with_other_inputs(bert, tmp_path, capsys):
    gpt = tmp_path / "gpt.onnx"
    onnx.save(B.build("gpt_tiny"), str(gpt))
    assert cli.main(["bench", str(bert), str(gpt), "--device", "cpu", "--iterations", "1"]) == 2
    assert "bench compares models with the same inputs" in capsys.readouterr().err


@pytest.mark.parametrize("argv,message", [
    (["run", "missing.onnx"], "model file missing.onnx does not exist"),
    (["run", "{bert}", "--dim", "batch"], "--dim expects NAME=INT"),
    (["run", "{bert}", "--inputs", "nope.npz"], "cannot read inputs from nope.npz"),
    (["run", "{bert}", "--iterations", "0"], "--warmup and --iterations must be >= 1"),
    (["run", "{bert}", "--device", "cuda:7"], "OrtModel: device cuda:7"),
    (["bench", "{bert}", "--device", "cpu", "--rewrite", "--conv", "all", "--iterations", "1"], None),
    (["build-engine", "{bert}", "-o", "x.engine", "--shape", "input_ids=1x8:2x8"], "--shape expects NAME=MIN:OPT:MAX"),
    (["build-engine", "{bert}", "-o", "x.engine", "--shape", "input_ids=1x8:ax8:4x8"], "dims like 1x128"),
    (["build-engine", "missing.onnx", "-o", "x.engine"], "model file missing.onnx does not exist"),
])
def test_errors_say_what_to_do(bert, tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    rc = cli.main([a.format(bert=bert) for a in argv])
    err = capsys.readouterr().err
    if message is None:  # a conv policy on a model without convs is fine
        assert rc == 0, err
        return
    assert rc == 2 and message in err, err
    assert err.startswith(f"trt-fastops {argv[0]}: ") or "\ntrt-fastops " in err


def test_build_engine_without_tensorrt(bert, tmp_path, capsys):
    if importlib.util.find_spec("tensorrt") is not None:
        pytest.skip("TensorRT is installed here")
    rc = cli.main(["build-engine", str(bert), "-o", str(tmp_path / "bert.engine"), "--fp16",
                   "--shape", "input_ids=1x8:2x16:4x32"])
    err = capsys.readouterr().err
    assert rc == 2 and "pip install tensorrt" in err and "(this can take minutes)" in err
    assert not (tmp_path / "bert.engine").exists()
