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
