"""The trt-fastops command line, end to end, as a user runs it (subprocesses)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import numpy_helper


def run_cli(*args, cwd):
    # PYTHONSAFEPATH + a scratch cwd: the subprocess imports trt_fastops the way a user's shell does.
    env = dict(os.environ, PYTHONSAFEPATH="1")
    return subprocess.run([sys.executable, "-m", "trt_fastops", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    from models.build import build

    d = tmp_path_factory.mktemp("cli")
    path = d / "bert_tiny.onnx"
    onnx.save(build("bert_tiny"), str(path))
    return path


def test_help_shows_examples(tmp_path):
    r = run_cli("--help", cwd=tmp_path)
    assert r.returncode == 0
    assert "trt-fastops rewrite model.onnx -o model.fast.onnx" in r.stdout


def test_info(tmp_path):
    r = run_cli("info", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "CUDA architectures:" in r.stdout
    assert "libtrt_fastops_ort.so" in r.stdout
    info = json.loads(run_cli("info", "--json", cwd=tmp_path).stdout)
    assert info["libraries"]["ort"].endswith("libtrt_fastops_ort.so")
    assert info["libraries"]["trt"] is None  # no TensorRT plugins in this build
    assert "cuda_archs" in info["build"]


def test_rewrite_then_check(bert, tmp_path):
    out, report = tmp_path / "fast.onnx", tmp_path / "report.json"
    r = run_cli("rewrite", bert, "-o", out, "--report", report, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "SkipLayerNorm" in r.stdout
    rewritten = onnx.load(str(out))
    assert any(n.domain == "trt_fastops" for n in rewritten.graph.node)
    assert json.loads(report.read_text())  # machine-readable report

    r = run_cli("check", bert, out, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "all outputs match" in r.stdout


def test_check_detects_a_mismatch(bert, tmp_path):
    out = tmp_path / "fast.onnx"
    assert run_cli("rewrite", bert, "-o", out, cwd=tmp_path).returncode == 0
    m = onnx.load(str(out))
    # Perturb the scale of the first norm: the comparison must notice.
    node = next(n for n in m.graph.node if n.domain == "trt_fastops")
    scale_name = node.input[2] if node.op_type == "SkipLayerNorm" else node.input[1]
    init = next(t for t in m.graph.initializer if t.name == scale_name)
    arr = numpy_helper.to_array(init).copy()
    init.CopyFrom(numpy_helper.from_array(arr * np.float32(1.5), scale_name))
    bad = tmp_path / "bad.onnx"
    onnx.save(m, str(bad))
    r = run_cli("check", bert, bad, cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "MISMATCH" in r.stdout


def test_clear_errors(tmp_path):
    r = run_cli("rewrite", tmp_path / "missing.onnx", "-o", tmp_path / "o.onnx", cwd=tmp_path)
    assert r.returncode == 2
    assert "missing.onnx" in r.stderr

    r = run_cli("rewrite", tmp_path / "x.onnx", "-o", tmp_path / "o.onnx", "--ops", "Conv9", cwd=tmp_path)
    assert r.returncode != 0
    assert "unknown op(s) Conv9" in r.stderr

    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"not an onnx model")
    r = run_cli("check", junk, junk, cwd=tmp_path)
    assert r.returncode == 2
    assert "junk.onnx" in r.stderr

    r = run_cli("check", junk, junk, "--device", "cpu", "--cuda-graph", cwd=tmp_path)
    assert r.returncode == 2
    assert "CUDA graphs need --device cuda" in r.stderr
