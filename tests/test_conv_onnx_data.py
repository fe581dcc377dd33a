"""ONNX's own test data for Conv / ConvTranspose, run through our ops on ONNX
Runtime's CPU execution provider.

1. Node cases (test_basic_conv_*, test_conv_*, test_convtranspose_*): from
   onnx/backend/test/data/node when the installed onnx ships it (or the directory
   named by TRT_FASTOPS_ONNX_NODE_DATA), otherwise generated from onnx's case
   definitions (onnx.backend.test.case.node.conv / convtranspose), as
   tests/test_onnx_node_cases.py does. The node is replaced by ours (same inputs,
   attributes) and compared with the expected outputs; the rewriter (conv="all")
   must produce the same node.
2. Every test_Conv* / test_ConvTranspose* case under
   onnx/backend/test/data/pytorch-converted (model.onnx, test_data_set_*): the
   model is rewritten with conv="all" (every conv must become ours) and compared
   with the expected outputs PyTorch produced, and with ONNX Runtime on the original.
3. The light_* real model graphs in onnx/backend/test/data/light (AlexNet, ResNet-50,
   ShuffleNet, SqueezeNet, DenseNet-121, Inception v1/v2; VGG-19 and ZFNet-512 too
   with TRT_FASTOPS_SLOW_TESTS=1): their weights are ConstantOfShape(0.02) fills,
   which make every channel identical and the softmax uniform, so the fills are
   replaced by seeded random tensors by role (He-scaled conv weights, batch-norm
   statistics near identity) first. Then rewrite with conv="all" and conv="fallback"
   and compare our CPU ops with ONNX Runtime on the (re-weighted) original, on the
   logits before the softmax and on the outputs.
The onnx wheel (1.23) ships pytorch-converted/ and light/ but not node/.
"""
from __future__ import annotations

import glob
import importlib
import os
import re
from dataclasses import dataclass, field

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

ort = pytest.importorskip("onnxruntime")

from trt_fastops import DOMAIN  # noqa: E402
from trt_fastops.ort import make_session  # noqa: E402
from trt_fastops.rewriter import rewrite  # noqa: E402

DATA = os.environ.get("TRT_FASTOPS_ONNX_TEST_DATA") or os.path.join(os.path.dirname(onnx.__file__), "backend",
                                                                    "test", "data")
NODE_PREFIXES = ("test_basic_conv", "test_conv_", "test_convtranspose")
OPS = ("Conv", "ConvTranspose")
IR_VERSION = 10
SLOW = os.environ.get("TRT_FASTOPS_SLOW_TESTS") == "1"


def load_tensor(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def load_data_sets(case_dir):
    sets = []
    for ds in sorted(glob.glob(os.path.join(case_dir, "test_data_set_*"))):
        def load(kind):
            files = sorted(glob.glob(os.path.join(ds, f"{kind}_*.pb")),
                           key=lambda f: int(re.findall(r"_(\d+)\.pb$", f)[0]))
            return [load_tensor(f) for f in files]
        sets.append((load("input"), load("output")))
    return sets


def ours(model):
    return [n for n in model.graph.node if n.domain == DOMAIN]


def standard_convs(model):
    return [n for n in model.graph.node if n.op_type in OPS and n.domain in ("", "ai.onnx")]


# ---------------------------------------------------------------------------
# 1. node cases


@dataclass
class Case:
    name: str
    model: onnx.ModelProto
    data_sets: list = field(default_factory=list)
    rtol: float = 1e-3
    atol: float = 1e-7


def node_cases():
    root = os.environ.get("TRT_FASTOPS_ONNX_NODE_DATA") or os.path.join(DATA, "node")
    cases = []
    for d in sorted(glob.glob(os.path.join(root, "test_*"))):
        name = os.path.basename(d)
        if name.startswith(NODE_PREFIXES) and "_expanded" not in name:
            cases.append(Case(name, onnx.load(os.path.join(d, "model.onnx")), load_data_sets(d)))
    if cases:
        return cases
    import onnx.backend.test.case.node as node_cases_mod

    for mod in ("conv", "convtranspose"):
        importlib.import_module(f"onnx.backend.test.case.node.{mod}")
    found = getattr(node_cases_mod, "_NodeTestCases", None)
    if found is None:
        found = node_cases_mod.collect_testcases(None)
    seen = set()
    for c in found:
        if c.name.startswith(NODE_PREFIXES) and c.name not in seen:
            seen.add(c.name)
            cases.append(Case(c.name, c.model, [(list(i), list(o)) for i, o in c.data_sets], c.rtol, c.atol))
    return cases


NODE_CASES = node_cases()


def replace_node(case):
    (node,) = standard_convs(case.model)
    g = case.model.graph
    new = helper.make_node(node.op_type, list(node.input), list(node.output), domain=DOMAIN, name=case.name)
    new.attribute.extend(node.attribute)
    graph = helper.make_graph([new], case.name, list(g.input), list(g.output), list(g.initializer))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)],
                             ir_version=IR_VERSION)


def test_node_cases_found():
    names = {c.name for c in NODE_CASES}
    assert any(n.startswith("test_basic_conv") for n in names) and any(n.startswith("test_convtranspose") for n in names)
    assert len(NODE_CASES) >= 17, sorted(names)


@pytest.mark.parametrize("case", NODE_CASES, ids=[c.name for c in NODE_CASES])
def test_node_case(case):
    assert case.data_sets
    for model in (replace_node(case), rewrite(case.model, conv="all").model):
        assert len(ours(model)) == 1 and not standard_convs(model)
        sess = make_session(model)
        for inputs, outputs in case.data_sets:
            feeds = {i.name: v for i, v in zip(case.model.graph.input, inputs)}
            got = sess.run(None, feeds)
            for g, want in zip(got, outputs):
                assert g.dtype == want.dtype and g.shape == want.shape, (g.shape, want.shape)
                np.testing.assert_allclose(g, want, rtol=case.rtol, atol=max(case.atol, 1e-6), err_msg=case.name)


# ---------------------------------------------------------------------------
# 2. pytorch-converted


def pytorch_cases():
    root = os.path.join(DATA, "pytorch-converted")
    return sorted(d for d in glob.glob(os.path.join(root, "test_Conv*")) if os.path.isdir(d))


PYTORCH_CASES = pytorch_cases()


def test_pytorch_converted_cases_found():
    if not os.path.isdir(os.path.join(DATA, "pytorch-converted")):
        pytest.skip(f"no pytorch-converted test data under {DATA} (set TRT_FASTOPS_ONNX_TEST_DATA to an "
                    "onnx source checkout's onnx/backend/test/data)")
    names = [os.path.basename(d) for d in PYTORCH_CASES]
    assert len(names) >= 28, names
    assert "test_ConvTranspose2d" in names and "test_Conv3d_dilated_strided" in names


@pytest.mark.parametrize("case_dir", PYTORCH_CASES, ids=[os.path.basename(d) for d in PYTORCH_CASES])
def test_pytorch_converted(case_dir):
    original = onnx.load(os.path.join(case_dir, "model.onnx"))
    result = rewrite(original, conv="all")
    model = result.model
    assert not standard_convs(model), result.report.to_text()
    assert len(ours(model)) == len(standard_convs(original))
    sess = make_session(model)
    ref_sess = ort.InferenceSession(original.SerializeToString(), providers=["CPUExecutionProvider"])
    init = {i.name for i in original.graph.initializer}
    graph_inputs = [i for i in original.graph.input if i.name not in init]
    data_sets = load_data_sets(case_dir)
    assert data_sets
    for inputs, outputs in data_sets:
        feeds = {i.name: v for i, v in zip(graph_inputs, inputs)}
        got = sess.run(None, feeds)
        ref = ref_sess.run(None, feeds)
        for g, r, want in zip(got, ref, outputs):
            assert g.shape == want.shape and g.dtype == want.dtype
            np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-5)  # PyTorch's float32 result
            np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-5)     # ONNX Runtime's


# ---------------------------------------------------------------------------
# 3. light models

LIGHT = ["light_bvlc_alexnet", "light_resnet50", "light_shufflenet", "light_squeezenet", "light_densenet121",
         "light_inception_v1", "light_inception_v2"]
LIGHT_SLOW = ["light_vgg19", "light_zfnet512"]


def reweight(model: onnx.ModelProto, seed: int = 0) -> onnx.ModelProto:
    """Replace the ConstantOfShape weight fills by seeded random initializers, by role."""
    rng = np.random.default_rng(seed)
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    consts = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    consumers = {}
    for n in g.node:
        for idx, name in enumerate(n.input):
            consumers.setdefault(name, []).append((n, idx))
    keep, new_inits = [], []
    for n in g.node:
        if n.op_type != "ConstantOfShape" or n.input[0] not in consts:
            keep.append(n)
            continue
        shape = tuple(int(v) for v in consts[n.input[0]])
        roles = consumers.get(n.output[0], [])
        if not roles:
            keep.append(n)
            continue
        user, idx = roles[0]
        op = user.op_type
        if op in ("Conv", "ConvTranspose") and idx == 1:
            fan_in = int(np.prod(shape[1:]))
            arr = rng.standard_normal(shape) * np.sqrt(2.0 / max(1, fan_in))
        elif op == "Gemm" and idx == 1:
            arr = rng.standard_normal(shape) / np.sqrt(max(1, shape[-1]))
        elif op == "BatchNormalization" and idx == 4:  # variance
            arr = rng.uniform(0.5, 1.5, shape)
        elif (op == "BatchNormalization" and idx == 1) or op == "Mul":  # scales
            arr = 1.0 + 0.1 * rng.standard_normal(shape)
        else:  # biases, means, adds
            arr = 0.1 * rng.standard_normal(shape)
        new_inits.append(numpy_helper.from_array(arr.astype(np.float32), name=n.output[0]))
    del g.node[:]
    g.node.extend(keep)
    g.initializer.extend(new_inits)
    if m.ir_version < 4:  # IR 3: every initializer is also a graph input
        g.input.extend(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in new_inits)
    # the logits before the softmax as an extra output
    inferred = {v.name: v for v in onnx.shape_inference.infer_shapes(m).graph.value_info}
    for n in g.node:
        if n.op_type == "Softmax" and n.input[0] in inferred:
            g.output.append(inferred[n.input[0]])
    return m


def light_models():
    names = LIGHT + (LIGHT_SLOW if SLOW else [])
    return [n for n in names if os.path.exists(os.path.join(DATA, "light", n + ".onnx"))]


LIGHT_MODELS = light_models()


def test_light_models_found():
    if not os.path.isdir(os.path.join(DATA, "light")):
        pytest.skip(f"no light model data under {DATA}")
    assert set(LIGHT) <= set(LIGHT_MODELS), LIGHT_MODELS


@pytest.fixture(scope="module")
def light_cache():
    return {}


def light_case(name, cache):
    if name not in cache:
        original = reweight(onnx.load(os.path.join(DATA, "light", name + ".onnx")))
        init = {i.name for i in original.graph.initializer}
        rng = np.random.default_rng(1)
        feeds = {}
        for i in original.graph.input:
            if i.name in init:
                continue
            shape = [d.dim_value for d in i.type.tensor_type.shape.dim]
            feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # the graph as written
        ref = ort.InferenceSession(original.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(
            None, feeds)
        cache[name] = (original, feeds, ref)
    return cache[name]


def assert_matches(got, ref):
    for g, r in zip(got, ref):
        assert g.shape == r.shape
        scale = max(1e-3, float(np.abs(r).max()))
        err = float(np.abs(g.astype(np.float64) - r).max())
        assert err <= 2e-4 * scale, f"max |diff| {err:.3e} vs scale {scale:.3e}"


@pytest.mark.parametrize("name", LIGHT_MODELS)
def test_light_model_all(name, light_cache):
    original, feeds, ref = light_case(name, light_cache)
    assert float(np.std(ref[-1])) > 1e-3, "re-weighting failed: constant logits"
    result = rewrite(original, conv="all")
    n_convs = len(standard_convs(original))
    assert n_convs > 0
    assert not standard_convs(result.model), result.report.to_text()
    assert result.report.counts() == {"Conv": n_convs}
    folded = sum(1 for r in result.report.rewrites if r.details.get("activation"))
    relus_after_conv = sum(1 for r in result.report.rewrites if "Relu" in r.replaced_ops)
    assert folded == relus_after_conv
    assert_matches(make_session(result.model).run(None, feeds), ref)


@pytest.mark.parametrize("name", LIGHT_MODELS)
def test_light_model_fallback(name, light_cache):
    original, feeds, ref = light_case(name, light_cache)
    result = rewrite(original, conv="fallback")
    report = result.report
    n_convs = len(standard_convs(original))
    # every conv is decided once: rewritten (with the rule that selected it) or refused with the policy reason
    assert len(report.rewrites) + len(report.refusals) == n_convs, report.to_text()
    assert all(r.details.get("fallback") for r in report.rewrites)
    assert all(r.reason.startswith("policy fallback: cuDNN runs it well") for r in report.refusals)
    if name == "light_shufflenet":  # grouped 1x1 convs with odd channels per group
        assert any("per group" in r.details["fallback"] for r in report.rewrites)
    if report.rewrites:
        assert_matches(make_session(result.model).run(None, feeds), ref)
