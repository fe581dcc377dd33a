"""The model-zoo additions for the end-to-end benchmark (issue 6): ResNet-50-style bottlenecks,
ViT patch size / grid, BERT's torch-style mask, the benchmark-size registry entries and
example_inputs for symbolic dims. Tiny configurations: checker, ONNX Runtime CPU, rewrite."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

import trt_fastops
from models import build as B
from models import convnets as C
from models import transformer as T

ort = pytest.importorskip("onnxruntime")


def run_cpu(model, feeds, custom=False):
    if custom:
        from trt_fastops.ort import make_session

        sess = make_session(model)
    else:
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def test_base_models_registered_not_in_ci_lists():
    assert set(B.BASE_MODELS) == {"bert_base_dynamic", "gpt2_small", "llama_small_gqa", "vit_base", "resnet50"}
    assert not set(B.BASE_MODELS) & (set(B.TINY_MODELS) | set(B.CONV_MODELS))
    for name in B.BASE_MODELS:
        assert B.expected_ops(name) is None and B.MODELS[name].description
    assert "bert_tiny_mask2" in B.TINY_MODELS  # rewritten and run in CI like the other tiny models


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_resnet_bottleneck_tiny_runs_and_rewrites(dtype):
    model = C.resnet_bottleneck(dtype=dtype, blocks=(2, 1), width=8)
    onnx.checker.check_model(model, full_check=True)
    ops = [n.op_type for n in model.graph.node]
    # stem + per block 3 convs, + a projection in each stage's first block
    assert ops.count("Conv") == 1 + 3 * 3 + 2 and ops.count("Add") == 3
    shapes = {i.name: list(i.dims) for i in model.graph.initializer}
    assert shapes["layer1.0.conv3.weight"] == [32, 8, 1, 1] and shapes["layer2.0.conv2.weight"] == [16, 16, 3, 3]
    assert shapes["fc.weight"] == [10, 64]
    feeds = B.example_inputs(model)
    (ref,) = run_cpu(model, feeds)
    assert ref.shape == (2, 10) and ref.dtype == np.dtype(dtype) and np.isfinite(ref).all() and ref.std() > 0.1
    result = trt_fastops.rewrite(model, conv="all")
    assert result.report.counts() == {"Conv": 12} and not result.report.refusals
    (got,) = run_cpu(result.model, feeds, custom=True)
    tol = 1e-3 if dtype == "float32" else 3e-2
    np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), atol=tol * (1 + np.abs(ref).max()))


def test_resnet50_shape_and_size():
    model = B.build("resnet50", batch=1)
    assert [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim] == [1, 3, 224, 224]
    assert [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim] == [1, 1000]
    params = sum(int(np.prod(i.dims)) for i in model.graph.initializer)
    assert 25.5e6 < params < 25.6e6  # torchvision's ResNet-50: 25,557,032
    assert sum(n.op_type == "Conv" for n in model.graph.node) == 53


def test_vit_patch_and_grid():
    tiny = T.vit("tiny")
    assert [d.dim_value for d in tiny.graph.input[0].type.tensor_type.shape.dim] == [2, 3, 8, 16]
    # the default patch keeps the tiny model's weights (CI expectations elsewhere depend on them)
    w = {i.name: onnx.numpy_helper.to_array(i) for i in tiny.graph.initializer}["patch_embed.proj.weight"]
    assert w.shape == (64, 3, 4, 4) and 0.15 < w.std() < 0.25
    m = T.vit("tiny", patch=16, grid=(2, 4))
    assert [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim] == [2, 3, 32, 64]
    onnx.checker.check_model(m, full_check=True)
    (out,) = run_cpu(m, B.example_inputs(m))
    assert out.shape == (2, 8, 64) and np.isfinite(out).all()
    result = trt_fastops.rewrite(m)
    assert result.report.counts() == {"Attention": 2, "SkipLayerNorm": 5}
    with pytest.raises(ValueError, match="grid"):
        T.vit("tiny", grid=(3, 3))
    with pytest.raises(ValueError, match="even sequence length"):
        T.vit("tiny", seq=7)
    base = B.build("vit_base", batch=1, layers=1)
    assert [d.dim_value for d in base.graph.input[0].type.tensor_type.shape.dim] == [1, 3, 224, 224]


def test_bert_torch_mask_matches_the_single_unsqueeze():
    one, two = T.bert("tiny"), T.bert("tiny", mask_unsqueezes=2)
    unsq = [n for n in two.graph.node if n.op_type == "Unsqueeze"]
    assert len(unsq) == 2 and unsq[0].input[0] == "attention_mask" and unsq[1].input[0] == unsq[0].output[0]
    feeds = B.example_inputs(one)
    np.testing.assert_array_equal(run_cpu(one, feeds)[0], run_cpu(two, feeds)[0])  # same weights, same math
    with pytest.raises(ValueError, match="mask_unsqueezes"):
        T.bert("tiny", mask_unsqueezes=3)


def test_example_inputs_resolve_symbolic_dims():
    m = B.build("bert_base_dynamic", config="tiny")
    assert B.example_inputs(m)["input_ids"].shape == (2, 8)  # the builder's metadata
    feeds = B.example_inputs(m, dims={"batch": 3, "sequence": 5})
    assert {k: v.shape for k, v in feeds.items()} == {k: (3, 5) for k in ("input_ids", "token_type_ids",
                                                                          "attention_mask")}
    assert feeds["attention_mask"][-1, 2:].sum() == 0  # the last sequence is padded
    out = run_cpu(m, feeds)[0]
    assert out.shape == (3, 5, 64)


def test_llama_benchmark_config_one_layer_runs_in_float16():
    """The benchmark's Llama block (hidden 2048, 32 heads, 4 KV heads, rotary, finfo.min causal
    mask in float16), one layer and 16 tokens: finite on ORT CPU and rewritten completely."""
    m = B.build("llama_small_gqa", dtype="float16", layers=1, seq=16)
    onnx.checker.check_model(m)
    feeds = B.example_inputs(m)
    (ref,) = run_cpu(m, feeds)
    assert ref.shape == (1, 16, 2048) and np.isfinite(ref).all()
    result = trt_fastops.rewrite(m)
    assert result.report.counts() == {"Attention": 1, "RMSNorm": 3}
    (got,) = run_cpu(result.model, feeds, custom=True)
    err = np.abs(got.astype(np.float64) - ref) / (1 + np.abs(ref.astype(np.float64)))
    assert err.max() < 0.02
