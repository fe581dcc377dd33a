"""Every ONNX node test case of Attention (test_attention_*), run with the node
rewritten to our op (trt_fastops Attention: same inputs, outputs and
attributes) through ONNX Runtime's CPU provider.

Cases come from tests/test_onnx_node_cases.py's loader (the node test data of
the installed onnx, TRT_FASTOPS_ONNX_NODE_DATA, or onnx's own case definitions),
with the prefix switched to test_attention. `*_expanded*` cases hold the
function-expanded graph; they run our op with the node of their non-expanded
sibling (same data).

Cases using what our op refuses must be refused with the expected message;
test_refused_cases_listed prints them with the reason:
- qk_matmul_output requested: not supported yet (our message);
- nonpad_kv_seqlen (ONNX Attention-24 input 6): our op has 6 inputs, ONNX
  Runtime refuses the 7-input node against our schema;
- left_window_size / right_window_size other than -1 (ONNX Attention-25): our message.
Cases at opset 24 / 25 that use only Attention-23 features must run.
"""
from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

pytest.importorskip("onnxruntime")

from trt_fastops import DOMAIN  # noqa: E402
from trt_fastops.ort import make_session  # noqa: E402

# The norm node-case module's loader, in a private module instance whose
# prefix is switched to Attention's cases (the real test module is untouched).
_spec = importlib.util.spec_from_file_location(
    "trt_fastops_attention_node_case_loader", Path(__file__).resolve().parent / "test_onnx_node_cases.py")
_loader = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _loader  # dataclasses look their module up there
_spec.loader.exec_module(_loader)
_loader.PREFIXES = ("test_attention",)
importlib.import_module("onnx.backend.test.case.node.attention")  # registers the generated cases
Case = _loader.Case
IR_VERSION = _loader.IR_VERSION

CASES = _loader.collect_cases()
BY_NAME = {c.name: c for c in CASES}
REFUSED: dict[str, str] = {}
# Looser than the cases' own 1e-3 / 1e-7 where the expected data was computed
# in 16-bit arithmetic (numpy float16 / bfloat16 matmul and softmax in the
# reference) while we accumulate in float32 / float64 and round once.
TOL_16BIT = {onnx.TensorProto.FLOAT16: (4e-3, 4e-3), onnx.TensorProto.BFLOAT16: (2e-2, 2e-2)}


def attention_node(case):
    nodes = [n for n in case.model.graph.node if n.op_type == "Attention" and n.domain in ("", "ai.onnx")]
    if nodes:
        assert len(nodes) == 1, case.name
        return nodes[0]
    base = re.sub(r"_expanded(_ver\d+)?$", "", case.name)
    assert base != case.name and base in BY_NAME, f"{case.name}: no Attention node and no non-expanded sibling"
    return attention_node(BY_NAME[base])


BF16 = onnx.TensorProto.BFLOAT16


def rewrite(case):
    """Our node with the case's graph inputs and outputs. ONNX Runtime's Python API
    cannot carry bfloat16 arrays, so bfloat16 graph inputs / outputs become float32
    ones around Cast nodes (exact: every bfloat16 value is a float32 value); the
    feeds and expected outputs are converted to match (bf16_to_f32)."""
    node = attention_node(case)
    g = case.model.graph
    ours = helper.make_node("Attention", list(node.input), list(node.output), domain=DOMAIN,
                            name=node.name or case.name)
    ours.attribute.extend(node.attribute)
    pre, post, inputs, outputs = [], [], [], []
    for vi in g.input:
        if vi.type.tensor_type.elem_type == BF16:
            f = helper.make_tensor_value_info(vi.name + "_f32", onnx.TensorProto.FLOAT, None)
            f.type.tensor_type.shape.CopyFrom(vi.type.tensor_type.shape)
            inputs.append(f)
            pre.append(helper.make_node("Cast", [f.name], [vi.name], to=BF16))
        else:
            inputs.append(vi)
    for vi in g.output:
        if vi.type.tensor_type.elem_type == BF16:
            outputs.append(helper.make_tensor_value_info(vi.name + "_f32", onnx.TensorProto.FLOAT, None))
            post.append(helper.make_node("Cast", [vi.name], [vi.name + "_f32"], to=onnx.TensorProto.FLOAT))
        else:
            outputs.append(vi)
    graph = helper.make_graph(pre + [ours] + post, case.name, inputs, outputs, list(g.initializer))
    default = max([o.version for o in case.model.opset_import if o.domain in ("", "ai.onnx")] or [23])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", default), helper.make_opsetid(DOMAIN, 1)],
                             ir_version=IR_VERSION)


def expected_refusal(case):
    """Why our op must refuse this case (a substring of the error), or None.
    Attributes are read before the outputs are checked, so a window wins."""
    node = attention_node(case)
    outputs = list(node.output)
    if len(node.input) > 6:
        # ONNX Runtime, against our schema (K and V are optional there: packed_qkv = 1 omits them)
        return "has input size 7 not in range [min=1, max=6]"
    for a in node.attribute:
        if a.name in ("left_window_size", "right_window_size") and a.i != -1:
            return (f"Attention: attribute '{a.name}' is {a.i}; sliding-window attention (ONNX Attention-25) "
                    "is not supported")
    if len(outputs) > 3 and outputs[3]:
        return "Attention: output 'qk_matmul_output' (index 3) is requested; it is not supported yet"
    return None


def refusal_reason(case):
    why = expected_refusal(case)
    if why is None:
        return None
    if "input size 7" in why:
        return "nonpad_kv_seqlen (ONNX Attention-24 input 6; ONNX Runtime refuses 7 inputs against our schema)"
    if "sliding-window" in why:
        return "sliding window (ONNX Attention-25 left/right_window_size)"
    return "qk_matmul_output requested (not supported yet)"


def bf16_to_f32(a):
    """ml_dtypes bfloat16 arrays (what onnx's cases hold) -> float32; others unchanged."""
    a = np.asarray(a)
    return a.astype(np.float32) if a.dtype.name == "bfloat16" else a


def test_cases_found():
    names = {c.name for c in CASES}
    assert "test_attention_4d" in names and "test_attention_3d_gqa" in names, sorted(names)
    assert len(CASES) >= 100, len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_node_case(case):
    model = rewrite(case)
    refusal = expected_refusal(case)
    if refusal is not None:
        with pytest.raises(Exception) as e:
            sess = make_session(model)
            for inputs, _ in case.data_sets:
                sess.run(None, {i.name: bf16_to_f32(v) for i, v in zip(model.graph.input, inputs)})
        assert refusal in str(e.value), str(e.value)
        REFUSED[case.name] = refusal
        return
    sess = make_session(model)
    assert case.data_sets, f"{case.name}: no test data"
    q_type = case.model.graph.input[0].type.tensor_type.elem_type
    rtol, atol = TOL_16BIT.get(q_type, (case.rtol, max(case.atol, 1e-6)))
    out_names = [o.name for o in model.graph.output]
    for inputs, outputs in case.data_sets:
        feeds = {i.name: bf16_to_f32(v) for i, v in zip(model.graph.input, inputs)}
        got = sess.run(out_names, feeds)
        assert len(got) == len(outputs)
        for name, g, want in zip(out_names, got, map(bf16_to_f32, outputs)):
            assert g.dtype == want.dtype and g.shape == want.shape, (name, g.dtype, g.shape, want.dtype, want.shape)
            assert not np.isnan(np.asarray(g, np.float32)).any(), f"{case.name}: output {name} has NaN"
            np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(want, np.float32), rtol=rtol, atol=atol,
                                       err_msg=f"{case.name}: output {name}")


def test_refused_cases_listed():
    """Lists the cases our op refuses by design, with the reason."""
    refused = {c.name: refusal_reason(c) for c in CASES if expected_refusal(c) is not None}
    assert set(refused) == set(REFUSED) or not REFUSED
    print(f"\n{len(CASES)} ONNX Attention node cases ({CASES[0].source if CASES else 'none'}); "
          f"{len(refused)} refused by design:")
    for name, why in sorted(refused.items()):
        print(f"  {name}: {why}")
    runnable = [c.name for c in CASES if expected_refusal(c) is None]
    assert len(runnable) >= 90, runnable
