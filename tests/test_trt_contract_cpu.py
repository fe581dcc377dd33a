"""TensorRT plugin contract test, CPU part (no GPU needed).

Runs the C++ contract program (tests/trt/contract_test.cc), which drives the
plugins in libtrt_fastops_trt.so / libtrt_fastops_trt_autoload.so exactly as
TensorRT would, with test doubles for TensorRT's objects. It needs TensorRT's
headers to build (not its libraries), so it is only built on request:

    cmake -S . -B build/trt -G Ninja -DTRT_FASTOPS_TRT_INCLUDE=<TensorRT include dir> \
          -DTRT_FASTOPS_BUILD_TRT_TESTS=ON ...
    cmake --build build/trt --target trt_fastops_trt_contract_test

The program is found through $TRT_FASTOPS_TRT_CONTRACT_TEST, else under
build/*/tests/trt/. Without it (CI has no TensorRT headers) the test skips.
Enqueue is skipped here (--no-enqueue); tests/gpu/test_trt_contract.py runs it.
"""
from __future__ import annotations


def test_trt_contract_without_gpu(trt_contract):
    proc, out, summary = trt_contract("--no-enqueue", timeout=300)
    assert proc.returncode == 0 and summary.group(2) == "0", f"contract test failed:\n{out}"
