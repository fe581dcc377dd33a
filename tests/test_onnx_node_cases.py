"""Every ONNX node test case of LayerNormalization and RMSNormalization, run
with the node rewritten to our op (trt_fastops LayerNorm / RMSNorm: same
inputs, outputs and attributes) through ONNX Runtime's CPU provider.

Case source: the node test data shipped in the onnx package
(onnx/backend/test/data/node/test_{layer,rms}_normalization_*: model.onnx,
test_data_set_*/input_*.pb, output_*.pb; or the directory named by
TRT_FASTOPS_ONNX_NODE_DATA) when the installed onnx has it; onnx
wheels since 1.16 or so leave the data out, and then the same cases are
generated from onnx's own case definitions (onnx.backend.test.case.node).

`*_expanded*` cases hold the function-expanded graph instead of the node; they
run our op with the node of their non-expanded sibling (same data). Cases our
op cannot take (an element type we do not support, stash_type != 1) must be
refused with our message; they are listed by test_refused_cases_listed.
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

pytest.importorskip("onnxruntime")

from trt_fastops import DOMAIN  # noqa: E402
from trt_fastops.ort import make_session  # noqa: E402

OPS = {"LayerNormalization": "LayerNorm", "RMSNormalization": "RMSNorm"}
PREFIXES = ("test_layer_normalization", "test_rms_normalization")
SUPPORTED = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16}
IR_VERSION = 10


@dataclass
class Case:
    name: str
    model: onnx.ModelProto
    data_sets: list = field(default_factory=list)  # [(inputs list, outputs list)]
    rtol: float = 1e-3
    atol: float = 1e-7
    source: str = ""


def _cases_from_data_dir():
    # TRT_FASTOPS_ONNX_NODE_DATA: another onnx/backend/test/data/node directory.
    root = os.environ.get("TRT_FASTOPS_ONNX_NODE_DATA") or os.path.join(
        os.path.dirname(onnx.__file__), "backend", "test", "data", "node")
    cases = []
    for d in sorted(glob.glob(os.path.join(root, "test_*"))):
        name = os.path.basename(d)
        if not name.startswith(PREFIXES):
            continue
        model = onnx.load(os.path.join(d, "model.onnx"))
        sets = []
        for ds in sorted(glob.glob(os.path.join(d, "test_data_set_*"))):
            def load(kind):
                files = sorted(glob.glob(os.path.join(ds, f"{kind}_*.pb")),
                               key=lambda f: int(re.findall(r"_(\d+)\.pb$", f)[0]))
                out = []
                for f in files:
                    t = onnx.TensorProto()
                    with open(f, "rb") as fh:
                        t.ParseFromString(fh.read())
                    out.append(numpy_helper.to_array(t))
                return out
            sets.append((load("input"), load("output")))
        cases.append(Case(name, model, sets, source=d))
    return cases


def _cases_generated():
    import onnx.backend.test.case.node as node_cases

    for mod in ("layernormalization", "rmsnormalization"):
        importlib.import_module(f"onnx.backend.test.case.node.{mod}")
    found = getattr(node_cases, "_NodeTestCases", None)
    if found is None:  # private list gone: the public (slower) collector
        found = node_cases.collect_testcases(None)
    cases = []
    seen = set()
    for c in found:
        if not c.name.startswith(PREFIXES) or c.name in seen:
            continue
        seen.add(c.name)
        sets = [(list(i), list(o)) for i, o in c.data_sets]
        cases.append(Case(c.name, c.model, sets, rtol=c.rtol, atol=c.atol, source="onnx.backend.test.case.node"))
    return cases


def collect_cases():
    cases = _cases_from_data_dir()
    return cases if cases else _cases_generated()


CASES = collect_cases()
BY_NAME = {c.name: c for c in CASES}
REFUSED: dict[str, str] = {}


def norm_node(case):
    """The LayerNormalization / RMSNormalization node of a case (of its
    non-expanded sibling for an expanded case)."""
    nodes = [n for n in case.model.graph.node if n.op_type in OPS and n.domain in ("", "ai.onnx")]
    if nodes:
        assert len(nodes) == 1, case.name
        return nodes[0]
    base = re.sub(r"_expanded(_ver\d+)?$", "", case.name)
    assert base != case.name and base in BY_NAME, f"{case.name}: no {list(OPS)} node and no non-expanded sibling"
    return norm_node(BY_NAME[base])


def rewrite(case):
    node = norm_node(case)
    g = case.model.graph
    ours = helper.make_node(OPS[node.op_type], list(node.input), list(node.output), domain=DOMAIN,
                            name=node.name or case.name)
    ours.attribute.extend(node.attribute)
    # Graph inputs/outputs are those of the case (same names as the node's).
    graph = helper.make_graph([ours], case.name, list(g.input), list(g.output), list(g.initializer))
    default = max([o.version for o in case.model.opset_import if o.domain in ("", "ai.onnx")] or [17])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", default), helper.make_opsetid(DOMAIN, 1)],
                             ir_version=IR_VERSION)


def expected_refusal(case):
    """Why our op must refuse this case, or None when it must run it."""
    node = norm_node(case)
    g = case.model.graph
    x_type = g.input[0].type.tensor_type.elem_type
    op = OPS[node.op_type]
    if x_type not in SUPPORTED:
        name = {onnx.TensorProto.DOUBLE: "float64"}.get(x_type, onnx.helper.tensor_dtype_to_np_dtype(x_type).name)
        return f"{op}: input 'X' (index 0) is {name}, expected float32, float16 or bfloat16"
    for a in node.attribute:
        if a.name == "stash_type" and a.i != 1:
            return f"{op}: attribute 'stash_type' is {a.i}, expected 1"
    return None


def test_cases_found():
    names = {c.name for c in CASES}
    assert any(n.startswith("test_layer_normalization") for n in names), "no LayerNormalization node cases found"
    assert any(n.startswith("test_rms_normalization") for n in names), "no RMSNormalization node cases found"
    assert len(CASES) >= 38, sorted(names)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_node_case(case):
    model = rewrite(case)
    refusal = expected_refusal(case)
    if refusal is not None:
        with pytest.raises(Exception) as e:
            sess = make_session(model)
            for inputs, _ in case.data_sets:
                sess.run(None, {i.name: v for i, v in zip(model.graph.input, inputs)})
        assert refusal in str(e.value), str(e.value)
        REFUSED[case.name] = refusal
        return
    sess = make_session(model)
    assert case.data_sets, f"{case.name}: no test data"
    out_names = [o.name for o in model.graph.output]
    for inputs, outputs in case.data_sets:
        feeds = {i.name: v for i, v in zip(model.graph.input, inputs)}
        got = sess.run(out_names, feeds)
        assert len(got) == len(outputs)
        for name, g, want in zip(out_names, got, outputs):
            assert g.dtype == want.dtype and g.shape == want.shape, (name, g.dtype, g.shape, want.dtype, want.shape)
            np.testing.assert_allclose(g, want, rtol=case.rtol, atol=max(case.atol, 1e-6),
                                       err_msg=f"{case.name}: output {name}")


def test_refused_cases_listed():
    """Lists the cases our ops refuse (with our message); runs after test_node_case."""
    refused = {c.name: expected_refusal(c) for c in CASES if expected_refusal(c) is not None}
    print(f"\n{len(CASES)} ONNX node cases ({CASES[0].source if CASES else 'none'}); "
          f"{len(refused)} refused by design:")
    for name, why in sorted(refused.items()):
        print(f"  {name}: {why}")
    # With onnx 1.23 every case is float32 with stash_type 1: none refused.
    assert set(refused) == set(REFUSED) or not REFUSED


def test_refusal_path_on_a_float64_variant():
    """The refusal branch above, exercised: a case turned float64 is refused
    with our message (onnx ships no such case today)."""
    base = next(c for c in CASES if c.name == "test_layer_normalization_default_axis")
    model = onnx.ModelProto()
    model.CopyFrom(base.model)
    for vi in list(model.graph.input) + list(model.graph.output):
        if vi.name in ("X", "W", "B", "Y"):
            vi.type.tensor_type.elem_type = onnx.TensorProto.DOUBLE
    case = Case(base.name + "_float64", model,
                [([a.astype(np.float64) for a in i], [a.astype(np.float64) for a in o]) for i, o in base.data_sets])
    refusal = expected_refusal(case)
    assert refusal == "LayerNorm: input 'X' (index 0) is float64, expected float32, float16 or bfloat16"
    with pytest.raises(Exception) as e:
        make_session(rewrite(case))
    assert refusal in str(e.value)
