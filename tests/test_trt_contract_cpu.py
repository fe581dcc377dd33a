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

import os
import re
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
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
        pytest.skip(f"{BINARY} not built (needs TensorRT headers: configure with "
                    "-DTRT_FASTOPS_TRT_INCLUDE=... -DTRT_FASTOPS_BUILD_TRT_TESTS=ON, or set "
                    "TRT_FASTOPS_TRT_CONTRACT_TEST)")
    return max(found, key=lambda p: p.stat().st_mtime)  # the most recent build


def test_trt_contract_without_gpu():
    binary = contract_test_binary()
    proc = subprocess.run([str(binary), "--no-enqueue"], capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    summary = re.search(r"trt contract: (\d+) passed, (\d+) failed", out)
    assert summary, f"no summary line from {binary}:\n{out}"
    assert proc.returncode == 0 and summary.group(2) == "0", f"{binary} failed:\n{out}"
    assert int(summary.group(1)) > 100, f"suspiciously few checks ran:\n{out}"
