"""`--target portable|ort` of trt-fastops rewrite and trt-fastops bench --rewrite (in-process, CPU):
passed through to the rewriter, the ONNX Runtime contrib ops (BiasGelu / FastGelu) only with
--target ort, and the errors that say what to do."""
from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

from models import build as B
from trt_fastops import cli
from trt_fastops.rewriter import rewrite

ort = pytest.importorskip("onnxruntime")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli_target")
    paths = {}
    for name in ("vit_tiny", "gpt_tiny"):
        paths[name] = d / f"{name}.onnx"
        onnx.save(B.build(name), str(paths[name]))
    return paths


def domains(path) -> dict:
    m = onnx.load(str(path))
    out: dict = {}
    for n in m.graph.node:
        out.setdefault(n.domain, []).append(n.op_type)
    return out


def custom_session(path):
    try:
        import trt_fastops
        from trt_fastops.ort import make_session

        trt_fastops.library_path("ort")
    except (ImportError, FileNotFoundError) as e:
        pytest.skip(f"trt_fastops ORT library not available: {e}")
    return make_session(str(path))


def test_help_shows_the_target_option(capsys):
    for cmd, example in [("rewrite", "trt-fastops rewrite vit.onnx -o vit.ort.onnx --target ort"),
                         ("bench", "trt-fastops bench vit.onnx --rewrite --target ort")]:
        with pytest.raises(SystemExit) as e:
            cli.main([cmd, "--help"])
        assert e.value.code == 0
        out = capsys.readouterr().out
        assert example in out and "--target {portable,ort}" in out
        assert "BiasGelu" in out and "TensorRT" in out
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "--target ort" in capsys.readouterr().out


@pytest.mark.parametrize("target", [None, "portable", "ort"])
def test_rewrite_target(models, tmp_path, capsys, target):
    src, out, rep = models["vit_tiny"], tmp_path / "vit.out.onnx", tmp_path / "report.json"
    argv = ["rewrite", str(src), "-o", str(out), "--report", str(rep)] + (["--target", target] if target else [])
    assert cli.main(argv) == 0
    text = capsys.readouterr().out
    report = json.loads(rep.read_text())
    ops = domains(out)
    if target == "ort":
        assert "; target=ort)" in text.splitlines()[0] and report["target"] == "ort"
        # per layer: the packed Q/K/V projection and the MLP's MatMul + bias + GELU become Dense
        assert ops["trt_fastops"].count("Dense") == 4 and "com.microsoft" not in ops, ops
    else:
        assert "target=" not in text.splitlines()[0] and report["target"] == "portable"
        assert "com.microsoft" not in ops
    assert {"Attention", "SkipLayerNorm"} <= set(ops["trt_fastops"])
    # the same file the API writes, and ONNX Runtime (our library) computes the original's numbers
    api = rewrite(onnx.load(str(src)), target=target).model
    assert [n.op_type for n in api.graph.node] == [n.op_type for n in onnx.load(str(out)).graph.node]
    feeds = B.example_inputs(onnx.load(str(src)))
    (ref,) = ort.InferenceSession(str(src), providers=["CPUExecutionProvider"]).run(None, feeds)
    (got,) = custom_session(out).run(None, feeds)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_rewrite_ops_names_the_gelu_rule(models, tmp_path, capsys):
    out = tmp_path / "gpt.ort.onnx"
    # GPT-2's tanh GELU becomes FastGelu; FastGelu and BiasGelu both name that one rule
    for name in ("FastGelu", "BiasGelu"):
        assert cli.main(["rewrite", str(models["gpt_tiny"]), "-o", str(out), "--ops", name, "--target", "ort"]) == 0
        assert capsys.readouterr().out.startswith("trt_fastops rewrite (BiasGelu; target=ort): 2 rewrites (FastGelu 2)")
        assert domains(out).get("com.microsoft") == ["FastGelu"] * 2 and "trt_fastops" not in domains(out)
    feeds = B.example_inputs(onnx.load(str(models["gpt_tiny"])))
    (ref,) = ort.InferenceSession(str(models["gpt_tiny"]), providers=["CPUExecutionProvider"]).run(None, feeds)
    (got,) = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, feeds)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("extra,message", [
    (["--ops", "BiasGelu"], "--ops BiasGelu names ONNX Runtime-only ops; add --target ort"),
    (["--ops", "LayerNorm,FastGelu", "--target", "portable"], "--ops FastGelu names ONNX Runtime-only ops"),
    (["--target", "ort", "--plugin-attributes"], "use --target portable"),
    (["--ops", "Gelu9", "--target", "ort"], "unknown op(s) Gelu9; choose from LayerNorm"),
])
def test_rewrite_target_errors(models, tmp_path, capsys, extra, message):
    out = tmp_path / "never.onnx"
    assert cli.main(["rewrite", str(models["vit_tiny"]), "-o", str(out)] + extra) == 2
    err = capsys.readouterr().err
    assert err.startswith("trt-fastops rewrite: ") and message in err, err
    assert not out.exists()


def test_rewrite_unknown_target_is_an_argparse_error(models, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["rewrite", str(models["vit_tiny"]), "-o", str(tmp_path / "x.onnx"), "--target", "tensorrt"])
    assert e.value.code == 2 and "invalid choice: 'tensorrt'" in capsys.readouterr().err


def test_bench_rewrite_target_ort(models, tmp_path, capsys):
    rep = tmp_path / "bench.json"
    rc = cli.main(["bench", str(models["vit_tiny"]), "--rewrite", "--target", "ort", "--device", "cpu",
                   "--iterations", "2", "--warmup", "1", "--json", str(rep)])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    doc = json.loads(rep.read_text())
    assert [r["model"] for r in doc["rows"]] == [str(models["vit_tiny"]),
                                                 f"{models['vit_tiny']} (rewritten, target ort)"]
    assert doc["rewrite"] == {"conv": "off", "target": "ort"}
    assert doc["rows"][1]["max_scaled_diff_vs_first"] < 1e-4
    assert "(rewritten, target ort)" in captured.out


def test_bench_target_needs_rewrite(models, capsys):
    assert cli.main(["bench", str(models["vit_tiny"]), "--target", "ort", "--device", "cpu", "--iterations", "1"]) == 2
    assert "trt-fastops bench: --target applies to the in-memory rewrite: add --rewrite" in capsys.readouterr().err


def test_rewriter_accepts_fastgelu_as_an_alias():
    m = B.build("gpt_tiny")
    r = rewrite(m, ops=["FastGelu"], target="ort")
    assert r.report.ops == ["BiasGelu"] and r.report.counts() == {"FastGelu": 2}
