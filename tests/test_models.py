"""Every model builder: passes the ONNX checker (full check) and runs on ONNX Runtime CPU."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from models import build as B

ort = pytest.importorskip("onnxruntime")


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("name", B.TINY_MODELS)
def test_builder_checks_and_runs(name, dtype):
    model = B.build(name, dtype=dtype)
    onnx.checker.check_model(model, full_check=True)
    assert model.ir_version <= 13, "ONNX Runtime 1.31 reads IR versions up to 13"
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (out,) = sess.run(None, B.example_inputs(model))
    assert out.shape == (2, 8, 64)
    assert out.dtype == np.dtype(dtype)
    assert np.isfinite(out).all()
    assert out.std() > 0.1  # normalised hidden states, not a constant


def test_seed_changes_weights_and_is_deterministic():
    a, b, c = B.build("bert_tiny", seed=0), B.build("bert_tiny", seed=0), B.build("bert_tiny", seed=1)
    wa, wb, wc = (onnx.numpy_helper.to_array(m.graph.initializer[0]) for m in (a, b, c))
    np.testing.assert_array_equal(wa, wb)
    assert not np.array_equal(wa, wc)


def test_bert_tiny_has_layer_norm_ops_and_residual_adds():
    m = B.build("bert_tiny")
    ops = [n.op_type for n in m.graph.node]
    assert ops.count("LayerNormalization") == 5
    producers = {o: n for n in m.graph.node for o in n.output}
    for n in m.graph.node:
        if n.op_type == "LayerNormalization":
            assert producers[n.input[0]].op_type == "Add"


def test_unknown_names_and_forms():
    with pytest.raises(KeyError, match="unknown model"):
        B.build("nope")
    from models import transformer

    with pytest.raises(ValueError, match="layer-norm form"):
        transformer.bert(ln="bogus")
    with pytest.raises(ValueError, match="opset >= 23"):
        transformer.llama(rms="op", opset=18)


def test_cli_list_and_build(tmp_path, capsys):
    assert B.main(["list"]) == 0
    listed = capsys.readouterr().out
    for name in B.names():
        assert name in listed
    out = tmp_path / "m.onnx"
    assert B.main(["gpt_tiny", "-o", str(out), "--dtype", "float16", "--seed", "3", "--external-data"]) == 0
    assert (tmp_path / "m.onnx.data").exists()
    m = onnx.load(str(out))
    onnx.checker.check_model(m, full_check=True)
    assert m.graph.input[0].name == "input_ids"
