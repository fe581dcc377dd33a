"""Shared test setup.

GPU tests carry the marker `gpu` and are skipped cleanly where no CUDA device
is visible (CI). Tests that also need torch or onnxruntime-gpu skip on their
own, saying which is missing.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
# `import models` finds the builders in models/. Appended, not prepended, so an
# installed trt_fastops (with its native libraries) wins over the source tree.
if str(REPO_ROOT) not in sys.path:
    sys.path.append(str(REPO_ROOT))


def _cuda_devices() -> tuple[int, str]:
    """(visible CUDA devices, why none) — an import failure is reported, not hidden."""
    try:
        from trt_fastops import _C
    except ImportError as e:
        return 0, f"trt_fastops._C does not import ({e})"
    n = _C.cuda_device_count()
    return n, "" if n else "no CUDA GPU visible"


def pytest_collection_modifyitems(config, items):
    n, why = _cuda_devices()
    if n > 0:
        return
    skip = pytest.mark.skip(reason=f"needs a CUDA GPU: {why}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def ort_library() -> str:
    import trt_fastops

    return trt_fastops.library_path("ort")


@pytest.fixture(scope="session")
def ort_cuda():
    """onnxruntime with a working CUDAExecutionProvider, or skip."""
    ort = pytest.importorskip("onnxruntime")
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        pytest.skip("needs onnxruntime-gpu (CUDAExecutionProvider not available)")
    return ort


@pytest.fixture(scope="session")
def trt_contract():
    """Runs the TensorRT plugin contract program (tests/trt/contract_test.cc) with the given
    arguments; returns (process, output, summary match of 'trt contract: N passed, M failed').

    Found through $TRT_FASTOPS_TRT_CONTRACT_TEST (a missing file is an error), else the newest
    build/*/tests/trt/ build; skips when it was not built (it needs TensorRT headers)."""
    import os
    import re
    import subprocess

    name = "trt_fastops_trt_contract_test"
    explicit = os.environ.get("TRT_FASTOPS_TRT_CONTRACT_TEST")
    if explicit:
        binary = Path(explicit)
        if not binary.is_file():
            pytest.fail(f"TRT_FASTOPS_TRT_CONTRACT_TEST={explicit} does not exist")
    else:
        found = [p for p in REPO_ROOT.glob(f"build/*/tests/trt/{name}") if p.is_file()]
        if not found:
            pytest.skip(f"{name} not built (needs TensorRT headers: configure with "
                        "-DTRT_FASTOPS_TRT_INCLUDE=... -DTRT_FASTOPS_BUILD_TRT_TESTS=ON, or set "
                        "TRT_FASTOPS_TRT_CONTRACT_TEST)")
        binary = max(found, key=lambda p: p.stat().st_mtime)  # the most recent build

    def run(*args, timeout=600):
        proc = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=timeout)
        out = proc.stdout + proc.stderr
        summary = re.search(r"trt contract: (\d+) passed, (\d+) failed", out)
        assert summary, f"no summary line from {binary}:\n{out}"
        return proc, out, summary

    return run
