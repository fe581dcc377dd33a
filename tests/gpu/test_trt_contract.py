"""TensorRT plugin contract test including enqueue on the GPU.

Same program as tests/test_trt_contract_cpu.py (tests/trt/contract_test.cc),
run with --require-gpu: every plugin is enqueued on real device memory for
float32/float16/bfloat16 on several shapes (norms: odd cols, broadcast Skip,
scalar Scale, placeholder outputs; Conv / ConvTranspose: 1-D to 3-D, strides,
dilations, pads, every auto_pad, groups, output_padding / output_shape, fused
activations, first enqueue (planning) and replay, workspace exactly as asked
for, no cuDNN workspace; Attention: 3-D / 4-D, GQA, causal, bool and
additive (short) masks, fully masked rows, softcap, scale, past_key /
past_value with present outputs, in the workspace, or as placeholders,
head dims 16 to 256, float16 / bfloat16) and compared with float64
references, outputs poisoned with NaN first. Needs no TensorRT library, only the program built
against TensorRT headers. Set TRT_FASTOPS_TRT_CONTRACT_TEST to the program to
make a missing build an error instead of a skip.
"""
from __future__ import annotations

import pytest


@pytest.mark.gpu
def test_trt_contract_with_enqueue(trt_contract):
    proc, out, summary = trt_contract("--require-gpu")
    assert "SKIP enqueue" not in out and "[enqueue]" in out, f"enqueue did not run:\n{out}"
    assert "[conv enqueue]" in out and "[attention enqueue]" in out, f"conv / attention enqueue did not run:\n{out}"
    assert proc.returncode == 0 and summary.group(2) == "0", f"contract test failed:\n{out}"
