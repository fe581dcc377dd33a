"""trt_fastops Conv / ConvTranspose on ONNX Runtime's CUDA execution provider (the conv
launcher: plan cache, cuDNN through cudnn-frontend, trt_fastops' own kernels), against
the float64 reference of models/reference.py (conv_reference, as tests/test_conv_ort_cpu.py).

- A seeded random sweep (the CPU test's generator, other seeds): 1-D/2-D/3-D, strides,
  dilations, asymmetric pads, every auto_pad, groups (depthwise, channel multiplier), bias or
  not, fused activations, ConvTranspose output_padding / output_shape; float32 / float16 /
  bfloat16. Each configuration runs twice in one session: the automatic path (cuDNN where it
  accepts) and with TRT_FASTOPS_CONV_FORCE_FALLBACK=1 (trt_fastops' kernels). The launcher
  reads that variable on every conv_prepare and it is part of the plan-cache key
  (conv_launch.h), so it is switched in-process with monkeypatch. Both results are compared
  with the reference and with each other.
- ConvTranspose padding: ONNX Runtime's CUDA EP sends every node of op type ConvTranspose
  with asymmetric `pads` or auto_pad SAME_* to the CPU EP, domain regardless
  (ConvTransposeNeedFallbackToCPU). The rewriter writes such padding as symmetric `pads` +
  our `output_crop` (trt_fastops.rewriter.conv.ort_cuda_padding); conv_model writes every
  ConvTranspose node in that form, so asymmetric and SAME_* cases run on the CUDA EP with
  CPU fallback disabled, against the reference of the original ONNX attributes. One test
  keeps the ONNX form and checks that ORT still refuses it on CUDA (the reason for the
  rewrite), one goes through rewrite() from standard ONNX ConvTranspose nodes.
- Graphs carry the op's own dtype (bfloat16 too: no Cast nodes); every input, weights
  included, is a device OrtValue bound through IO binding, and Y is bound to a NaN-filled
  device buffer, so an element the op does not write fails. bfloat16 buffers are filled
  from their bit patterns and read back through a one-node Cast session.
- Weights are runtime graph inputs (a third of the sweep uses initializers), and change
  between runs of one session (also under CUDA graphs, in place).
- CUDA graphs: enable_cuda_graph=1, 8 runs (warm-up plans, capture, replays) with new inputs
  and weights copied in place and Y re-poisoned each run, on both paths.
- Plan cache (through trt_fastops._C, which shares libtrt_fastops_kernels.so with the ORT
  library in this process): a hit builds nothing across runs and sessions, forced fallback
  plans its own key; concurrent sessions from 8 threads; eviction with
  TRT_FASTOPS_CONV_CACHE_SIZE=2 (read once per process: run in a child process).

Error bounds: those of tests/gpu/test_conv_cuda.py (scripts/_conv_torch.py: relative to the
convolution of |x|, |w|, |b|). To keep the run short (an autouse fixture, per test, unless the
caller set them): autotuning off (first supported cuDNN plan), as in test_conv_cuda.py, and
no cuDNN engines compiled at run time (NVRTC), except in the CUDA-graph and cache-hit tests.

Needs onnxruntime-gpu (fixture ort_cuda). TRT_FASTOPS_ORT_TEST_EP=CPUExecutionProvider runs
the same tests on the CPU EP (device buffers become host buffers, no CUDA graph; the cache
counters are not asserted, since the CPU op does not use the launcher), to check the test
itself without a GPU:
    TRT_FASTOPS_ORT_TEST_EP=CPUExecutionProvider python -m pytest --noconftest tests/gpu/test_conv_ort_cuda.py
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.append(str(REPO))  # appended: an installed trt_fastops wins over the source tree

# EP choice, sessions and device runs shared by the ORT EP tests.
_spec = importlib.util.spec_from_file_location("trt_fastops_test_ort_ep_common", Path(__file__).with_name("ort_ep_common.py"))
common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(common)
EP, ON_CUDA, DEVICE = common.EP, common.ON_CUDA, common.DEVICE

FORCE = "TRT_FASTOPS_CONV_FORCE_FALLBACK"
RUNTIME_COMPILE = "TRT_FASTOPS_CONV_RUNTIME_COMPILE"

# Shared helpers (random configurations, exact-in-dtype inputs) live in the CPU test module.
_spec = importlib.util.spec_from_file_location("trt_fastops_test_conv_ort_cpu",
                                               REPO / "tests" / "test_conv_ort_cpu.py")
cpu = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cpu)

from models.reference import conv_reference  # noqa: E402
from scripts._conv_torch import ACC, ATOL, MARGIN, RTOL, point_at_cudnn  # noqa: E402
from trt_fastops import DOMAIN  # noqa: E402
from trt_fastops.ort import make_session  # noqa: E402
from trt_fastops.rewriter.conv import ort_cuda_padding  # noqa: E402

point_at_cudnn()  # before the first plan: name the nvidia-cudnn wheel's libcudnn when importable

try:
    from trt_fastops import _C
except ImportError:  # pragma: no cover - depends on the build
    _C = None

DTYPES = ["float32", "float16", "bfloat16"]
# Typed device buffers, shared with the other ops' EP tests (ort_ep_common).
NP, ELEM, BF16_NAN = common.NP, common.ELEM, common.BF16_NAN
bf16_bits, tensor_proto = common.bf16_bits, common.tensor_proto
new_value, fill, device_tensor = common.new_value, common.fill, common.device_tensor
poison, poisoned, to_host = common.poison, common.poisoned, common.to_host


@pytest.fixture(scope="module")
def ort_ep(request):
    """onnxruntime with the EP under test (CUDA unless overridden)."""
    if ON_CUDA:
        return request.getfixturevalue("ort_cuda")
    return pytest.importorskip("onnxruntime")


_USER_RUNTIME_COMPILE = os.environ.get(RUNTIME_COMPILE)


@pytest.fixture(autouse=True)
def _planning_env(monkeypatch):
    """Per test (restored after it, so other test files keep their settings), unless the caller
    set them: cuDNN's first supported plan untimed, and no engines that compile kernels at run
    time (NVRTC: about a second per signature; the sweep has ~130). The CUDA-graph and cache-hit
    tests allow those engines again (a handful of signatures). Both are read at planning time."""
    if "TRT_FASTOPS_CONV_AUTOTUNE" not in os.environ:
        monkeypatch.setenv("TRT_FASTOPS_CONV_AUTOTUNE", "0")
    if _USER_RUNTIME_COMPILE is None:
        monkeypatch.setenv(RUNTIME_COMPILE, "0")
    monkeypatch.delenv(FORCE, raising=False)


def allow_runtime_compilation(monkeypatch):
    """The default user path for this test (cuDNN may pick an engine compiled at run time),
    unless the caller set the variable for the whole run."""
    if _USER_RUNTIME_COMPILE is None:
        monkeypatch.delenv(RUNTIME_COMPILE, raising=False)


def cache_stats():
    """The conv plan cache counters (CUDA only: the CPU op never plans)."""
    if _C is None or not hasattr(_C, "conv_cache_stats"):
        pytest.skip("trt_fastops._C has no conv bindings (conv_cache_stats)")
    return _C.conv_cache_stats()


# ---------------------------------------------------------------------------
# models, device buffers, runs


def ort_cuda_form(op, shapes, attrs):
    """The node attributes as the rewriter writes them for ONNX attributes `attrs`: ConvTranspose
    padding as symmetric pads + output_crop (ort_cuda_padding), everything else unchanged."""
    x, w = shapes.get("X"), shapes.get("W")
    if op != "ConvTranspose" or x is None:
        return dict(attrs)
    node_attrs, _ = ort_cuda_padding(dict(attrs), list(x), None if w is None else list(w))
    return node_attrs


def conv_model(op, dtype, shapes, attrs, inits=None, *, onnx_form=False):
    """One trt_fastops conv node, all tensors in `dtype`. shapes: slot -> graph shape (None:
    unknown rank; str: symbolic); inits: slot -> array stored as an initializer instead.
    attrs: ONNX attributes; ConvTranspose padding is written in the form ORT's CUDA EP keeps
    (ort_cuda_form) unless onnx_form."""
    inits = inits or {}
    if not onnx_form:
        attrs = ort_cuda_form(op, shapes, attrs)
    graph_in, initializers, names = [], [], []
    for slot in ("X", "W", "B"):
        if slot not in shapes:
            continue
        names.append(slot)
        if slot in inits:
            initializers.append(tensor_proto(slot, inits[slot], dtype))
        else:
            graph_in.append(helper.make_tensor_value_info(slot, ELEM[dtype], shapes[slot]))
    node = helper.make_node(op, names, ["Y"], domain=DOMAIN, name="conv", **attrs)
    y = helper.make_tensor_value_info("Y", ELEM[dtype], None)
    graph = helper.make_graph([node], f"{op}_{dtype}", graph_in, [y], initializer=initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)],
                             ir_version=cpu.IR_VERSION)


def ort_cuda_drops(model) -> bool:
    """Whether ONNX Runtime's CUDA EP would send the (single) node to the CPU EP: op type
    ConvTranspose, whatever the domain, with asymmetric pads or auto_pad SAME_* (its
    ConvTransposeNeedFallbackToCPU reads only those two attributes; seen with onnxruntime-gpu
    1.31.1 on the H100)."""
    node = model.graph.node[0]
    if node.op_type != "ConvTranspose":
        return False
    a = {x.name: helper.get_attribute_value(x) for x in node.attribute}
    auto = a.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    pads = list(a.get("pads", []))
    r = len(pads) // 2
    return auto in ("SAME_UPPER", "SAME_LOWER") or any(pads[i] != pads[i + r] for i in range(r))


def session(ort, model, *, cuda_graph=False):
    # conv_model writes ConvTranspose padding in the form the CUDA EP keeps; the session
    # disables CPU fallback on CUDA, so a node ORT moved to the CPU EP fails here.
    assert not ort_cuda_drops(model), [(a.name, helper.get_attribute_value(a)) for a in model.graph.node[0].attribute]
    return common.session(ort, model, cuda_graph=cuda_graph)


def run_bound(ort, sess, feeds, dtype, y_shape):
    """One run: every graph input bound as a DEVICE OrtValue, Y bound to a NaN-filled DEVICE
    buffer that ORT must write in place. Returns Y as float64."""
    io = sess.io_binding()
    for name, arr in feeds.items():
        io.bind_ortvalue_input(name, device_tensor(ort, arr, dtype))
    y = poisoned(ort, y_shape, dtype)
    io.bind_ortvalue_output("Y", y)
    sess.run_with_iobinding(io)
    io.synchronize_outputs()
    assert io.get_outputs()[0].data_ptr() == y.data_ptr(), "ORT did not write into the bound output"
    return to_host(ort, y, dtype)


def references(op, feeds, attrs):
    """(float64 reference, the same convolution of |x|, |w|, |b| without activation: the error scale)."""
    kw = {k: v for k, v in attrs.items() if k not in ("kernel_shape", "activation")}
    t = op == "ConvTranspose"
    x, w, b = feeds["X"], feeds["W"], feeds.get("B")
    ref = conv_reference(x, w, b, transpose=t, activation=attrs.get("activation", ""), **kw)
    ref_abs = conv_reference(np.abs(x), np.abs(w), None if b is None else np.abs(b), transpose=t, **kw)
    return ref, ref_abs


def bound(ref, ref_abs, dtype):
    return MARGIN * (RTOL[dtype] * np.abs(ref) + (ACC[dtype] + RTOL[dtype]) * ref_abs) + ATOL[dtype] + 1e-30


def assert_close(got, ref, ref_abs, dtype, what):
    assert got.shape == ref.shape, (what, got.shape, ref.shape)
    nan = np.isnan(got)
    assert not nan.any(), f"{what}: {int(nan.sum())} of {got.size} elements unwritten (NaN)"
    ratio = float((np.abs(got - ref) / bound(ref, ref_abs, dtype)).max())
    assert ratio <= 1.0, f"{what}: error {ratio:.3g} x the bound"


def run_both_paths(ort, sess, op, dtype, feeds, attrs, monkeypatch, what=""):
    """Runs one session on the automatic path and with the fallback forced; both against the
    reference and against each other. Returns (auto, forced)."""
    ref, ref_abs = references(op, feeds, attrs)
    graph_feeds = {k: v for k, v in feeds.items() if k in {i.name for i in sess.get_inputs()}}
    monkeypatch.delenv(FORCE, raising=False)
    auto = run_bound(ort, sess, graph_feeds, dtype, ref.shape)
    assert_close(auto, ref, ref_abs, dtype, f"{op} {dtype} {what} auto path {attrs}")
    monkeypatch.setenv(FORCE, "1")
    try:
        forced = run_bound(ort, sess, graph_feeds, dtype, ref.shape)
    finally:
        monkeypatch.delenv(FORCE, raising=False)
    assert_close(forced, ref, ref_abs, dtype, f"{op} {dtype} {what} forced fallback {attrs}")
    ratio = float((np.abs(auto - forced) / (2 * bound(ref, ref_abs, dtype))).max())
    assert ratio <= 1.0, f"{op} {dtype} {what}: auto and forced fallback differ by {ratio:.3g} x twice the bound"
    return auto, forced


def make_feeds(rng, shapes, dtype):
    return {k: cpu.rand(rng, v, dtype, scale=1.0 if k == "X" else 0.5) for k, v in shapes.items()}


# ---------------------------------------------------------------------------
# the sweep

SWEEP = cpu.sweep("Conv", 50, 101) + cpu.sweep("ConvTranspose", 34, 102)


@pytest.mark.parametrize("case", SWEEP, ids=[c[0] for c in SWEEP])
def test_cuda_sweep_both_paths(ort_ep, case, monkeypatch):
    name, dtype, shapes, attrs, seed = case
    op = name.split("-")[0]
    rng = np.random.default_rng(seed)
    feeds = make_feeds(rng, shapes, dtype)
    inits = {k: feeds[k] for k in ("W", "B") if k in feeds} if seed % 3 == 0 else {}
    sess = session(ort_ep, conv_model(op, dtype, shapes, attrs, inits))
    run_both_paths(ort_ep, sess, op, dtype, feeds, attrs, monkeypatch)


def test_sweep_covers_the_space():
    """This file's sweep reaches every feature it claims to cover."""
    seen = set()
    for name, dtype, shapes, attrs, seed in SWEEP:
        op = name.split("-")[0]
        seen.update({(op, len(shapes["X"]) - 2), dtype, attrs.get("auto_pad", "NOTSET"),
                     "act:" + attrs.get("activation", "")})
        c_in, g = shapes["X"][1], attrs["group"]
        c_out = shapes["W"][0] if op == "Conv" else shapes["W"][1] * g
        if g > 1 and c_in == g:
            seen.add("depthwise" if c_out == g else "multiplier")
        seen.add("bias" if "B" in shapes else "no-bias")
        seen.add("initializers" if seed % 3 == 0 else "runtime-weights")
        p = attrs.get("pads")
        if p and p[: len(p) // 2] != p[len(p) // 2:]:
            seen.add("asymmetric")
        if any(v > 1 for v in attrs.get("strides", [])):
            seen.add("strides")
        if any(v > 1 for v in attrs.get("dilations", [])):
            seen.add("dilations")
        if any(attrs.get("output_padding", [])):
            seen.add("output_padding")
        if "output_shape" in attrs:
            seen.add("output_shape")
    want = {(op, sp) for op in ("Conv", "ConvTranspose") for sp in (1, 2, 3)} | set(DTYPES) | {
        "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID", *("act:" + a for a in cpu.ACTIVATIONS), "depthwise",
        "multiplier", "bias", "no-bias", "initializers", "runtime-weights", "asymmetric", "strides", "dilations",
        "output_padding", "output_shape"}
    assert want <= seen, sorted(map(str, want - seen))


# Larger, network-like layers (tensor-core tiles, cuDNN's usual territory): (op, x, w, attrs).
LAYERS = [
    ("Conv", (2, 64, 14, 14), (64, 64, 3, 3), {"pads": [1, 1, 1, 1], "activation": "Relu"}),
    ("Conv", (2, 3, 32, 30), (32, 3, 7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]}),
    ("Conv", (2, 128, 9, 9), (64, 128, 1, 1), {}),
    ("Conv", (2, 96, 12, 12), (96, 24, 3, 3), {"group": 4, "pads": [1, 1, 1, 1], "activation": "Silu"}),
    ("Conv", (2, 32, 14, 13), (32, 1, 7, 7), {"group": 32, "pads": [3, 3, 3, 3]}),
    ("Conv", (1, 16, 20, 19), (24, 16, 3, 5), {"strides": [2, 3], "dilations": [3, 2], "pads": [0, 4, 5, 1],
                                               "activation": "Gelu"}),
    ("Conv", (3, 12, 50), (20, 12, 5), {"strides": [2], "dilations": [3], "pads": [4, 1]}),
    ("Conv", (2, 8, 6, 7, 8), (16, 8, 3, 3, 3), {"pads": [1, 1, 1, 1, 1, 1], "activation": "Relu"}),
    ("ConvTranspose", (2, 64, 7, 7), (64, 32, 4, 4), {"strides": [2, 2], "pads": [1, 1, 1, 1],
                                                      "activation": "Relu"}),
    ("ConvTranspose", (2, 32, 5, 6), (32, 12, 3, 3), {"group": 4, "strides": [2, 3], "dilations": [2, 2],
                                                      "pads": [1, 0, 0, 2], "output_padding": [1, 2]}),
    ("ConvTranspose", (1, 8, 4, 5, 3), (8, 12, 3, 2, 3), {"strides": [2, 1, 2], "output_shape": [8, 6, 6]}),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layer", LAYERS, ids=[f"{op}{'x'.join(map(str, w))}-{i}" for i, (op, _, w, _) in
                                               enumerate(LAYERS)])
def test_cuda_layers_both_paths(ort_ep, layer, dtype, monkeypatch):
    op, xs, ws, attrs = layer
    rng = np.random.default_rng(len(xs) * 1000 + sum(ws) + DTYPES.index(dtype))
    c_out = ws[0] if op == "Conv" else ws[1] * attrs.get("group", 1)
    fan_in = float(np.prod(ws[1:]) if op == "Conv" else ws[0] // attrs.get("group", 1) * np.prod(ws[2:]))
    feeds = {"X": cpu.rand(rng, xs, dtype), "W": cpu.rand(rng, ws, dtype, 1.0 / np.sqrt(fan_in)),
             "B": cpu.rand(rng, (c_out,), dtype, 0.5)}
    sess = session(ort_ep, conv_model(op, dtype, {k: list(v.shape) for k, v in feeds.items()}, attrs))
    run_both_paths(ort_ep, sess, op, dtype, feeds, attrs, monkeypatch)


# ---------------------------------------------------------------------------
# ConvTranspose padding that ONNX Runtime's CUDA EP would send to the CPU EP

# (x, w, ONNX attributes): explicit asymmetric pads, SAME_UPPER / SAME_LOWER (with dilation,
# output_padding), SAME_UPPER with output_shape (odd total; larger than the natural size in one
# dim, so the excess goes to output_padding), 1-D and 3-D, grouped.
ASYM_TRANSPOSE = [
    ((2, 16, 7, 6), (16, 8, 3, 3), {"strides": [2, 2], "pads": [0, 1, 2, 0]}),
    ((2, 16, 7, 6), (16, 8, 4, 4), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 12, 5, 9), (12, 4, 3, 3), {"strides": [2, 1], "dilations": [1, 2], "auto_pad": "SAME_LOWER", "group": 3}),
    ((2, 8, 5, 5), (8, 6, 3, 3), {"strides": [2, 2], "output_padding": [1, 0], "auto_pad": "SAME_LOWER"}),
    ((2, 8, 5, 5), (8, 6, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER", "output_shape": [9, 12]}),
    ((3, 8, 11), (8, 16, 5), {"strides": [3], "pads": [3, 0], "output_padding": [2]}),
    ((1, 8, 3, 4, 5), (8, 8, 3, 3, 3), {"strides": [2, 2, 1], "auto_pad": "SAME_UPPER"}),
]


def _asym_ids():
    return [f"{len(x) - 2}d-{'-'.join(k for k in a if k not in ('strides',))}-{i}"
            for i, (x, _, a) in enumerate(ASYM_TRANSPOSE)]


def test_asym_transpose_cases_need_the_rewrite():
    """Every ASYM_TRANSPOSE case would be sent to the CPU EP in its ONNX form, and none is in
    the form conv_model writes (without a GPU: only the attribute rewriting)."""
    for x, w, attrs in ASYM_TRANSPOSE:
        shapes = {"X": list(x), "W": list(w)}
        assert ort_cuda_drops(conv_model("ConvTranspose", "float32", shapes, attrs, onnx_form=True)), attrs
        assert not ort_cuda_drops(conv_model("ConvTranspose", "float32", shapes, attrs)), attrs
    cases = [c for c in SWEEP + [("ConvTranspose-layer", "float32", {"X": list(x), "W": list(w)}, a, 0)
                                 for op, x, w, a in LAYERS if op == "ConvTranspose"]
             if c[0].startswith("ConvTranspose")]
    raw = [c for c in cases if ort_cuda_drops(conv_model("ConvTranspose", c[1], c[2], c[3], onnx_form=True))]
    assert len(raw) >= 5, "the sweep should hold ConvTranspose cases that need the rewrite"
    for _, dtype, shapes, attrs, _ in raw:
        assert not ort_cuda_drops(conv_model("ConvTranspose", dtype, shapes, attrs)), attrs


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", ASYM_TRANSPOSE, ids=_asym_ids())
def test_cuda_asymmetric_transpose_runs_on_cuda(ort_ep, case, dtype, monkeypatch):
    """Asymmetric / SAME_* ConvTranspose written as symmetric pads + output_crop: the session
    is created with CPU fallback disabled (the node stays on the CUDA EP) and both paths match
    the reference of the ONNX attributes. On CUDA, the same node in its ONNX form is refused."""
    xs, ws, attrs = case
    rng = np.random.default_rng(sum(xs) * 7 + sum(ws) + len(attrs))
    group = attrs.get("group", 1)
    fan_in = float(ws[0] // group * np.prod(ws[2:]))
    feeds = {"X": cpu.rand(rng, xs, dtype), "W": cpu.rand(rng, ws, dtype, 1.0 / np.sqrt(fan_in)),
             "B": cpu.rand(rng, (ws[1] * group,), dtype, 0.5)}
    shapes = {k: list(v.shape) for k, v in feeds.items()}
    if ON_CUDA:
        so = ort_ep.SessionOptions()
        so.log_severity_level = 3
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        with pytest.raises(Exception, match="fallback to CPU EP has been explicitly disabled"):
            make_session(conv_model("ConvTranspose", dtype, shapes, attrs, onnx_form=True), (EP,),
                         session_options=so)
    sess = session(ort_ep, conv_model("ConvTranspose", dtype, shapes, attrs))
    run_both_paths(ort_ep, sess, "ConvTranspose", dtype, feeds, attrs, monkeypatch, what="ORT-CUDA form")


def onnx_transpose_model(dtype, xs, ws, attrs, relu):
    """Standard ONNX ConvTranspose (+ Relu) with X, W, B as graph inputs and output Y."""
    elem = ELEM[dtype]
    c_out = ws[1] * attrs.get("group", 1)
    nodes = [helper.make_node("ConvTranspose", ["X", "W", "B"], ["T" if relu else "Y"], name="up", **attrs)]
    if relu:
        nodes.append(helper.make_node("Relu", ["T"], ["Y"], name="relu"))
    graph = helper.make_graph(nodes, "up", [helper.make_tensor_value_info("X", elem, list(xs)),
                                            helper.make_tensor_value_info("W", elem, list(ws)),
                                            helper.make_tensor_value_info("B", elem, [c_out])],
                              [helper.make_tensor_value_info("Y", elem, [None] * len(xs))])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=cpu.IR_VERSION)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("case", ASYM_TRANSPOSE, ids=_asym_ids())
def test_cuda_rewritten_asymmetric_transpose(ort_ep, case, dtype, monkeypatch):
    """rewrite(conv="all") of a standard ONNX ConvTranspose (+ Relu) that needs asymmetric
    padding: our node runs on the CUDA EP (CPU fallback disabled) and matches the reference."""
    from trt_fastops.rewriter import rewrite

    xs, ws, attrs = case
    relu = len(xs) != 4  # the 1-D / 3-D cases fold a Relu as well
    result = rewrite(onnx_transpose_model(dtype, xs, ws, attrs, relu), conv="all")
    (node,) = [n for n in result.model.graph.node if n.domain == DOMAIN]
    assert node.op_type == "ConvTranspose" and len(result.model.graph.node) == 1
    assert not ort_cuda_drops(result.model)
    (rec,) = result.report.rewrites
    assert "output_crop" in rec.details.get("padding", "") or "pads" in rec.details.get("padding", "")
    rng = np.random.default_rng(sum(xs) + 3 * sum(ws))
    group = attrs.get("group", 1)
    feeds = {"X": cpu.rand(rng, xs, dtype), "W": cpu.rand(rng, ws, dtype, 1.0 / np.sqrt(ws[0] // group * np.prod(ws[2:]))),
             "B": cpu.rand(rng, (ws[1] * group,), dtype, 0.5)}
    sess = session(ort_ep, result.model)
    ref_attrs = {**attrs, **({"activation": "Relu"} if relu else {})}
    run_both_paths(ort_ep, sess, "ConvTranspose", dtype, feeds, ref_attrs, monkeypatch, what="rewritten")


# ---------------------------------------------------------------------------
# weights as runtime inputs, dynamic shapes


@pytest.mark.parametrize("op", ["Conv", "ConvTranspose"])
def test_cuda_runtime_weights_change_between_runs(ort_ep, op, monkeypatch):
    """W and B are graph inputs; new values each run of one session (same shapes, so the
    cached plan is reused): a path that kept packed weights from an earlier run fails."""
    dtype = "float16"
    xs, ws = ((2, 24, 11, 11), (48, 6, 3, 3)) if op == "Conv" else ((2, 24, 6, 6), (24, 12, 3, 3))
    attrs = {"group": 4, "strides": [2, 2], "pads": [1, 0, 1, 1], "activation": "Relu"}
    c_out = ws[0] if op == "Conv" else ws[1] * 4
    rng = np.random.default_rng(21)
    sess = session(ort_ep, conv_model(op, dtype, {"X": list(xs), "W": list(ws), "B": [c_out]}, attrs))
    x = cpu.rand(rng, xs, dtype)
    for it in range(3):
        feeds = {"X": x, "W": cpu.rand(rng, ws, dtype, 0.3), "B": cpu.rand(rng, (c_out,), dtype, 0.5)}
        run_both_paths(ort_ep, sess, op, dtype, feeds, attrs, monkeypatch, what=f"weights #{it}")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_cuda_dynamic_shapes_one_session(ort_ep, dtype, monkeypatch):
    """Symbolic N/H/W: every shape is its own signature, planned on first use."""
    attrs = {"strides": [2, 1], "dilations": [1, 2], "pads": [1, 2, 0, 1], "activation": "Silu"}
    sess = session(ort_ep, conv_model("Conv", dtype, {"X": ["n", 16, "h", "w"], "W": [32, 16, 3, 3], "B": [32]},
                                      attrs))
    rng = np.random.default_rng(22)
    for n, h, w in [(1, 5, 6), (3, 17, 9), (2, 32, 31), (1, 5, 6)]:
        feeds = {"X": cpu.rand(rng, (n, 16, h, w), dtype), "W": cpu.rand(rng, (32, 16, 3, 3), dtype, 0.1),
                 "B": cpu.rand(rng, (32,), dtype, 0.5)}
        run_both_paths(ort_ep, sess, "Conv", dtype, feeds, attrs, monkeypatch, what=f"n={n} h={h} w={w}")


# ---------------------------------------------------------------------------
# CUDA graphs

GRAPH_CASES = {
    "Conv": ((2, 32, 12, 12), (48, 8, 3, 3), {"group": 4, "pads": [1, 1, 1, 1], "activation": "Relu"}),
    "ConvTranspose": ((2, 32, 6, 7), (32, 16, 4, 4), {"strides": [2, 2], "pads": [1, 1, 1, 1],
                                                      "activation": "Silu"}),
}


@pytest.mark.parametrize("path", ["auto", "forced_fallback"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", list(GRAPH_CASES))
def test_cuda_graph_replays(ort_ep, op, dtype, path, monkeypatch):
    """enable_cuda_graph=1: X, W, B and Y bound to DEVICE OrtValues once; every run copies new
    inputs and weights in place and re-poisons Y, so a replay that ignored either is caught.
    ORT captures after its warm-up run(s) (where the conv is planned: planning is refused under
    capture); 8 runs cover warm-up, capture and replays. The path is fixed for the whole test
    (the forced-fallback variable is part of the cache key, so it must not change before capture)."""
    allow_runtime_compilation(monkeypatch)
    if path == "forced_fallback":
        monkeypatch.setenv(FORCE, "1")
    xs, ws, attrs = GRAPH_CASES[op]
    c_out = ws[0] if op == "Conv" else ws[1] * attrs.get("group", 1)
    shapes = {"X": list(xs), "W": list(ws), "B": [c_out]}
    sess = session(ort_ep, conv_model(op, dtype, shapes, attrs), cuda_graph=True)
    rng = np.random.default_rng(30 + DTYPES.index(dtype) + 3 * len(op))

    def new_feeds():
        return {"X": cpu.rand(rng, xs, dtype), "W": cpu.rand(rng, ws, dtype, 0.2), "B": cpu.rand(rng, (c_out,), dtype)}

    feeds = new_feeds()
    ref, _ = references(op, feeds, attrs)
    in_vals = {k: device_tensor(ort_ep, v, dtype) for k, v in feeds.items()}
    y = poisoned(ort_ep, ref.shape, dtype)
    io = sess.io_binding()
    for k, v in in_vals.items():
        io.bind_ortvalue_input(k, v)
    io.bind_ortvalue_output("Y", y)
    for it in range(8):
        if it > 0:
            feeds = new_feeds()
            for k, v in feeds.items():
                fill(in_vals[k], v, dtype)
            poison(y, ref.shape, dtype)
        sess.run_with_iobinding(io)
        io.synchronize_outputs()
        ref, ref_abs = references(op, feeds, attrs)
        assert_close(to_host(ort_ep, y, dtype), ref, ref_abs, dtype, f"{op} {dtype} {path} run {it}")


# ---------------------------------------------------------------------------
# the plan cache


def test_cuda_cache_hit_and_forced_fallback_key(ort_ep, monkeypatch):
    """A second run (and a second session) of one signature plans nothing; the forced
    fallback is planned under its own key, on trt_fastops' kernels, and does not displace
    the cuDNN plan."""
    if not ON_CUDA:
        pytest.skip("the plan cache serves the CUDA EP only (the CPU op never plans)")
    allow_runtime_compilation(monkeypatch)
    op, xs, ws, attrs = LAYERS[0]  # ResNet 3x3, float16: cuDNN takes it (test_conv_cuda.py's resnet3x3)
    rng = np.random.default_rng(40)
    feeds = {"X": cpu.rand(rng, xs, "float16"), "W": cpu.rand(rng, ws, "float16", 0.05),
             "B": cpu.rand(rng, (ws[0],), "float16")}
    ref, ref_abs = references(op, feeds, attrs)
    model = conv_model(op, "float16", {k: list(v.shape) for k, v in feeds.items()}, attrs)
    sess = session(ort_ep, model)  # first: the CUDA EP loads libcudnn, which the launcher then finds
    s = cache_stats()
    old_capacity = s["capacity"]
    _C.conv_cache_set_capacity(max(old_capacity, 64))
    try:
        _C.conv_cache_clear()
        _C.conv_cache_reset_stats()

        def run(what, s_):
            assert_close(run_bound(ort_ep, s_, feeds, "float16", ref.shape), ref, ref_abs, "float16", what)
            return cache_stats()

        monkeypatch.delenv(FORCE, raising=False)
        s1 = run("auto, first run", sess)
        assert s1["cudnn_available"], f"cuDNN did not load: {s1['cudnn_status']}"
        assert (s1["misses"], s1["size"], s1["cudnn_plans"], s1["fallback_plans"]) == (1, 1, 1, 0), s1
        s2 = run("auto, second run", sess)
        assert s2["misses"] == 1 and s2["hits"] == s1["hits"] + 1 and s2["cudnn_plans"] == 1, s2
        s3 = run("auto, second session", session(ort_ep, model))
        assert s3["misses"] == 1 and s3["hits"] == s2["hits"] + 1, s3
        monkeypatch.setenv(FORCE, "1")
        s4 = run("forced fallback, first run", sess)
        assert (s4["misses"], s4["size"], s4["cudnn_plans"], s4["fallback_plans"]) == (2, 2, 1, 1), s4
        s5 = run("forced fallback, second run", sess)
        assert s5["misses"] == 2 and s5["hits"] == s4["hits"] + 1, s5
        monkeypatch.delenv(FORCE)
        s6 = run("auto again", sess)
        assert s6["misses"] == 2 and s6["hits"] == s5["hits"] + 1 and s6["evictions"] == 0, s6
        assert s6["exec_failures"] == 0 and s6["capture_misses"] == 0, s6
    finally:
        _C.conv_cache_set_capacity(old_capacity)


def test_cuda_concurrent_sessions_from_threads(ort_ep, monkeypatch):
    """8 threads run 32 jobs over 4 models (Conv / ConvTranspose, float16 / bfloat16), two
    sessions each, every job with its own inputs: every result matches the reference, and the
    cache holds exactly one plan per signature (racing misses may both plan, never duplicate)."""
    from concurrent.futures import ThreadPoolExecutor

    specs = [("Conv", "float16", (2, 32, 10, 10), (64, 32, 3, 3), {"pads": [1, 1, 1, 1], "activation": "Relu"}),
             ("Conv", "bfloat16", (2, 24, 9, 8), (24, 1, 5, 5), {"group": 24, "pads": [2, 1, 2, 3]}),
             ("ConvTranspose", "float16", (2, 16, 6, 6), (16, 8, 3, 3), {"strides": [2, 2], "output_padding": [1, 1],
                                                                        "activation": "Gelu"}),
             ("ConvTranspose", "bfloat16", (1, 12, 5, 4, 3), (12, 4, 2, 3, 2), {"group": 3, "strides": [2, 1, 2]})]
    models = []
    for op, dtype, xs, ws, attrs in specs:
        c_out = ws[0] if op == "Conv" else ws[1] * attrs.get("group", 1)
        shapes = {"X": list(xs), "W": list(ws), "B": [c_out]}
        m = conv_model(op, dtype, shapes, attrs)
        models.append((op, dtype, shapes, attrs, [session(ort_ep, m) for _ in range(2)]))
    if ON_CUDA:
        s = cache_stats()
        old_capacity = s["capacity"]
        _C.conv_cache_set_capacity(max(old_capacity, 64))
        _C.conv_cache_clear()
        _C.conv_cache_reset_stats()
    monkeypatch.delenv(FORCE, raising=False)  # the automatic path throughout (the variable is process-wide)

    def work(i):
        op, dtype, shapes, attrs, sessions = models[i % len(models)]
        rng = np.random.default_rng(500 + i)
        feeds = make_feeds(rng, shapes, dtype)
        ref, ref_abs = references(op, feeds, attrs)
        for rep in range(2):
            got = run_bound(ort_ep, sessions[(i // len(models) + rep) % 2], feeds, dtype, ref.shape)
            assert_close(got, ref, ref_abs, dtype, f"job {i} rep {rep}: {op} {dtype}")

    try:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(work, range(32)))
        if ON_CUDA:
            s = cache_stats()
            assert s["size"] == len(models) and s["evictions"] == 0, s
            assert s["misses"] >= len(models) and s["misses"] + s["hits"] == 64, s
            assert s["cudnn_plans"] + s["fallback_plans"] >= len(models), s
    finally:
        if ON_CUDA:
            _C.conv_cache_set_capacity(old_capacity)


# Eviction: TRT_FASTOPS_CONV_CACHE_SIZE is read once per process (the first time the cache is
# used), so the test runs this file as a script in a child process with the variable set.
EVICT_CHILD_FLAG = "--conv-eviction-child"


def _eviction_child():
    import onnxruntime as ort

    configs = [((1, 8, 6, 6), (8 + 8 * i, 8, 3, 3)) for i in range(3)]  # three signatures
    attrs = {"pads": [1, 1, 1, 1]}
    sessions, feeds, refs = [], [], []
    rng = np.random.default_rng(60)
    for xs, ws in configs:
        f = {"X": cpu.rand(rng, xs, "float16"), "W": cpu.rand(rng, ws, "float16", 0.2)}
        feeds.append(f)
        refs.append(references("Conv", f, attrs))
        sessions.append(session(ort, conv_model("Conv", "float16", {k: list(v.shape) for k, v in f.items()}, attrs)))
    report = {"stats": []}
    for i in (0, 1, 2, 0):  # the 4th run finds config 0 evicted (LRU with room for 2)
        ref, ref_abs = refs[i]
        assert_close(run_bound(ort, sessions[i], feeds[i], "float16", ref.shape), ref, ref_abs, "float16",
                     f"eviction child, config {i}")
        report["stats"].append({k: v for k, v in _C.conv_cache_stats().items()
                                if k in ("hits", "misses", "evictions", "size", "capacity")})
    print("CONV_EVICTION_RESULT " + json.dumps(report), flush=True)


def test_cuda_cache_eviction_small_capacity(ort_ep):
    if _C is None or not hasattr(_C, "conv_cache_stats"):
        pytest.skip("trt_fastops._C has no conv bindings (conv_cache_stats)")
    env = dict(os.environ)
    env["TRT_FASTOPS_CONV_CACHE_SIZE"] = "2"
    env["TRT_FASTOPS_ORT_TEST_EP"] = EP
    env.pop(FORCE, None)
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), EVICT_CHILD_FLAG], env=env,
                          capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"eviction child failed (rc {proc.returncode}):\n{out[-6000:]}"
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("CONV_EVICTION_RESULT ")]
    assert line, f"no result line from the eviction child:\n{out[-6000:]}"
    stats = json.loads(line[-1].split(" ", 1)[1])["stats"]
    assert all(s["capacity"] == 2 for s in stats), stats  # the variable reached the child's cache
    if not ON_CUDA:
        pytest.skip("child ran and matched the reference; eviction counters need the CUDA EP (the CPU op never plans)")
    assert [(s["misses"], s["size"], s["evictions"]) for s in stats] == [(1, 1, 0), (2, 2, 0), (3, 2, 1), (4, 2, 2)], \
        stats


if __name__ == "__main__":
    if EVICT_CHILD_FLAG in sys.argv:
        _eviction_child()
    else:
        sys.exit(f"usage: python {Path(__file__).name} {EVICT_CHILD_FLAG} (pytest runs the tests)")
