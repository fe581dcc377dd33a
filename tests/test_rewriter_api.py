"""rewrite() / rewrite_file(): input kinds, external data, IR version, report, errors."""
from __future__ import annotations

import json

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import trt_fastops
from models import build as B
from models import norm_patterns as P
from models.reference import run_reference
from trt_fastops.rewriter import MAX_IR_VERSION, RewriteError, RewriteReport, rewrite, rewrite_file


def our_ops(model):
    return sorted(n.op_type for n in model.graph.node if n.domain == "trt_fastops")


@pytest.fixture(scope="module")
def bert():
    return B.build("bert_tiny")


def test_input_kinds_give_the_same_model(bert, tmp_path):
    path = tmp_path / "bert.onnx"
    onnx.save(bert, str(path))
    from_proto = rewrite(bert).model.SerializeToString()
    assert rewrite(str(path)).model.SerializeToString() == from_proto
    assert rewrite(path).model.SerializeToString() == from_proto
    irm = ir.serde.deserialize_model(bert)
    result = rewrite(irm)
    assert result.ir_model is irm  # an onnx_ir.Model is rewritten in place
    assert result.model.SerializeToString() == from_proto
    # the caller's ModelProto is not modified
    assert not any(n.domain for n in bert.graph.node)


def test_package_level_rewrite_forwards(bert):
    assert our_ops(trt_fastops.rewrite(bert, ops=["LayerNorm"]).model) == ["LayerNorm"] * 5


def test_rewrite_file_keeps_external_data_external(tmp_path):
    src = tmp_path / "in" / "bert.onnx"
    model = B.build("bert_tiny")
    B.save(model, src, external_data=True)
    assert (tmp_path / "in" / "bert.onnx.data").exists()
    out = tmp_path / "out" / "bert.fast.onnx"
    report = tmp_path / "out" / "report.json"
    result = rewrite_file(src, out, report_path=report)
    data = out.parent / "bert.fast.onnx.data"
    assert data.exists() and data.stat().st_size > 100_000
    assert out.stat().st_size < 50_000  # the graph only; weights are in the .data file
    proto = onnx.load(str(out), load_external_data=False)
    big = [t for t in proto.graph.initializer if t.data_type == onnx.TensorProto.FLOAT and len(t.dims) == 2]
    assert big and all(t.data_location == onnx.TensorProto.EXTERNAL for t in big)
    assert {e.value for t in big for e in t.external_data if e.key == "location"} == {"bert.fast.onnx.data"}
    onnx.checker.check_model(str(out), full_check=True)
    loaded = onnx.load(str(out))
    assert sorted(our_ops(loaded)) == ["Attention"] * 2 + ["SkipLayerNorm"] * 5
    feeds = B.example_inputs(model)
    import onnxruntime as ort

    (ref,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    (got,) = run_reference(loaded, feeds)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    assert json.loads(report.read_text())["counts"] == {"Attention": 2, "SkipLayerNorm": 5}
    # the in-memory model of the result has the weights loaded
    assert sorted(our_ops(result.model)) == ["Attention"] * 2 + ["SkipLayerNorm"] * 5
    assert all(t.data_location != onnx.TensorProto.EXTERNAL for t in result.model.graph.initializer)


def test_rewrite_file_in_place_with_external_data(tmp_path, caplog):
    path = tmp_path / "gpt.onnx"
    model = B.build("gpt_tiny")
    B.save(model, path, external_data=True)
    result = rewrite_file(path, path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpt.onnx", "gpt.onnx.data"]
    assert not [r for r in caplog.records if "invalidated" in r.getMessage()]
    loaded = onnx.load(str(path))
    assert sorted(our_ops(loaded)) == ["Attention"] * 2 + ["SkipLayerNorm"] * 5
    feeds = B.example_inputs(model)
    np.testing.assert_allclose(run_reference(loaded, feeds)[0], run_reference(result.model, feeds)[0])


def test_rewrite_file_inline_stays_inline(tmp_path, bert):
    src = tmp_path / "bert.onnx"
    onnx.save(bert, str(src))
    out = tmp_path / "bert.fast.onnx"
    rewrite_file(src, out, ops=["LayerNorm"])
    assert not (tmp_path / "bert.fast.onnx.data").exists()
    assert our_ops(onnx.load(str(out))) == ["LayerNorm"] * 5


@pytest.mark.parametrize("name,ir_in,ir_out", [
    ("bert_tiny", 14, 13),           # onnx 1.23's default IR: lowered to what ORT 1.31 reads
    ("bert_tiny", 8, 8),             # kept
    ("bert_tiny_decomposed", 5, 7),  # raised to what opset 13 needs
    ("llama_tiny_rmsop", 11, 11),    # opset 23 needs IR 11
])
def test_ir_version(name, ir_in, ir_out):
    model = B.build(name)
    model.ir_version = ir_in
    result = rewrite(model)
    assert result.model.ir_version == ir_out == result.report.ir_version
    assert ir_out <= MAX_IR_VERSION
    onnx.checker.check_model(result.model, full_check=True)


def test_report(bert):
    result = rewrite(P.norm_op(skip_shape=(2, 1, 16)))
    report = result.report
    assert isinstance(report, RewriteReport)
    assert report.counts() == {"LayerNorm": 1}
    assert report.refusal_counts() == {"skip_layer_norm": 1}
    d = json.loads(report.to_json())
    assert d["counts"] == {"LayerNorm": 1}
    assert d["rewrites"][0]["op"] == "LayerNorm" and d["rewrites"][0]["replaced"] == ["/LayerNormalization"]
    assert d["refusals"][0]["nodes"] == ["/Add", "/LayerNorm"]
    assert d["opset_imports"] == {"": 17, "trt_fastops": 1}
    text = report.to_text()
    assert text.splitlines()[0].endswith("1 rewrites (LayerNorm 1), 1 refusals")
    assert "rewrote  LayerNorm '/LayerNorm' <- LayerNormalization '/LayerNormalization'" in text
    assert "refused  SkipLayerNorm (skip_layer_norm) at Add '/Add', LayerNorm '/LayerNorm': 'skip'" in text
    # nothing to do: an empty but valid report, and the opset import is still added
    plain = rewrite(P.norm_op(), ops=["RMSNorm"])
    assert plain.report.rewrites == [] and plain.report.refusals == []
    assert "0 rewrites (nothing), 0 refusals" in plain.report.to_text()
    assert {o.domain: o.version for o in plain.model.opset_import}["trt_fastops"] == 1


# ---------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------
def _invalid_model() -> onnx.ModelProto:
    g = onnx.helper.make_graph([onnx.helper.make_node("Relu", ["missing"], ["y"], name="relu")], "g",
                               [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
                               [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])])
    m = onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def test_missing_file(tmp_path):
    with pytest.raises(RewriteError, match=r"nope\.onnx: no such file"):
        rewrite(tmp_path / "nope.onnx")
    with pytest.raises(RewriteError, match="no such file"):
        rewrite_file(tmp_path / "nope.onnx", tmp_path / "out.onnx")
    assert not (tmp_path / "out.onnx").exists()


def test_directory(tmp_path):
    with pytest.raises(RewriteError, match="is a directory"):
        rewrite(tmp_path)


@pytest.mark.parametrize("content", [b"this is not an onnx model at all", bytes(range(256)) * 8, b""])
def test_not_onnx(tmp_path, content):
    path = tmp_path / "x.onnx"
    path.write_bytes(content)
    with pytest.raises(RewriteError, match="not an ONNX model"):
        rewrite(path)


def test_invalid_graph(tmp_path):
    with pytest.raises(RewriteError, match="invalid ONNX model: .*'missing'"):
        rewrite(_invalid_model())
    path = tmp_path / "bad.onnx"
    onnx.save(_invalid_model(), str(path))
    with pytest.raises(RewriteError, match=r"bad\.onnx: invalid ONNX model"):
        rewrite_file(path, tmp_path / "out.onnx")


def test_unknown_op_in_the_graph():
    m = P.norm_op()
    m.graph.node[0].op_type = "LayerNormalisation"
    with pytest.raises(RewriteError, match="invalid ONNX model: No Op registered for LayerNormalisation"):
        rewrite(m)


def test_bad_arguments(bert):
    with pytest.raises(RewriteError, match="unknown op.*'Conv9'"):
        rewrite(bert, ops=["LayerNorm", "Conv9"])
    with pytest.raises(RewriteError, match="expected an onnx.ModelProto, onnx_ir.Model, str or Path, got int"):
        rewrite(42)
    assert issubclass(RewriteError, ValueError)
