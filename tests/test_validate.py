"""trt-fastops validate / trt_fastops.validate: rewritten vs original through Polygraphy's
comparator, on the CI models (ONNX Runtime CPU; TensorRT where installed)."""
from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

import trt_fastops
from models import build as B
from trt_fastops import cli
from trt_fastops.validation import ValidationError, parse_output_tolerances, validate

pytest.importorskip("onnxruntime")
pytest.importorskip("polygraphy")

NORMS = ["LayerNorm", "SkipLayerNorm", "RMSNorm"]
TRT = {"tensorrt": False}  # CI has no TensorRT; tests/gpu covers the TensorRT runner


def rewritten(name: str, **kw) -> tuple[onnx.ModelProto, onnx.ModelProto]:
    model = B.build(name, **kw)
    if name in B.CONV_MODELS:
        return model, trt_fastops.rewrite(model, ops=["Conv", "ConvTranspose"], conv="all").model
    return model, trt_fastops.rewrite(model, ops=NORMS).model


@pytest.fixture(scope="module")
def bert():
    return rewritten("bert_tiny")


@pytest.fixture(scope="module")
def bert_files(tmp_path_factory, bert):
    d = tmp_path_factory.mktemp("validate")
    orig, rew = d / "bert.onnx", d / "bert.fast.onnx"
    onnx.save(bert[0], str(orig))
    onnx.save(bert[1], str(rew))
    return orig, rew


def tampered(model: onnx.ModelProto) -> onnx.ModelProto:
    """The rewritten model with one norm's epsilon made huge: outputs change, shapes don't."""
    bad = onnx.ModelProto()
    bad.CopyFrom(model)
    node = next(n for n in bad.graph.node if n.domain == trt_fastops.DOMAIN)
    for a in node.attribute:
        if a.name == "epsilon":
            a.f = 10.0
            break
    else:
        node.attribute.append(onnx.helper.make_attribute("epsilon", 10.0))
    return bad


@pytest.mark.parametrize("name", ["bert_tiny", "gpt_tiny", "llama_tiny", "resnet_tiny"])
def test_rewritten_ci_models_validate(name):
    orig, rew = rewritten(name)
    assert any(n.domain == trt_fastops.DOMAIN for n in rew.graph.node)
    report = trt_fastops.validate(orig, rew, **TRT)
    assert report.ok, report.to_text()
    (comp,) = report.comparisons
    assert comp.runner == "trt_fastops (ONNX Runtime CPU)" and comp.reference == "original (ONNX Runtime CPU)"
    out_names = [o.name for o in orig.graph.output]
    assert [o.name for o in comp.outputs] == out_names
    for o in comp.outputs:
        assert o.passed and o.max_abs < o.atol * 10 and np.isfinite(o.max_rel)
    text = report.to_text()
    assert "PASSED" in text and out_names[0] in text and "seeded random (seed 0)" in text


def test_float16_model_uses_float16_tolerances():
    orig, rew = rewritten("llama_tiny", dtype="float16")
    report = validate(orig, rew, **TRT)
    assert report.ok, report.to_text()
    (o,) = report.comparisons[0].outputs
    assert (o.dtype, o.atol, o.rtol) == ("float16", 2e-2, 2e-2)


def test_mismatch_is_reported_per_output(bert):
    orig, rew = bert
    report = validate(orig, tampered(rew), **TRT)
    assert not report.ok
    (o,) = report.comparisons[0].outputs
    assert not o.passed and o.max_abs > 1e-2
    assert "MISMATCH" in report.to_text() and "FAILED" in report.to_text()
    d = report.to_dict()
    assert d["ok"] is False and d["comparisons"][0]["outputs"][0]["passed"] is False
    # Loose enough tolerances for that one output make it pass.
    name = o.name
    assert validate(orig, tampered(rew), output_atol={name: 1e3}, **TRT).ok
    assert validate(orig, tampered(rew), atol=1e3, rtol=1e3, **TRT).ok


def test_given_inputs_and_dims():
    orig, rew = rewritten("bert_tiny_dynamic")
    report = validate(orig, rew, dims={"batch": 3, "sequence": 5}, **TRT)
    assert report.ok, report.to_text()
    feeds = B.example_inputs(orig, seed=4)
    report = validate(orig, rew, inputs=feeds, **TRT)
    assert report.ok and report.inputs.startswith("given")


def test_errors(bert, tmp_path):
    orig, rew = bert
    with pytest.raises(ValidationError, match="does not exist"):
        validate(tmp_path / "nope.onnx", rew)
    (tmp_path / "junk.onnx").write_bytes(b"not a model")
    with pytest.raises(ValidationError, match="not a readable ONNX model"):
        validate(orig, tmp_path / "junk.onnx")
    feeds = B.example_inputs(orig)
    with pytest.raises(ValidationError, match=r"inputs lack \['attention_mask'\]"):
        validate(orig, rew, inputs={k: v for k, v in feeds.items() if k != "attention_mask"})
    with pytest.raises(ValidationError, match=r"unknown input\(s\) \['bogus'\]"):
        validate(orig, rew, inputs={**feeds, "bogus": feeds["input_ids"]})
    with pytest.raises(ValidationError, match=r"output_atol names unknown output\(s\) \['nope'\]"):
        validate(orig, rew, output_atol={"nope": 1.0}, **TRT)
    with pytest.raises(ValidationError, match="device must be 'cpu' or 'cuda'"):
        validate(orig, rew, device="tpu")
    with pytest.raises(ValidationError, match="tensorrt must be True, False or 'auto'"):
        validate(orig, rew, tensorrt="yes")
    try:
        import tensorrt  # noqa: F401
    except ImportError:
        with pytest.raises(ValidationError, match="tensorrt=True but TensorRT's Python package is not installed"):
            validate(orig, rew, tensorrt=True)
        report = validate(orig, rew)  # auto: skipped, said so
        assert report.skipped == [("TensorRT (trt_fastops plugins)", "TensorRT's Python package is not installed")]
        assert "TensorRT (trt_fastops plugins): not run" in report.to_text()


def test_parse_output_tolerances():
    assert parse_output_tolerances(["a=1e-3", "b:c=2"], "--x") == {"a": 1e-3, "b:c": 2.0}
    for bad in ("a", "=1", "a=x"):
        with pytest.raises(ValidationError, match="--x expects OUTPUT=VALUE"):
            parse_output_tolerances([bad], "--x")


def test_cli_validate(bert_files, bert, tmp_path, capsys):
    orig, rew = bert_files
    report_path = tmp_path / "report.json"
    assert cli.main(["validate", str(orig), str(rew), "--tensorrt", "off", "--json", str(report_path)]) == 0
    out = capsys.readouterr().out
    assert "trt_fastops (ONNX Runtime CPU) vs original (ONNX Runtime CPU): ok" in out and "PASSED" in out
    assert json.loads(report_path.read_text())["ok"] is True

    bad = tmp_path / "bad.onnx"
    onnx.save(tampered(bert[1]), str(bad))
    assert cli.main(["validate", str(orig), str(bad), "--tensorrt", "off"]) == 1
    assert "MISMATCH" in capsys.readouterr().out
    assert cli.main(["validate", str(orig), str(bad), "--tensorrt", "off", "--output-atol",
                     "last_hidden_state=1000"]) == 0
    capsys.readouterr()

    feeds = B.example_inputs(bert[0], seed=2)
    npz = tmp_path / "feeds.npz"
    np.savez(npz, **feeds)
    assert cli.main(["validate", str(orig), str(rew), "--inputs", str(npz), "--tensorrt", "off"]) == 0
    assert "inputs: given" in capsys.readouterr().out

    np.savez(npz, input_ids=feeds["input_ids"])
    assert cli.main(["validate", str(orig), str(rew), "--inputs", str(npz)]) == 2
    assert "inputs lack" in capsys.readouterr().err
    assert cli.main(["validate", str(tmp_path / "missing.onnx"), str(rew)]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert cli.main(["validate", str(orig), str(rew), "--dim", "batch"]) == 2
    assert "--dim expects NAME=INT" in capsys.readouterr().err
    assert cli.main(["validate", str(orig), str(rew), "--output-rtol", "oops"]) == 2
    assert "--output-rtol expects OUTPUT=VALUE" in capsys.readouterr().err


def test_cli_help_lists_validate(capsys):
    with pytest.raises(SystemExit):
        cli.main(["validate", "--help"])
    out = capsys.readouterr().out
    assert "trt-fastops validate bert.onnx bert.fast.onnx" in out and "exit status" in out
