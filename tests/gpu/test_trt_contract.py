"""TensorRT plugin contract test including enqueue on the GPU.

Same program as tests/test_trt_contract_cpu.py (tests/trt/contract_test.cc),
run with --require-gpu: every plugin is enqueued on real device memory for
float32/float16/bfloat16 on several shapes (odd cols, broadcast Skip, scalar
Scale, placeholder outputs) and compared with float64 references, outputs
poisoned with NaN first. Needs no TensorRT library, only the program built
against TensorRT headers. Set TRT_FASTOPS_TRT_CONTRACT_TEST to the program to
make a missing build an error instead of a skip.
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
BINARY = "trt_fastops_trt_contract_test"


def contract_test_binary() -> Path:
    explicit = os.environ.get("TRT_FASTOPS_TRT_CONTRACT_TEST")
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            pytest.fail(f"TRT_FASTOPS_TRT_CONTRACT_TEST={explicit} does not exist")
        return path
    found = [p for p in REPO_ROOT.glob(f"build/*/tests/trt/{BINARY}") if p.is_file()]
    if not found:
        pytest.skip(f"{BINARY} not built (configure with -DTRT_FASTOPS_TRT_INCLUDE=... "
                    "-DTRT_FASTOPS_BUILD_TRT_TESTS=ON, or set TRT_FASTOPS_TRT_CONTRACT_TEST)")
    return max(found, key=lambda p: p.stat().st_mtime)


@pytest.mark.gpu
def test_trt_contract_with_enqueue():
    binary = contract_test_binary()
    proc = subprocess.run([str(binary), "--require-gpu"], capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    summary = re.search(r"trt contract: (\d+) passed, (\d+) failed", out)
    assert summary, f"no summary line from {binary}:\n{out}"
    assert "SKIP enqueue" not in out and "[enqueue]" in out, f"enqueue did not run:\n{out}"
    assert proc.returncode == 0 and summary.group(2) == "0", f"{binary} failed:\n{out}"
