"""Rewriting the model builders: exact op counts, checker, IR version, numerics, idempotence.

The rewritten graph runs with our CPU custom ops (trt_fastops.ort.make_session) and,
independently of the native library, with onnx.reference plus the float64 numpy
references of models/reference.py. Both are compared with ONNX Runtime's CPU run of
the ORIGINAL graph.
"""
from __future__ import annotations

import collections

import numpy as np
import onnx
import pytest

from models import build as B
from models.reference import run_reference
from trt_fastops.rewriter import rewrite

ort = pytest.importorskip("onnxruntime")

OURS = ("LayerNorm", "SkipLayerNorm", "RMSNorm", "Attention")


def op_counts(model: onnx.ModelProto) -> collections.Counter:
    return collections.Counter(n.op_type for n in model.graph.node)


def run_original(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def custom_op_session(model):
    """make_session(model), or skip when the custom-op library is not built."""
    try:
        from trt_fastops.ort import make_session
        import trt_fastops

        trt_fastops.library_path("ort")
    except (ImportError, FileNotFoundError) as e:
        pytest.skip(f"trt_fastops ORT library not available: {e}")
    return make_session(model)


def assert_close(got, ref, dtype):
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert got.shape == ref.shape
    scale = max(1.0, float(np.abs(ref).max()))
    # float16: the original computes its decomposed norms in float16, ours in float32
    tol = 1e-5 if dtype == "float32" else 2.5e-2
    err = float(np.abs(got - ref).max())
    assert err <= tol * scale, f"max |diff| {err:.3e} > {tol * scale:.3e}"


@pytest.fixture(scope="module")
def rewritten():
    cache = {}

    def get(name, dtype="float32"):
        if (name, dtype) not in cache:
            model = B.build(name, dtype=dtype)
            cache[name, dtype] = (model, rewrite(model))
        return cache[name, dtype]

    return get


@pytest.mark.parametrize("name", B.TINY_MODELS)
def test_op_counts_after_rewrite(name, rewritten):
    original, result = rewritten(name)
    counts = op_counts(result.model)
    for op, n in B.expected_ops(name).items():
        assert counts.get(op, 0) == n, f"{name}: {op} x{counts.get(op, 0)}, expected {n}: {dict(counts)}"
    # nothing of the decomposed norms is left behind
    assert counts.get("ReduceMean", 0) == 0 and counts.get("Sqrt", 0) == 0
    assert result.report.counts() == {k: v for k, v in B.expected_ops(name).items() if k in OURS and v}
    assert result.report.refusals == []


@pytest.mark.parametrize("name", B.TINY_MODELS)
def test_output_model_is_valid(name, rewritten):
    original, result = rewritten(name)
    out = result.model
    onnx.checker.check_model(out, full_check=True)
    opsets = {o.domain: o.version for o in out.opset_import}
    assert opsets["trt_fastops"] == 1
    assert opsets[""] == {o.domain: o.version for o in original.opset_import}[""]
    assert out.ir_version == original.ir_version <= 13
    for node in out.graph.node:
        if node.domain == "trt_fastops":
            assert node.name and not node.metadata_props
            assert not node.output[-1] == ""  # unused trailing optional outputs are dropped


@pytest.mark.parametrize("name", B.TINY_MODELS)
def test_numerics_reference_ops(name, rewritten):
    original, result = rewritten(name)
    feeds = B.example_inputs(original)
    (ref,) = run_original(original, feeds)
    (got,) = run_reference(result.model, feeds)
    assert_close(got, ref, "float32")


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("name", B.TINY_MODELS)
def test_numerics_custom_ops(name, dtype, rewritten):
    original, result = rewritten(name, dtype)
    sess = custom_op_session(result.model)
    feeds = B.example_inputs(original)
    (ref,) = run_original(original, feeds)
    (got,) = sess.run(None, feeds)
    assert got.dtype == np.dtype(dtype)
    assert_close(got, ref, dtype)


@pytest.mark.parametrize("name", ["bert_tiny", "gpt_tiny", "llama_tiny", "llama_tiny_rmsop"])
def test_rewrite_twice_changes_nothing(name, rewritten):
    _, first = rewritten(name)
    second = rewrite(first.model)
    assert second.report.rewrites == [] and second.report.refusals == []
    assert second.model.SerializeToString() == first.model.SerializeToString()


def test_gpt_sum_outputs_feed_the_residual_stream(rewritten):
    _, result = rewritten("gpt_tiny")
    skips = [n for n in result.model.graph.node if n.op_type == "SkipLayerNorm"]
    # pre-LN: every fused Add but the one before ln_f is also the next residual input
    with_sum = [n for n in skips if len(n.output) == 4 and n.output[3]]
    assert len(with_sum) == 4
    skip_records = [r for r in result.report.rewrites if r.op == "SkipLayerNorm"]
    assert [r.details["sum_output"] for r in skip_records] == [True, True, True, True, False]
    consumers = collections.Counter(i for n in result.model.graph.node for i in n.input)
    for n in with_sum:
        assert consumers[n.output[3]] >= 1


def test_bert_folds_linear_bias_and_position_skip(rewritten):
    _, result = rewritten("bert_tiny")
    skips = [n for n in result.model.graph.node if n.op_type == "SkipLayerNorm"]
    emb = skips[0]
    assert emb.input[1] == "/embeddings/Gather_2_output_0"  # position embeddings, Skip [1, S, H]
    assert len(emb.input) == 4  # no Bias
    for n in skips[1:]:
        assert len(n.input) == 5 and n.input[4].endswith(".dense.bias")
        assert n.input[0].endswith("dense/MatMul_output_0")


def test_llama_first_norm_has_no_skip(rewritten):
    _, result = rewritten("llama_tiny")
    rms = [n for n in result.model.graph.node if n.op_type == "RMSNorm"]
    assert [len(n.input) for n in rms] == [2, 3, 3, 3, 3]
    assert [len(n.output) for n in rms] == [1, 2, 2, 2, 1]
    assert rms[0].input[0] == "/Gather_output_0"


def test_dynamic_axes_model_runs_at_other_sizes(rewritten):
    original, result = rewritten("bert_tiny_dynamic")
    assert any(r.details.get("shapes_assumed") for r in result.report.rewrites)
    assert "not provably compatible" in result.report.to_text()
    sess = custom_op_session(result.model)
    feeds = {k: np.ascontiguousarray(np.concatenate([v, v[:1]])[:, :5]) for k, v in B.example_inputs(original).items()}
    (ref,) = run_original(original, feeds)
    (got,) = sess.run(None, feeds)
    assert got.shape == (3, 5, 64)
    assert_close(got, ref, "float32")
